"""The strategy dispatcher: forms of ``strategies``, registration and plugins."""

from __future__ import annotations

import pathlib
import sys
import textwrap
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from scoutd import (
    ConfigError,
    UnknownStrategy,
    available_strategies,
    prepare,
    prepare_prompt,
    register_strategy,
    unregister_strategy,
)
from scoutd.config import Config, PromptConfig
from scoutd.engine.registry import REGISTRY
from scoutd.strategies.base import FunctionStrategy, PrepareContext, Rounds, Strategy
from scoutd.strategies.report import plain_report

from .strategies.conversations import agent_run

MESSAGES = agent_run(70)


@pytest.fixture
def registered() -> Iterator[list[list[Any]]]:
    seen: list[list[Any]] = []

    def tag(messages: list[Any]) -> list[Any]:
        seen.append(messages)
        return [*messages, {"role": "user", "content": "tagged"}]

    register_strategy("tag", tag)
    yield seen
    unregister_strategy("tag")


def test_default_strategies_are_cost_aware_then_inbox() -> None:
    prepared = prepare(MESSAGES)
    assert [r.strategy for r in prepared.report] == ["shorten_tools_cost_aware", "inbox"]
    assert prepared.messages == prepare_prompt(MESSAGES, "shorten_tools_cost_aware")


@pytest.mark.parametrize(
    "strategies", [" shorten_tools ,none", ["shorten_tools", "none"], ("shorten_tools", "none")]
)
def test_string_and_list_forms(strategies: Any) -> None:
    prepared = prepare(MESSAGES, strategies)
    assert [r.strategy for r in prepared.report] == ["shorten_tools", "none"]


def test_strategies_run_in_order_each_on_the_previous_output() -> None:
    chained = prepare_prompt(MESSAGES, "shorten_tools_epoch,shorten_tools")
    by_hand = prepare_prompt(prepare_prompt(MESSAGES, "shorten_tools_epoch"), "shorten_tools")
    assert chained == by_hand


def test_a_callable_gets_the_messages_alone() -> None:
    result = prepare_prompt(MESSAGES, lambda messages: messages[:2])
    assert result == MESSAGES[:2]


def test_none_returns_an_equal_new_list() -> None:
    result = prepare_prompt(MESSAGES, "none")
    assert result == MESSAGES
    assert result is not MESSAGES


def test_unknown_name_lists_the_available_ones() -> None:
    with pytest.raises(UnknownStrategy) as caught:
        prepare_prompt(MESSAGES, "shorten_tools,shorten_tool")
    assert caught.value.name == "shorten_tool"
    assert "shorten_tools_epoch_increment" in str(caught.value)
    assert "inbox" in caught.value.available


def test_registered_strategy_receives_the_messages_only(registered: list[list[Any]]) -> None:
    result = prepare_prompt(MESSAGES, ["none", "tag"], save_file="/tmp/ignored.chat")
    assert result[-1] == {"role": "user", "content": "tagged"}
    assert registered[0] == MESSAGES
    assert "tag" in available_strategies()


def test_register_rejects_bad_names_and_builtins() -> None:
    with pytest.raises(ValueError):
        register_strategy("inbox", lambda m: m)
    with pytest.raises(ValueError):
        register_strategy("a,b", lambda m: m)
    with pytest.raises(TypeError):
        register_strategy("x", "not callable")  # type: ignore[arg-type]


def test_a_strategy_that_returns_no_list_is_a_clear_error() -> None:
    register_strategy("broken", lambda m: None)
    try:
        with pytest.raises(TypeError, match="'broken' returned NoneType"):
            prepare_prompt(MESSAGES, "broken")
    finally:
        unregister_strategy("broken")


@pytest.mark.parametrize("bad", ["a string", None, 42, {"role": "user"}])
def test_messages_must_be_a_list(bad: Any) -> None:
    with pytest.raises(TypeError, match="list of messages"):
        prepare_prompt(bad)


