"""An operator's plugins and the registry in process (the daemon's side is in
test_registry.py): what a plugin object declares, what cannot be loaded and why, and
what a function registered in code receives."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import scoutd
from scoutd.config import Config
from scoutd.engine.registry import REGISTRY, Registry
from scoutd.errors import ConfigError
from scoutd.strategies import BUILTINS
from scoutd.strategies.base import Builtin, FunctionStrategy, PrepareContext, Rounds

from ..support.threads import raised_in_a_worker

MODULE = "registry_plugins_under_test"
PLUGINS = """
class Declares:
    name = "declares"
    appends_only = True
    keeps_prefix = False
    rounds = ROUNDS = object()

    def run(self, messages, ctx):
        raise SystemExit(5)


class Vague(Declares):
    name = "vague"
    appends_only = "yes"  # truthy, but not True: declares nothing
    keeps_prefix = 1


declares = Declares()
vague = Vague()
five = 5


def bad_result(messages):
    return 5


class _NoSignature:
    def __call__(self, messages):
        return messages

    @property
    def __signature__(self):
        raise ValueError("no signature here")


class _ExitsWhenInspected(_NoSignature):
    @property
    def __signature__(self):
        raise SystemExit(6)


no_signature = _NoSignature()
exits_when_inspected = _ExitsWhenInspected()
SEEN = []


def sees_all(messages, save_file, config, format, other=None):
    SEEN.append(("all", save_file, config, format, other))
    return list(messages)


def sees_format(messages, format):
    SEEN.append(("format", format))
    return list(messages)


def not_a_message(messages):
    return [*messages, "a line"]
"""
CTX = PrepareContext(config=scoutd.PromptConfig())
MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.fixture
def plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Config]:
    (tmp_path / f"{MODULE}.py").write_text(PLUGINS)
    monkeypatch.syspath_prepend(str(tmp_path))
    names = (
        "declares",
        "vague",
        "five",
        "bad_result",
        "no_signature",
        "exits_when_inspected",
        "sees_all",
        "sees_format",
        "not_a_message",
    )
    yield Config(plugins={name: f"{MODULE}:{name}" for name in names})
    sys.modules.pop(MODULE, None)


def test_a_plugin_object_is_held_with_what_it_declares(plugins: Config) -> None:
    found: Any = REGISTRY.resolve("declares", plugins)
    module = sys.modules[MODULE]
    assert found.name == "declares" and found.inner is module.declares
    assert found.appends_only is True
    assert found.keeps_prefix is False
    assert found.rounds is module.Declares.ROUNDS
    vague: Any = REGISTRY.resolve("vague", plugins)
    assert vague.appends_only is False and vague.keeps_prefix is False  # only True declares
    raised = raised_in_a_worker(lambda: found.run(MESSAGES, CTX))
    assert type(raised) is RuntimeError
    said = f"plugin strategy 'declares' ({MODULE}:declares) raised SystemExit"
    assert str(raised) == said


def test_what_cannot_be_loaded_says_why(plugins: Config) -> None:
    for name, why in [("five", "not callable"), ("no_signature", "ValueError: no signature here")]:
        with pytest.raises(ConfigError) as raised:
            REGISTRY.resolve(name, plugins)
        assert (
            str(raised.value)
            == f"plugin strategy {name!r} ({MODULE}:{name}) cannot be loaded: {why}"
        )


def test_a_plugin_functions_mistake_is_named_as_its_own(plugins: Config) -> None:
    found = REGISTRY.resolve("bad_result", plugins)
    with pytest.raises(TypeError, match=r"^strategy 'bad_result' returned int, expected a list$"):
        found.run(MESSAGES, CTX)


def test_a_plugin_gets_each_keyword_its_signature_names_and_no_other(plugins: Config) -> None:
    ctx = PrepareContext(
        config=scoutd.PromptConfig(),
        format="anthropic",
        save_file="/c/a.chat",
        snapshot=plugins,
    )
    for name in ("sees_all", "sees_format"):
        messages, report = REGISTRY.resolve(name, plugins).run(MESSAGES, ctx)
        assert messages == MESSAGES and report.strategy == name
    seen = sys.modules[MODULE].SEEN
    assert seen == [("all", "/c/a.chat", plugins, "anthropic", None), ("format", "anthropic")]


def test_a_result_entry_that_is_no_message_is_named_with_its_position(plugins: Config) -> None:
    found = REGISTRY.resolve("not_a_message", plugins)
    said = r"^strategy 'not_a_message' returned str at 1, expected message objects$"
    with pytest.raises(TypeError, match=said):
        found.run(MESSAGES, CTX)


def test_a_built_in_declares_nothing_unless_told() -> None:
    def run(messages: Any, ctx: PrepareContext) -> Any:
        raise AssertionError("not run")

    plain = Builtin("plain", run)
    assert (plain.name, plain.run) == ("plain", run)
    assert (plain.appends_only, plain.keeps_prefix, plain.rounds) == (False, False, None)
    told = Builtin("told", run, appends_only=True, keeps_prefix=True, rounds=Rounds.EPOCH)
    assert (told.appends_only, told.keeps_prefix, told.rounds) == (True, True, Rounds.EPOCH)


def test_an_exit_while_a_plugin_is_adapted_is_the_callers_on_the_main_thread_only(
    plugins: Config,
) -> None:
    with pytest.raises(SystemExit):
        REGISTRY.resolve("exits_when_inspected", plugins)
    raised = raised_in_a_worker(lambda: REGISTRY.resolve("exits_when_inspected", plugins))
    label = f"plugin strategy 'exits_when_inspected' ({MODULE}:exits_when_inspected)"
    assert type(raised) is ConfigError
    assert str(raised) == f"{label} cannot be loaded: SystemExit: 6"


def test_a_function_registered_in_code_receives_the_messages_only() -> None:
    """Unlike a plugin, which also gets the keywords its signature names."""
    received: list[Any] = []

    def keeps(messages: list[Any], format: Any = None, save_file: Any = None) -> list[Any]:
        received.append((format, save_file))
        return list(messages)

    registry = Registry(BUILTINS)
    registry.register("keeps", keeps)
    ctx = PrepareContext(config=scoutd.PromptConfig(), format="anthropic", save_file="/c/a.chat")
    registry.registered["keeps"].run(MESSAGES, ctx)
    FunctionStrategy("keeps", keeps).run(MESSAGES, ctx)  # adapted as a function by default
    assert received == [(None, None), (None, None)]


def test_forgetting_a_name_never_registered_is_no_error() -> None:
    registry = Registry(BUILTINS)
    registry.unregister("never")
    registry.unregister(5)  # type: ignore[arg-type]
    assert registry.registered == {}


def test_a_prefix_is_stable_only_for_built_ins_that_say_so() -> None:
    registry = Registry(BUILTINS)
    assert registry.keeps_prefix(None) is False  # a callable ran
    assert registry.keeps_prefix(["shorten_tools_epoch", "inbox"]) is True
    assert registry.keeps_prefix(["shorten_tools_epoch", "shorten_tools"]) is False
    assert registry.keeps_prefix(["none", "not_a_builtin"]) is False


def test_the_names_offered_are_those_of_the_config_given() -> None:
    config = Config(plugins={"only_in_this_config": "nowhere:at_all"})  # named, not imported
    assert "only_in_this_config" in scoutd.available_strategies(config)
    assert "only_in_this_config" not in scoutd.available_strategies()
