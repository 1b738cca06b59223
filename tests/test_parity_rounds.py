"""Drawn sequences of session calls: the same answers in process and through the daemon.

One sequence of rounds (appends, a replaced conversation, an empty one, a round
that breaks the message rule or mixes formats) and recalls (any handle or
search a model may send, before the first round too) goes to a
``scoutd.Session`` and to a daemon session, in each provider format, with
values JSON writes otherwise than Python holds them in the new messages. After
every call the prompts (as ``json.dumps`` writes them), the error classes and
the recall texts must agree.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import scoutd
from scoutd.config import Config, load_config
from scoutd.errors import FormatError, InvalidMessages, SessionClosed
from scoutd.testing.derive import to_anthropic, to_responses
from tests.support.daemon import Daemon
from tests.test_parity_errors import ANTHROPIC_CALL, CHAT_CALL, chat_run
from tests.test_parity_recall import QUESTIONS

PROMPT = {"recall": True, "context_window": 6000, "cost_full_tool_outputs": 4}
CALL_TIMEOUT = 20.0
PAIRS = 40
RUNS: dict[str, tuple[list[dict[str, Any]], int, dict[str, Any]]] = {
    "openai-chat": (chat_run(PAIRS), 2, ANTHROPIC_CALL),
    "anthropic": (to_anthropic(chat_run(PAIRS)), 1, CHAT_CALL),
    "openai-responses": (to_responses(chat_run(PAIRS)), 2, ANTHROPIC_CALL),
}
ERRORS = (InvalidMessages, FormatError, SessionClosed)
ODD = [(1, 2), {True: 1, None: 2, 3: "x"}, 2**70, -0.0, 5e-324, "a\x00b", {"\x00": []}]

# One call: ("round", pairs, odd value or None, how it goes wrong or None), or ("recall", i).
CALLS = st.one_of(
    st.tuples(
        st.just("round"),
        st.integers(min_value=0, max_value=PAIRS),
        st.none() | st.sampled_from(range(len(ODD))),
        st.sampled_from([None, None, None, "invalid", "mixed"]),
    ),
    # the first questions name outputs a round holds: drawn as often as all the others
    st.tuples(
        st.just("recall"), st.sampled_from(range(5)) | st.sampled_from(range(len(QUESTIONS)))
    ),
)


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with Daemon(prompt=PROMPT) as running:
        yield running


def conversation(fmt: str, pairs: int, odd: int | None, wrong: str | None) -> list[Any]:
    """The first ``pairs`` pairs of the run, an odd value in its last message, and
    what makes the round fail."""
    run, lead, foreign = RUNS[fmt]
    messages: list[Any] = list(run[: lead + 2 * pairs])
    if odd is not None and messages:
        messages[-1] = {**messages[-1], "odd": ODD[odd]}
    if wrong == "invalid":
        messages.append("not a message")
    elif wrong == "mixed":
        messages.append(foreign)
    return messages


def outcome(run: Callable[[], Any]) -> str:
    """What a call gives, as text: a prompt as JSON, a recall's text, or an error's class."""
    try:
        value = run()
    except ERRORS as exc:
        return next(kind.__name__ for kind in ERRORS if isinstance(exc, kind))
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


@pytest.mark.parametrize("fmt", list(RUNS))
def test_drawn_session_calls_answer_alike(daemon: Daemon, fmt: str) -> None:
    config: Config = load_config(daemon.config_path)
    seen: Counter[str] = Counter()
    with scoutd.Client(daemon.socket_path, timeout=CALL_TIMEOUT) as client:

        @settings(
            max_examples=40,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=[HealthCheck.too_slow],
        )
        @given(calls=st.lists(CALLS, min_size=2, max_size=8))
        def check(calls: list[tuple[Any, ...]]) -> None:
            local = scoutd.Session(config=config)
            save = os.path.join(daemon.dir, f"rounds-{fmt}.chat")
            with client.session(save) as remote:
                for call in calls:
                    if call[0] == "round":
                        messages = conversation(fmt, *call[1:])
                        mine = outcome(partial(local.prepare_prompt, messages))
                        theirs = outcome(partial(remote.prepare_prompt, messages))
                        seen["odd values" if call[2] is not None else "rounds"] += 1
                    else:
                        handle, search = QUESTIONS[call[1]]
                        mine = outcome(partial(local.recall, handle, search))
                        theirs = outcome(partial(remote.recall, handle, search))
                        seen["found" if mine.startswith(("#", "line")) else "recalls"] += 1
                    if mine in ("InvalidMessages", "FormatError"):
                        seen[mine] += 1
                    assert mine == theirs, (call, mine[:200], theirs[:200])
            local.close()

        check()
    assert seen["odd values"] >= 10 and seen["rounds"] >= 10, seen
    assert seen["found"] >= 5 and seen["recalls"] >= 10, seen
    assert seen["InvalidMessages"] >= 2 and seen["FormatError"] >= 2, seen
