"""An abort that is in the inbox before a prepare call starts always fails that call.

The watcher and the call's ``inbox`` strategy race for a fresh ``abort``: if the
watcher moved it away while the strategy listed the inbox, the call used to
answer with a prompt (the agent got one more inference) and the session
aborted only from the next call.
"""

from __future__ import annotations

import os
from functools import partial

from scoutd.inbox.aborted import held
from scoutd.protocol import ABORTED
from scoutd.strategies.inbox import inbox_dir
from scoutd.testing.wire import wait_for
from tests.support.daemon import Daemon, conversation

ROUNDS = 25


def _rename_in_abort(save_file: str, reason: str) -> None:
    """An abort as a hand-made writer makes it: written aside, renamed in, mtime now."""
    inbox = inbox_dir(save_file)
    os.makedirs(inbox, exist_ok=True)
    temp = os.path.join(inbox, ".abort.tmp")
    with open(temp, "w", encoding="utf-8") as f:
        f.write(reason)
    os.rename(temp, os.path.join(inbox, "abort"))


def _gone(path: str) -> bool:
    return not os.path.exists(path)


def test_an_abort_renamed_in_just_before_the_call_fails_the_call() -> None:
    with Daemon() as d, d.connect() as c:
        for n in range(ROUNDS):
            save_file = os.path.join(d.dir, f"chat{n}.chat")
            session = c.call("session.open", {"save_file": save_file})["result"]["session"]
            messages = conversation(3)
            first = c.call("prepare_prompt", {"session": session, "messages": messages})
            assert "result" in first, first
            _rename_in_abort(save_file, f"stop {n}")
            reply = c.call("prepare_prompt", {"session": session, "messages": messages})
            assert reply.get("error", {}).get("code") == ABORTED, (n, reply)
            assert reply["error"]["data"]["reason"] == f"stop {n}"
            # The chat is marked before its abort leaves the inbox, so the call may
            # answer while the watcher is still moving the entry: the marker is
            # there now, the entry goes soon after.
            assert held(save_file) == f"stop {n}"
            abort = os.path.join(inbox_dir(save_file), "abort")
            wait_for(partial(_gone, abort), 10, "the abort to be consumed")
