"""Answers a session's client did not use, and the rounds after them.

* the client library gives up on a round (a timeout): the next whole call asks
  for that round's notices again (``redeliver``, docs/PROTOCOL.md, "Answers not
  used"), so an operator's notice is never consumed without reaching a prompt,
  and never reaches two (a lost round that failed gives back nothing);
* after an answer with ``delta: false`` the next delta is of that prompt (only
  the new messages travel), in either form.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import pytest

import scoutd
from scoutd.errors import DaemonTimeout

from ..support.daemon import Daemon, conversation, wait_for
from ..test_server import release

RUN = conversation(40, output_size=60, user_every=0)
STRATEGIES = "gate,none,inbox"


FAILING_GATE = '''
import os, time

def gate(messages):
    """As the suite's gate; once released, raise if gate.fail exists (after marking it)."""
    here = os.path.dirname(os.path.abspath(__file__))
    deadline = time.monotonic() + 30
    while not os.path.exists(os.path.join(here, "gate.release")):
        if time.monotonic() > deadline:
            raise RuntimeError("gate never released")
        time.sleep(0.005)
    if os.path.exists(os.path.join(here, "gate.fail")):
        open(os.path.join(here, "gate.failed"), "w").close()
        raise RuntimeError("this round fails")
    return messages
'''


@contextlib.contextmanager
def _gated_session(name: str) -> Iterator[tuple[Daemon, str, Any]]:
    """A daemon with the gate plugin (open), a client that waits 1 s, a session of it."""
    daemon = Daemon(plugins={"gate": "gate:gate"})
    with open(os.path.join(daemon.dir, "gate.py"), "w") as handle:
        handle.write(FAILING_GATE)
    save = os.path.join(daemon.dir, name)
    with (
        daemon,
        scoutd.Client(daemon.socket_path, timeout=1.0) as client,
        client.session(save) as session,
    ):
        release(daemon)
        yield daemon, save, session


def _give_up(daemon: Daemon, session: Any) -> None:
    """A round that waits at the closed gate until the client gives up; the gate
    opens again."""
    os.remove(os.path.join(daemon.dir, "gate.release"))
    with pytest.raises(DaemonTimeout):
        session.prepare_prompt(RUN[:6], STRATEGIES)
    release(daemon)


def test_the_notice_of_a_round_the_client_timed_out_on_reaches_a_prompt() -> None:
    """The operator's notice is taken by a round whose answer the client gave up
    on: the next round of that session delivers it."""
    with _gated_session("late.chat") as (daemon, save, session):
        session.prepare_prompt(RUN[:4], STRATEGIES)
        scoutd.write_notice(save, "operator: stop and report")
        _give_up(daemon, session)
        inbox = scoutd.inbox_dir(save)
        wait_for(lambda: not os.listdir(inbox), 10.0, "the notice to be taken")
        prompt = session.prepare_prompt(RUN[:6], STRATEGIES)
    assert any("stop and report" in str(message) for message in prompt)


@pytest.mark.parametrize("replacing", [False, True], ids=["running", "replacing"])
def test_the_delta_after_a_whole_answer_is_of_that_prompt(replacing: bool) -> None:
    """A client that recovered with ``delta: false`` (after deltas of one form) holds
    the whole prompt: the next round's delta in that form keeps it, and only the new
    messages travel (today all 62 travel again)."""
    with Daemon() as daemon, daemon.connect() as client:
        save = os.path.join(daemon.dir, "whole.chat")
        session = client.call("session.open", {"save_file": save})["result"]["session"]
        form: dict[str, Any] = {"session": session, "strategies": "none", "delta": True}
        if replacing:
            form["delta_replace"] = True
        assert "keep" in client.call("prepare_prompt", {**form, "messages": RUN[:50]})["result"]
        whole = {"session": session, "messages": RUN[:60], "strategies": "none"}
        assert "messages" in client.call("prepare_prompt", whole)["result"]
        params = {**form, "append": RUN[60:62], "base": 60}
        result = client.call("prepare_prompt", params)["result"]
        assert (result["keep"], len(result["append"])) == (60, 2)


def test_a_lost_round_that_failed_gives_back_no_older_notice() -> None:
    """A round the client gave up on, which then failed in the daemon, delivered
    nothing: the next whole call's ``redeliver`` must not give back the notices of
    the round before it, which reached a prompt the client used (at most once)."""
    with _gated_session("once.chat") as (daemon, save, session):
        scoutd.write_notice(save, "operator: told once")
        first = session.prepare_prompt(RUN[:4], STRATEGIES)
        assert sum("told once" in str(message) for message in first) == 1
        fail = os.path.join(daemon.dir, "gate.fail")
        open(fail, "w").close()
        _give_up(daemon, session)
        failed = os.path.join(daemon.dir, "gate.failed")
        wait_for(lambda: os.path.exists(failed), 10.0, "the lost round to fail")
        os.remove(fail)
        again = session.prepare_prompt(RUN[:6], STRATEGIES)
    assert not any("told once" in str(message) for message in again)
