"""What ``scoutd.Session`` promises beside the prompt: a closed or aborted session
says so, a failed round leaves the conversation as it was (or, should even that
fail, forgets it), recall reads the session's own format, and a round that only
adds costs no re-index.

The prompts themselves are compared with ``scoutd.prepare`` in tests/test_session.py;
conversations of an SDK's objects are in test_session_sdk_objects.py.
"""

from __future__ import annotations

from typing import Any

import pytest

import scoutd
from scoutd import Aborted, Session
from scoutd.engine.incremental import SessionPrompt
from scoutd.errors import InvalidMessages, SessionClosed
from scoutd.protocol.messages import MAX_RECALL_SEARCH
from scoutd.protocol.recall_args import NO_CONVERSATION
from scoutd.recall import find_output

from .test_session_failures import chat_run, scout_run


def test_a_closed_session_says_so_for_a_round_and_a_recall() -> None:
    session = Session()
    session.prepare_prompt(scout_run(2))
    session.close()
    for attempt in (lambda: session.prepare(scout_run(2)), lambda: session.recall("#1")):
        with pytest.raises(SessionClosed, match=r"^the session is closed$"):
            attempt()
    assert session.held_bytes() == 0


def test_a_new_session_is_open_and_not_aborted() -> None:
    session = Session()
    assert session.aborted is False and session.reason is None and session.closed is False


def test_an_aborted_round_leaves_recall_the_conversation_before_it() -> None:
    scoutd.register_strategy("aborts_second", _fails_on_round(2, Aborted("stop")))
    try:
        session = Session(strategies="aborts_second")
        first = scout_run(2)
        session.prepare_prompt(first)
        with pytest.raises(Aborted, match="stop"):
            session.prepare_prompt(scout_run(4))
        assert session.recall("#3") == find_output(first, "#3").text  # not held: unknown
        assert session.recall("#2") == find_output(first, "#2").text
    finally:
        scoutd.unregister_strategy("aborts_second")


def test_an_abort_without_words_is_still_an_abort_every_round_after() -> None:
    def stop(messages: list[Any]) -> list[Any]:
        raise Aborted("")

    scoutd.register_strategy("stops_blank", stop)
    try:
        session = Session(strategies="stops_blank")
        with pytest.raises(Aborted):
            session.prepare_prompt(scout_run(1))
        assert session.aborted and session.reason == ""
        with pytest.raises(Aborted) as again:
            session.prepare_prompt(scout_run(1))
        assert again.value.reason == "aborted"
    finally:
        scoutd.unregister_strategy("stops_blank")


def _fails_on_round(number: int, error: BaseException) -> Any:
    """A strategy that passes the messages on, and raises ``error`` at round ``number``."""
    rounds = [0]

    def strategy(messages: list[Any]) -> list[Any]:
        rounds[0] += 1
        if rounds[0] == number:
            raise error
        return messages

    return strategy


@pytest.mark.parametrize(
    "error", [RecursionError("deep"), ValueError("broken")], ids=["recursion", "error"]
)
def test_a_failed_round_leaves_the_conversation_of_the_last_good_one(error: Exception) -> None:
    scoutd.register_strategy("fails_second", _fails_on_round(2, error))
    try:
        session = Session(strategies="fails_second")
        first = scout_run(3)
        session.prepare_prompt(first)
        expected = find_output(first, "#2").text
        raised = InvalidMessages if isinstance(error, RecursionError) else type(error)
        with pytest.raises(raised):
            session.prepare_prompt(scout_run(5))
        assert session.recall("#2") == expected
        assert session.recall("#5") == find_output(first, "#5").text  # not held: unknown
        assert session.recall("#5") != find_output(scout_run(5), "#5").text
    finally:
        scoutd.unregister_strategy("fails_second")


