"""One rule for what a message list must be, on the library path and the daemon path.

docs/PROTOCOL.md, "Messages": an array of objects; what an object holds is
its format's business (malformed messages pass through, on both paths).
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import scoutd
from scoutd.engine.message_rules import InvalidMessages, check_messages, message_problem
from tests.support.daemon import Daemon, LineClient

ROOT = pathlib.Path(__file__).resolve().parents[1]
GOOD = {"role": "user", "content": "hi"}

# (messages, position of the first bad message; None: the list itself)
REFUSED: list[tuple[Any, int | None]] = [
    ([GOOD, "notadict"], 1),
    (["notadict"], 0),
    ([GOOD, None], 1),
    ([GOOD, 42, "x"], 1),
    ([GOOD, [GOOD]], 1),
]
# Malformed for their formats, but objects: accepted and passed through, on both paths.
ACCEPTED: list[Any] = [
    [{"role": "user"}],  # no content
    [{"content": "no role"}],
    [{}],
    [GOOD, {"role": "assistant", "tool_calls": [{"id": "c1"}]}],
    [{"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"}],
    [{"role": "user", "content": 3}],
]


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with Daemon() as running:
        yield running


@pytest.fixture
def client(daemon: Daemon) -> Iterator[LineClient]:
    with daemon.connect() as connected:
        yield connected


# --- the pure rule -----------------------------------------------------------------------


@pytest.mark.parametrize(("messages", "position"), REFUSED)
def test_non_objects_are_refused_at_their_position(messages: Any, position: int) -> None:
    problem = message_problem(messages)
    assert problem is not None and problem.position == position
    assert "must be an object" in problem.reason


@pytest.mark.parametrize("messages", ["a string", b"bytes", None, 42, {"role": "user"}])
def test_the_list_itself_must_be_a_list(messages: Any) -> None:
    problem = message_problem(messages)
    assert problem is not None and problem.position is None
    assert "list of messages" in problem.reason


def test_keys_must_be_strings_as_in_json() -> None:
    problem = message_problem([GOOD, {1: "x"}])
    assert problem is not None and problem.position == 1 and "keys" in problem.reason


@pytest.mark.parametrize("messages", ACCEPTED)
def test_objects_keep_the_rule_whatever_they_hold(messages: Any) -> None:
    assert message_problem(messages) is None
    check_messages(messages)


@given(st.lists(st.one_of(st.dictionaries(st.text(max_size=5), st.none()), st.integers())))
def test_refused_exactly_when_some_entry_is_not_an_object(messages: list[Any]) -> None:
    problem = message_problem(messages)
    bad = [i for i, message in enumerate(messages) if not isinstance(message, dict)]
    assert (problem.position if problem else None) == (bad[0] if bad else None)


def test_the_error_is_a_type_error_and_a_value_error() -> None:
    with pytest.raises(InvalidMessages) as caught:
        check_messages([GOOD, "notadict"])
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, ValueError)
    assert caught.value.position == 1
    assert str(caught.value) == "invalid message 1: a message must be an object, got str"


# --- the library path --------------------------------------------------------------------


@pytest.mark.parametrize(("messages", "position"), REFUSED)
def test_the_library_refuses_what_the_rule_refuses(messages: Any, position: int) -> None:
    with pytest.raises(InvalidMessages) as caught:
        scoutd.prepare(messages, "none")
    assert caught.value.position == position


def test_the_library_refuses_before_touching_the_inbox(tmp_path: Any) -> None:
    save_file = str(tmp_path / "agent.chat")
    scoutd.write_notice(save_file, "still here", name="n.txt")
    with pytest.raises(InvalidMessages):
        scoutd.prepare([GOOD, "notadict"], "inbox", save_file=save_file)
    assert os.listdir(scoutd.inbox_dir(save_file)) == ["n.txt"]


# --- the daemon path, and parity --------------------------------------------------------


@pytest.mark.parametrize(("messages", "position"), REFUSED)
def test_the_daemon_refuses_what_the_library_refuses(
    client: LineClient, messages: Any, position: int
) -> None:
    answer = client.call("prepare_prompt", {"messages": messages, "strategies": "none"})
    assert answer["error"]["code"] == -32602
    assert answer["error"]["data"]["path"] == f"$.params.messages[{position}]"


@pytest.mark.parametrize("messages", ACCEPTED)
def test_both_paths_accept_and_return_the_same_prompt(client: LineClient, messages: Any) -> None:
    library = scoutd.prepare(messages)
    answer = client.call("prepare_prompt", {"messages": messages})
    assert answer["result"]["messages"] == library.messages
    assert answer["result"]["report"][-1]["malformed"] == library.report[-1].malformed


def test_the_daemon_applies_the_rule_to_append_and_session_open(
    daemon: Daemon, client: LineClient
) -> None:
    save_file = os.path.join(daemon.dir, "rules.chat")
    refused = client.call("session.open", {"save_file": save_file, "messages": [GOOD, "x"]})
    assert refused["error"]["data"]["path"] == "$.params.messages[1]"
    session = client.call("session.open", {"save_file": save_file, "messages": [GOOD]})
    sid = session["result"]["session"]
    bad = client.call("prepare_prompt", {"session": sid, "append": [GOOD, GOOD, 7], "base": 1})
    assert bad["error"]["code"] == -32602
    assert bad["error"]["data"]["path"] == "$.params.append[2]"
    good = client.call("prepare_prompt", {"session": sid, "append": [{"role": "user"}], "base": 1})
    assert [m.get("content") for m in good["result"]["messages"]] == ["hi", None]


def test_scoutd_prepare_local_names_the_bad_message(tmp_path: Any) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "scoutd", "prepare", "--local", "-"],
        input=b'[{"role": "user", "content": "hi"}, "notadict"]',
        capture_output=True,
        timeout=30,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 1
    assert done.stderr == b"scoutd: invalid message 1: a message must be an object, got str\n"
