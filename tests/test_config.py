"""Configuration: sources, precedence, validation, and no memoization."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from scoutd import ConfigError, load_config, prepare
from scoutd.config import (
    DEFAULT_NOTICE,
    Config,
    DaemonConfig,
    PromptConfig,
    resolve_config,
    strategy_names,
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
        (
            "[prompt]\nepoch_increment_compacted_growth_ratio = inf\n",
            ["prompt.epoch_increment_compacted_growth_ratio", "<= 1000000.0"],
        ),
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


# -- exact messages and the smaller paths of each source (mutation testing, docs/TESTING.md)


@pytest.mark.parametrize(
    "key",
    [
        "expected_horizon",
        "compaction_risk_share",
        "chars_per_token",
        "cache_write_price",
        "cache_read_price",
        "epoch_increment_compacted_growth_ratio",
    ],
)
def test_an_infinite_float_is_refused_by_name(tmp_path: pathlib.Path, key: str) -> None:
    """Above every float key's finite upper bound in a file; not finite in code."""
    path = write(tmp_path / "inf.toml", f"[prompt]\n{key} = inf\n")
    with pytest.raises(ConfigError) as caught:
        resolve_config(path, environ={})
    assert str(caught.value) == (
        f"invalid configuration in config file {path}, table [prompt]:"
        f" Expected `float` <= 1000000.0 - at `prompt.{key}`"
    )
    with pytest.raises(ValueError) as refused:
        PromptConfig(**{key: float("inf")})
    assert str(refused.value) == f"{key} must be finite"


def test_finite_floats_and_unset_prices_pass() -> None:
    prompt = PromptConfig(expected_horizon=2.5, cache_write_price=None, cache_read_price=0.0)
    assert (prompt.expected_horizon, prompt.cache_write_price) == (2.5, None)


@pytest.mark.parametrize(
    ("daemon", "message"),
    [
        ("allowed_roots = []", "allowed_roots must list at least one directory"),
        (
            'allowed_roots = ["/ok", "./no"]',
            "allowed_roots entry './no' is not an absolute path",
        ),
        (
            'allowed_roots = ["/a\\u0000b"]',
            "allowed_roots entry '/a\\x00b' is not an absolute path",
        ),
        ('socket_path = ""', "socket_path '' is not a path"),
        ('socket_path = "/run/a\\u0000b"', "socket_path '/run/a\\x00b' is not a path"),
    ],
)
def test_daemon_path_errors_say_which_value(
    tmp_path: pathlib.Path, daemon: str, message: str
) -> None:
    path = write(tmp_path / "scoutd.toml", f"[daemon]\n{daemon}\n")
    with pytest.raises(ConfigError) as caught:
        resolve_config(path, environ={})
    assert str(caught.value) == (
        f"invalid configuration in config file {path}, table [daemon]: {message}"
    )


def test_valid_daemon_paths_pass() -> None:
    daemon = DaemonConfig(allowed_roots=("/a", "/b/c"), socket_path="/tmp/s.sock")
    assert daemon.allowed_roots == ("/a", "/b/c")


@pytest.mark.parametrize(
    ("value", "names"),
    [
        (None, None),
        ("", []),
        (" a, ,b ,", ["a", "b"]),
        ("shorten_tools_epoch,inbox", ["shorten_tools_epoch", "inbox"]),
        ([" a ", "", "  ", "b"], ["a", "b"]),
        (("x",), ["x"]),
    ],
)
def test_strategy_names_are_split_and_stripped(value: Any, names: list[str] | None) -> None:
    assert strategy_names(value) == names