def test_a_roll_back_that_fails_forgets_the_conversation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The round's own error is the one raised; the next round starts over and
    answers what a fresh session answers."""
    scoutd.register_strategy("fails_second", _fails_on_round(2, ValueError("broken")))
    try:
        session = Session(strategies="fails_second")
        session.prepare_prompt(scout_run(3))
        assert session.held_bytes() > 0

        def unusable(self: SessionPrompt, held: int) -> None:
            raise OSError("cannot truncate")

        monkeypatch.setattr(SessionPrompt, "truncate", unusable)
        with pytest.raises(ValueError, match="broken"):
            session.prepare_prompt(scout_run(5))
        assert session.recall("#1") == NO_CONVERSATION
        later = scout_run(6)
        fresh = Session(strategies="none")
        assert session.prepare_prompt(later) == fresh.prepare_prompt(later)
        assert session.held_bytes() == fresh.held_bytes()
    finally:
        scoutd.unregister_strategy("fails_second")


def test_an_interrupt_while_rolling_back_is_the_callers(monkeypatch: pytest.MonkeyPatch) -> None:
    scoutd.register_strategy("fails_second", _fails_on_round(2, ValueError("broken")))
    try:
        session = Session(strategies="fails_second")
        session.prepare_prompt(scout_run(3))

        def interrupted(self: SessionPrompt, held: int) -> None:
            raise KeyboardInterrupt

        monkeypatch.setattr(SessionPrompt, "truncate", interrupted)
        with pytest.raises(KeyboardInterrupt):
            session.prepare_prompt(scout_run(5))
        assert session.recall("#1") == NO_CONVERSATION
    finally:
        scoutd.unregister_strategy("fails_second")


def test_recall_answers_its_arguments_before_the_conversation() -> None:
    session = Session()
    assert session.recall("#1") == NO_CONVERSATION
    assert session.recall("#x").startswith("malformed handle")
    session.prepare_prompt(scout_run(3))
    assert session.recall() == (
        'give handle (a number such as "#37") or search (a text the output held)'
    )
    long = "x" * (MAX_RECALL_SEARCH + 1)
    assert session.recall(search=long).startswith("search is too long")
    assert session.recall("#x").startswith("malformed handle")


def test_recall_reads_the_conversation_in_the_sessions_format() -> None:
    """A session that names a format finds outputs of that format only: an OpenAI
    Chat conversation under ``anthropic`` passes through whole, and holds no
    output recall could name."""
    messages = chat_run(3)
    declared = Session(format="anthropic")
    declared.prepare_prompt(messages)
    unknown = find_output(messages, "#1", format="anthropic").text
    assert declared.recall("#1") == unknown
    assert unknown != find_output(messages, "#1").text
    detected = Session()
    detected.prepare_prompt(messages)
    assert detected.recall("#1") == find_output(messages, "#1").text


def test_a_round_that_only_adds_reindexes_nothing(resets: list[int]) -> None:
    session = Session()
    messages = scout_run(4)
    session.prepare_prompt(messages[:6])
    session.prepare_prompt(messages)
    session.prepare_prompt(messages)  # the same list again
    session.prepare_prompt(list(messages))  # an equal list
    assert resets == []


def test_a_conversation_passed_as_a_tuple_is_recognised(resets: list[int]) -> None:
    session = Session()
    messages = scout_run(3)
    session.prepare_prompt(tuple(messages[:4]))
    assert session.prepare_prompt(tuple(messages)) == scoutd.prepare_prompt(messages)
    assert resets == []


class _Touchy(dict[str, Any]):
    """A message whose comparison fails."""

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("cannot compare")

    __hash__ = None


def test_a_held_message_that_cannot_be_compared_starts_the_round_over(
    resets: list[int],
) -> None:
    messages: list[Any] = [_Touchy(role="user", content="task"), *scout_run(2)[1:]]
    session = Session()
    session.prepare_prompt(messages)
    # the first message replaced by another that cannot be compared either
    longer = [_Touchy(messages[0]), *messages[1:], *scout_run(3)[-2:]]
    assert session.prepare_prompt(longer) == scoutd.prepare_prompt(longer)
    assert resets == [len(longer)]
