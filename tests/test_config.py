"""Configuration: sources, precedence, validation, and no memoization."""

from __future__ import annotations

import pathlib

import pytest

from scoutd import ConfigError, load_config, prepare
from scoutd.config import (
    DEFAULT_NOTICE,
    Config,
    DaemonConfig,
    PromptConfig,
    resolve_config,
    with_overrides,
)
from scoutd.server import load_daemon_config

from .strategies.conversations import agent_run


def write(path: pathlib.Path, text: str) -> pathlib.Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_without_any_source() -> None:
    config = resolve_config(environ={})
    assert config.path is None
    assert config.prompt.epoch_size == 20
    assert config.prompt.effective_max_tool_outputs == 40
    assert config.prompt.compaction_notice == DEFAULT_NOTICE
    assert config.daemon.socket_path == "/run/scoutd/scoutd.sock"
    assert set(config.origins.values()) == {"default"}


def test_precedence_override_over_file_over_env_over_default(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path / "s.toml", "[prompt]\nepoch_size = 7\nfull_tool_calls = 3\n")
    environ = {"EPOCH_SIZE": "9", "MAX_TOOL_CALLS": "12", "SCOUTD_CONFIG": str(path)}
    config = with_overrides(resolve_config(environ=environ), {"full_tool_calls": 1})
    assert config.path == str(path)
    assert config.prompt.epoch_size == 7
    assert config.origins["prompt.epoch_size"] == "file"
    assert config.prompt.max_tool_calls == 12
    assert config.origins["prompt.max_tool_calls"] == "env:MAX_TOOL_CALLS"
    assert config.prompt.effective_max_tool_outputs == 12
    assert config.prompt.full_tool_calls == 1
    assert config.origins["prompt.full_tool_calls"] == "override"
    assert config.origins["prompt.epoch_full_tool_calls"] == "default"


def test_prompt_strategy_env_and_list_in_file(tmp_path: pathlib.Path) -> None:
    assert resolve_config(environ={"PROMPT_STRATEGY": "none"}).prompt.prompt_strategies == "none"
    path = write(tmp_path / "s.toml", '[prompt]\nprompt_strategies = ["shorten_tools", "inbox"]\n')
    config = resolve_config(path, environ={})
    assert config.prompt.prompt_strategies == ("shorten_tools", "inbox")


def test_file_and_environment_are_read_fresh_on_every_call(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The memoization trap: a changed threshold takes effect on the next call."""
    messages = agent_run(60)
    path = write(tmp_path / "scoutd.toml", "[prompt]\nepoch_tool_call_threshold = 100\n")
    monkeypatch.setenv("SCOUTD_CONFIG", str(path))
    monkeypatch.setenv("PROMPT_STRATEGY", "shorten_tools_epoch")
    assert prepare(messages).messages == messages  # 60 outputs <= 100: unchanged
    write(path, "[prompt]\nepoch_tool_call_threshold = 50\n")
    assert prepare(messages).report[0].notice  # 60 > 50: compacted
    monkeypatch.setenv("PROMPT_STRATEGY", "none")
    assert prepare(messages).messages == messages
    assert prepare(messages).report[0].strategy == "none"


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("[prompt]\nepoch_size = -1\n", ["prompt.epoch_size", ">= 0"]),
        ("[prompt]\nepoch_sise = 3\n", ["epoch_sise", "[prompt]"]),
        ('[prompt]\nfull_tool_calls = "3"\n', ["prompt.full_tool_calls", "int"]),
        ("[promt]\nepoch_size = 3\n", ["promt"]),
        ("[daemon]\nwatch_mode = 'sometimes'\n", ["daemon.watch_mode"]),
        ("[daemon]\nmax_connections = 0\n", ["daemon.max_connections"]),
        ("[prompt]\nepoch_increment_compacted_growth_ratio = inf\n", ["finite"]),
        ("[prompt\nepoch_size = 3\n", ["line 1"]),
    ],
)
def test_bad_file_names_the_key_and_the_file(
    tmp_path: pathlib.Path, text: str, names: list[str]
) -> None:
    path = write(tmp_path / "bad.toml", text)
    with pytest.raises(ConfigError) as caught:
        resolve_config(path, environ={})
    message = str(caught.value)
    assert str(path) in message
    for name in names:
        assert name in message


def test_missing_named_file_is_an_error(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        resolve_config(tmp_path / "absent.toml", environ={})


@pytest.mark.parametrize("value", ["-3", "ten", "1.5"])
def test_bad_environment_value_names_the_variable(value: str) -> None:
    with pytest.raises(ConfigError, match="EPOCH_SIZE"):
        resolve_config(environ={"EPOCH_SIZE": value})


def test_zero_is_a_value_not_a_fallback() -> None:
    assert resolve_config(environ={"EPOCH_SIZE": "0"}).prompt.epoch_size == 0


@pytest.mark.parametrize(
    "overrides", [{"epoch_size": "4"}, {"epoch_size": -4}, {"no_such_key": 1}, {"socket_path": "x"}]
)
def test_bad_overrides_are_rejected(overrides: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match="per-call overrides"):
        load_config(overrides=overrides)


def test_snapshot_is_immutable() -> None:
    config = load_config()
    with pytest.raises(AttributeError):
        config.prompt.epoch_size = 3  # type: ignore[misc]


def test_overrides_may_lower_operator_limits_but_never_raise_them() -> None:
    config = Config(prompt=PromptConfig(inbox_max_bytes=1000, inbox_max_total_bytes=5000))
    assert with_overrides(config, {"inbox_max_bytes": 10}).prompt.inbox_max_bytes == 10
    assert (
        with_overrides(config, {"inbox_max_total_bytes": 5000}).prompt.inbox_max_total_bytes == 5000
    )
    for key in ("inbox_max_bytes", "inbox_max_total_bytes"):
        with pytest.raises(ConfigError, match="may only lower"):
            with_overrides(config, {key: 10**12})


@pytest.mark.parametrize(
    "daemon",
    [
        'allowed_roots = ["relative"]',
        "allowed_roots = []",
        'allowed_roots = ["/ok", "./no"]',
        'allowed_roots = ["/a\\u0000b"]',
        'socket_path = ""',
    ],
)
def test_daemon_paths_are_validated(tmp_path: pathlib.Path, daemon: str) -> None:
    path = tmp_path / "scoutd.toml"
    path.write_text(f"[daemon]\n{daemon}\n")
    with pytest.raises(ConfigError, match=r"\[daemon\]"):
        resolve_config(path, environ={})


def test_only_the_daemon_refuses_an_empty_file(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "scoutd.toml"
    path.write_text(" \n")
    assert resolve_config(path, environ={}).daemon == DaemonConfig()  # the library: defaults
    with pytest.raises(ConfigError, match="is empty"):
        load_daemon_config(str(path), environ={})