def test_file_errors_give_the_file_and_the_key(tmp_path: pathlib.Path) -> None:
    unknown = write(tmp_path / "a.toml", "[promt]\nepoch_size = 3\n")
    with pytest.raises(ConfigError) as caught:
        resolve_config(unknown, environ={})
    assert (
        str(caught.value) == f"invalid config file {unknown}: Object contains unknown field `promt`"
    )
    typed = write(tmp_path / "c.toml", '[prompt]\nepoch_size = "x"\n')
    with pytest.raises(ConfigError) as caught:
        resolve_config(typed, environ={})
    assert str(caught.value) == (
        f"invalid configuration in config file {typed}, table [prompt]:"
        " Expected `int`, got `str` - at `prompt.epoch_size`"
    )
    table = write(tmp_path / "t.toml", "prompt = 3\n")
    with pytest.raises(ConfigError) as caught:
        resolve_config(table, environ={})
    assert str(caught.value) == (
        f"invalid config file {table}: Expected `object`, got `int` - at `prompt`"
    )
    binary = tmp_path / "b.toml"
    binary.write_bytes(b"[prompt]\nepoch_size = 3 # \xff\n")
    with pytest.raises(ConfigError, match=r"^invalid config file .*b\.toml: "):
        resolve_config(binary, environ={})
    broken = write(tmp_path / "e.toml", "[prompt\n")
    with pytest.raises(ConfigError) as caught:
        resolve_config(broken, environ={})
    assert str(caught.value).startswith(f"invalid config file {broken}: Expected ']'")


def test_a_missing_or_empty_file_is_named(tmp_path: pathlib.Path) -> None:
    absent = tmp_path / "absent.toml"
    with pytest.raises(ConfigError) as caught:
        resolve_config(absent, environ={})
    assert str(caught.value) == f"cannot read config file {absent}: No such file or directory"
    empty = write(tmp_path / "empty.toml", "\n\t \n")
    with pytest.raises(ConfigError) as caught:
        resolve_config(empty, environ={}, allow_empty=False)
    assert str(caught.value) == f"config file {empty} is empty"
    assert resolve_config(empty, environ={}).prompt == PromptConfig()  # allowed by default
    full = write(tmp_path / "full.toml", "[prompt]\nepoch_size = 4\n")
    assert resolve_config(full, environ={}, allow_empty=False).prompt.epoch_size == 4


def test_a_file_nested_too_deeply_is_invalid_not_an_internal_error(tmp_path: pathlib.Path) -> None:
    deep = write(tmp_path / "deep.toml", "[prompt]\nx = " + "[" * 3000 + "]" * 3000 + "\n")
    with pytest.raises(ConfigError) as caught:
        resolve_config(deep, environ={})
    assert str(caught.value) == f"invalid config file {deep}: nested too deeply"


def test_environment_values_are_stripped_except_the_notice() -> None:
    config = resolve_config(
        environ={"EPOCH_SIZE": " 7\n", "COMPACTION_NOTICE": "  keep  ", "PROMPT_STRATEGY": " none "}
    )
    assert config.prompt.epoch_size == 7
    assert config.prompt.compaction_notice == "  keep  "
    assert config.prompt.prompt_strategies == "none"
    assert config.origins["prompt.compaction_notice"] == "env:COMPACTION_NOTICE"
    assert config.origins["prompt.prompt_strategies"] == "env:PROMPT_STRATEGY"
    assert config.origins["prompt.epoch_size"] == "env:EPOCH_SIZE"
    assert config.origins["prompt.full_tool_calls"] == "default"


def test_every_prompt_key_is_read_from_its_variable() -> None:
    environ = {"PROMPT_STRATEGY": "none", "CACHE_CONTROL": "true", "TOKENIZER": "t"}
    config = resolve_config(environ=environ)
    assert (config.prompt.prompt_strategies, config.prompt.cache_control) == ("none", True)
    assert config.prompt.tokenizer == "t"
    # the lower-case name is not a variable of the configuration
    assert resolve_config(environ={"epoch_size": "3"}).prompt.epoch_size == 20


def test_a_bad_environment_value_is_quoted() -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_config(environ={"EPOCH_SIZE": " x "})
    assert str(caught.value) == (
        "invalid environment variable EPOCH_SIZE=' x ':"
        " Expected `int`, got `str` - at `$.epoch_size`"
    )


