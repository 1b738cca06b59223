"""What ``prepare`` and ``prepare_prompt`` do with each argument (docs/STRATEGIES.md).

``prepare_prompt`` hands every argument on to ``prepare``; a callable runs
alone, with no configuration read for it; an empty list runs nothing and
says so; ``strategies`` of another type is refused in words.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import scoutd
from scoutd import ConversationTexts, PromptConfig
from scoutd.testing import conversation
from tests.formats.conversations import anthropic, chat
from tests.support.mapping import Message

STRATEGIES_TYPE = "strategies must be a callable, a comma-separated string or a list of names"


def marks(messages: list[Any]) -> int:
    """How many cache hints the prompt carries."""
    return json.dumps(messages).count('"cache_control"')


@pytest.mark.parametrize("strategies", [123, ["inbox", 1], b"inbox", 1.5, {"inbox": 1}])
def test_strategies_of_another_type_are_refused_in_words(strategies: Any) -> None:
    with pytest.raises(TypeError) as raised:
        scoutd.prepare(chat(2), strategies)
    assert str(raised.value) == STRATEGIES_TYPE


def test_prepare_prompt_hands_the_format_on() -> None:
    with pytest.raises(ValueError, match="unknown message format 'nope'"):
        scoutd.prepare_prompt(chat(2), format="nope")


def test_prepare_prompt_hands_the_cache_hint_on() -> None:
    conversation = anthropic(3)
    assert marks(scoutd.prepare_prompt(conversation)) == 0
    hinted = scoutd.prepare_prompt(conversation, cache_control=True)
    assert marks(hinted) == 1
    assert hinted == scoutd.prepare(conversation, cache_control=True).messages


def test_prepare_prompt_hands_the_kept_texts_on() -> None:
    texts = ConversationTexts()
    scoutd.prepare_prompt(chat(2), texts=texts)
    assert texts.kept is not None  # the view kept this conversation's texts for the next call


def test_a_callable_runs_alone_and_is_reported_as_the_callable() -> None:
    seen: list[list[Any]] = []

    def mine(messages: list[Any]) -> list[Any]:
        seen.append(messages)
        return messages[:1]

    prepared = scoutd.prepare(chat(2), mine)
    assert len(seen) == 1 and prepared.messages == chat(2)[:1]
    [report] = prepared.report
    assert (report.strategy, report.format) == ("<callable>", "openai-chat")


def test_a_callable_reads_no_configuration() -> None:
    """Nothing of ``config=`` is looked at for a callable: not an override that would be
    refused, not the configured cache hint; ``cache_control=True`` still marks."""
    conversation = anthropic(3)
    mine = list  # a copy of what it is given
    assert scoutd.prepare_prompt(conversation, mine, config={"no_such_key": 1}) == conversation
    configured = scoutd.prepare_prompt(conversation, mine, config=PromptConfig(cache_control=True))
    assert marks(configured) == 0
    assert marks(scoutd.prepare_prompt(conversation, mine, cache_control=True)) == 1
    # a list of names reads it: the same configured hint marks
    named = scoutd.prepare_prompt(conversation, "inbox", config=PromptConfig(cache_control=True))
    assert marks(named) == 1


@pytest.mark.parametrize("empty", ["", ",", []])
def test_an_empty_list_runs_nothing_and_says_so(empty: Any) -> None:
    prepared = scoutd.prepare(chat(30), empty)
    assert prepared.messages == chat(30)
    [report] = prepared.report
    assert (report.strategy, report.format) == ("<none>", "openai-chat")


def test_the_format_named_holds_for_messages_of_another_mapping_type_too() -> None:
    """Such messages take the other way through format resolution (their reads may run
    the caller's code): the format named is taken there too, an unknown one refused."""
    messages = [Message(role="user", content="hi")]
    with pytest.raises(ValueError, match="unknown message format 'nope'"):
        scoutd.prepare(messages, format="nope")
    assert scoutd.prepare(messages, format="scout").report[-1].format == "scout"


def test_a_sessions_whole_rounds_take_their_rewrites_from_its_memory() -> None:
    """A strategy without a round-by-round form runs whole each round, through
    ``prepare``: the session's rewrites are remembered and served again, the same
    prompt as a fresh prepare gives."""
    run = conversation(40, output_size=600, user_every=5)
    config = PromptConfig(full_tool_outputs=5, full_tool_calls=5, max_tool_chars=2000)
    session = scoutd.Session(strategies="shorten_tools", config=config)
    rounds = [session.prepare(run[:end]) for end in (len(run) - 2, len(run))]
    assert rounds[-1].messages == scoutd.prepare(run, "shorten_tools", config=config).messages
    assert rounds[-1].report[0].outputs_truncated > 0  # it shortened something
    rewrites = session._state.rewrites
    assert rewrites.hits > 0  # the last round's shortenings were the first round's
    assert rewrites.misses <= len(run)