@pytest.fixture
def plugin_dir(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[pathlib.Path]:
    """A module and an installed distribution declaring a `scoutd.strategies` entry point."""
    (tmp_path / "scoutd_test_plugins.py").write_text(
        textwrap.dedent(
            """
            def plain(messages):
                return messages + [{"role": "user", "content": "plain"}]

            def contextual(messages, *, save_file=None, config=None):
                note = f"save_file={save_file} epoch_size={config.prompt.epoch_size}"
                return messages + [{"role": "user", "content": note}]
            """
        )
    )
    dist = tmp_path / "scoutd_test_plugins-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: scoutd-test-plugins\nVersion: 1.0\n"
    )
    (dist / "entry_points.txt").write_text(
        "[scoutd.strategies]\ncontextual = scoutd_test_plugins:contextual\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("scoutd_test_plugins", None)


def test_entry_point_plugin_gets_the_keywords_it_declares(plugin_dir: pathlib.Path) -> None:
    assert "contextual" in available_strategies()
    result = prepare_prompt(MESSAGES, "contextual", save_file="/x/a.chat", config={"epoch_size": 4})
    assert result[-1]["content"] == "save_file=/x/a.chat epoch_size=4"


def test_config_file_plugin(plugin_dir: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = plugin_dir / "scoutd.toml"
    config.write_text('[plugins]\nplain = "scoutd_test_plugins:plain"\n')
    monkeypatch.setenv("SCOUTD_CONFIG", str(config))
    assert prepare_prompt(MESSAGES, "plain")[-1]["content"] == "plain"


def test_config_file_plugin_that_cannot_load(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "scoutd.toml"
    config.write_text('[plugins]\nghost = "no_such_module_here:fn"\n')
    monkeypatch.setenv("SCOUTD_CONFIG", str(config))
    with pytest.raises(ConfigError, match="ghost"):
        prepare_prompt(MESSAGES, "ghost")


def test_detail_reports_every_tool_message() -> None:
    prepared = prepare(MESSAGES, "shorten_tools_epoch", detail=True)
    actions = prepared.report[0].actions
    assert actions is not None
    assert len(actions) == 140
    assert {a.action for a in actions} == {"kept", "truncated"}
    assert [a.index for a in actions] == list(range(2, 142))


def test_the_default_prices_a_rewrite_as_the_conversations_provider_bills_it() -> None:
    # cache_pricing "auto": an OpenAI Chat conversation is priced as OpenAI bills
    # (no write premium), whatever the default would assume for another format.
    from .formats.conversations import chat

    window = {"context_window": 50_000}
    differs = 0
    for pairs in range(2, 120, 3):
        conversation = chat(pairs)
        auto = prepare_prompt(conversation, config=window)
        openai = prepare_prompt(conversation, config={**window, "cache_pricing": "openai"})
        anthropic = prepare_prompt(conversation, config={**window, "cache_pricing": "anthropic"})
        assert auto == openai, pairs
        differs += auto != anthropic
    assert differs >= 3  # the prices do change the decision on these conversations


class _Stamp:
    """A strategy object: what it reads comes in its context, what it promises is declared."""

    name = "stamp"
    appends_only = True
    keeps_prefix = False
    rounds = None

    def __init__(self) -> None:
        self.contexts: list[PrepareContext] = []

    def run(self, messages: Sequence[Any], ctx: PrepareContext) -> tuple[list[Any], Any]:
        self.contexts.append(ctx)
        out = [*messages, {"role": "user", "content": f"{ctx.format} {ctx.save_file}"}]
        return out, plain_report(self.name, messages, out)


def test_a_strategy_object_is_taken_as_it_is_and_gets_the_call_in_its_context() -> None:
    stamp = _Stamp()
    assert isinstance(stamp, Strategy)
    register_strategy("stamp", stamp)
    try:
        assert REGISTRY.resolve("stamp", Config()) is stamp
        prepared = prepare(MESSAGES, ["shorten_tools", "stamp"], save_file="/nowhere/chat.json")
    finally:
        unregister_strategy("stamp")
    assert prepared.messages[-1] == {"role": "user", "content": "scout /nowhere/chat.json"}
    assert [r.strategy for r in prepared.report] == ["shorten_tools", "stamp"]
    (ctx,) = stamp.contexts
    assert ctx.columns is None  # the columns read once go to the first strategy only
    assert ctx.detail is False and ctx.config == PromptConfig()


def test_a_function_is_adapted_once_when_registered(registered: list[list[Any]]) -> None:
    adapted = REGISTRY.resolve("tag", Config())
    assert isinstance(adapted, FunctionStrategy) and adapted.name == "tag"
    assert REGISTRY.resolve("tag", Config()) is adapted  # not adapted again per call
    assert (adapted.appends_only, adapted.keeps_prefix, adapted.rounds) == (False, False, None)


def test_the_builtins_declare_what_the_engine_assumes_of_them() -> None:
    declared = {
        name: (s.appends_only, s.keeps_prefix, s.rounds) for name, s in REGISTRY.builtins.items()
    }
    assert declared == {
        "shorten_tools": (False, False, None),
        "shorten_tools_epoch": (False, True, Rounds.EPOCH),
        "shorten_tools_epoch_increment": (False, True, Rounds.EPOCH),
        "shorten_tools_cost_aware": (False, False, Rounds.PLAN),
        "inbox": (True, True, None),
        "none": (True, True, None),
    }