def test_the_process_environment_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SCOUTD_CONFIG", raising=False)
    monkeypatch.setattr("scoutd.config_paths.DEFAULT_CONFIG_PATH", "/nonexistent/scoutd.toml")
    monkeypatch.setenv("EPOCH_SIZE", "6")
    config = resolve_config()
    assert config.prompt.epoch_size == 6
    assert config.path is None


def test_where_the_file_comes_from(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    system = write(tmp_path / "system.toml", "[prompt]\nepoch_size = 2\n")
    named = write(tmp_path / "named.toml", "[prompt]\nepoch_size = 3\n")
    env = write(tmp_path / "env.toml", "[prompt]\nepoch_size = 4\n")
    monkeypatch.setattr("scoutd.config_paths.DEFAULT_CONFIG_PATH", str(system))
    assert resolve_config(environ={}).path == str(system)  # it exists: read
    assert resolve_config(environ={"SCOUTD_CONFIG": ""}).prompt.epoch_size == 2  # empty: unset
    assert resolve_config(environ={"SCOUTD_CONFIG": str(env)}).prompt.epoch_size == 4
    assert resolve_config(named, environ={"SCOUTD_CONFIG": str(env)}).path == str(named)
    assert resolve_config(pathlib.Path(named), environ={}).path == str(named)  # a PathLike
    monkeypatch.setattr("scoutd.config_paths.DEFAULT_CONFIG_PATH", str(tmp_path))  # not a file
    assert resolve_config(environ={}).path is None


def test_daemon_keys_and_plugins_from_the_file(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path / "d.toml", '[plugins]\nfoo = "pkg:mod"\n[daemon]\nmax_connections = 3\n')
    config = resolve_config(path, environ={})
    assert config.plugins == {"foo": "pkg:mod"}
    assert config.daemon.max_connections == 3
    assert config.origins["daemon.max_connections"] == "file"
    assert config.origins["daemon.idle_timeout"] == "default"
    assert config.origins["plugins.foo"] == "file"
    assert "prompt.epoch_size" in config.origins


def test_override_edge_cases() -> None:
    config = Config(prompt=PromptConfig(inbox_max_bytes=1000))
    assert with_overrides(config, {}) is config
    assert with_overrides(config, None) is config
    with pytest.raises(ConfigError) as caught:
        with_overrides(config, [("epoch_size", 1)])  # type: ignore[arg-type]
    assert str(caught.value) == "config overrides must be a mapping, got list"
    assert with_overrides(config, {"inbox_max_bytes": 1000}).prompt.inbox_max_bytes == 1000
    with pytest.raises(ConfigError) as caught:
        with_overrides(config, {"inbox_max_bytes": 1001})
    assert str(caught.value) == (
        "per-call override inbox_max_bytes = 1001 is above the operator's limit (1000);"
        " an override may only lower it"
    )
    with pytest.raises(ConfigError) as caught:
        with_overrides(config, {"epoch_size": -4})
    assert str(caught.value) == (
        "invalid configuration in per-call overrides, table [prompt]:"
        " Expected `int` >= 0 - at `prompt.epoch_size`"
    )
    changed = with_overrides(config, {"epoch_size": 5})
    assert changed.prompt.inbox_max_bytes == 1000  # the rest stays
    assert config.prompt.epoch_size == 20  # the snapshot given is unchanged


def test_load_config_reads_the_file_and_applies_the_overrides(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SCOUTD_CONFIG", raising=False)
    monkeypatch.setattr("scoutd.config_paths.DEFAULT_CONFIG_PATH", "/nonexistent/scoutd.toml")
    config = load_config(overrides={"epoch_size": 9})
    assert config.prompt.epoch_size == 9
    assert config.origins["prompt.epoch_size"] == "override"
    path = write(tmp_path / "s.toml", "[prompt]\nepoch_size = 4\nfull_tool_calls = 2\n")
    config = load_config(path, overrides={"full_tool_calls": 1})
    assert (config.path, config.prompt.epoch_size, config.prompt.full_tool_calls) == (
        str(path),
        4,
        1,
    )
