"""``scoutd config show`` and ``scoutd config check``."""

from __future__ import annotations

import json
from pathlib import Path

import scoutd
from scoutd.config import PromptConfig

from .helpers import (
    one_error_line,
    run,
)


def test_config_show_lists_origins(home: Path) -> None:
    config = home / "scoutd.toml"
    config.write_text('[prompt]\nfull_tool_calls = 2\n[daemon]\nlog_level = "debug"\n')
    result = run(
        home, "config", "show", "--config", str(config), "--set", "epoch_full_tool_calls=5",
        env={"EPOCH_SIZE": "7", "FULL_TOOL_CALLS": "9"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"# config file: {config} (--config)"
    assert "prompt.epoch_size = 7  (env:EPOCH_SIZE)" in lines
    assert "prompt.full_tool_calls = 2  (file)" in lines  # the file wins over the env
    assert "prompt.epoch_full_tool_calls = 5  (override)" in lines
    assert "prompt.epoch_increment_max_size = 60  (default)" in lines
    assert 'daemon.log_level = "debug"  (file)' in lines
    assert "daemon.socket_mode = 0o660  (default)" in lines
    keys = {line.split(" = ")[0] for line in lines[1:]}
    expected = {f"prompt.{k}" for k in PromptConfig.__struct_fields__}
    expected |= {f"daemon.{k}" for k in scoutd.DaemonConfig.__struct_fields__}
    assert keys == expected

    as_json = run(home, "config", "show", "--json", env={"EPOCH_SIZE": "7"})
    assert as_json.returncode == 0, as_json.stderr
    values = json.loads(as_json.stdout)["values"]
    assert values["prompt.epoch_size"] == {"value": 7, "origin": "env:EPOCH_SIZE"}
    assert values["daemon.allowed_roots"] == {"value": ["/"], "origin": "default"}


def test_config_show_bad_env_exits_2(home: Path) -> None:
    result = run(home, "config", "show", env={"EPOCH_SIZE": "lots"})
    assert result.returncode == 2
    assert "EPOCH_SIZE" in one_error_line(result)


def test_config_check(home: Path) -> None:
    good = home / "good.toml"
    good.write_text("[prompt]\nepoch_size = 30\n[daemon]\nidle_timeout = 12.5\n")
    ok = run(home, "config", "check", str(good))
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout == f"ok: {good}\n"

    cases = {
        "[prompt]\nepoch_sise = 30\n": "epoch_sise",
        "[prompt]\nepoch_size = -1\n": "epoch_size",
        '[daemon]\nwatch_mode = "sometimes"\n': "watch_mode",
        "[prompt\n": "bad.toml",
    }
    for text, named in cases.items():
        bad = home / "bad.toml"
        bad.write_text(text)
        result = run(home, "config", "check", str(bad))
        assert result.returncode == 2, text
        line = one_error_line(result)
        assert named in line and "bad.toml" in line, line
        assert result.stdout == ""
    missing = run(home, "config", "check", str(home / "absent.toml"))
    assert missing.returncode == 2
    assert "absent.toml" in one_error_line(missing)


def test_config_show_escapes_the_names_a_file_holds(home: Path) -> None:
    """A ``[plugins]`` name (a key of the file) holding a newline and an escape
    sequence forged a line of ``config show``; it is shown escaped."""
    config = home / "scoutd.toml"
    config.write_text('[plugins]\n"p\\nprompt.forged = 1\\u001b[2J" = "m:f"\n')
    result = run(home, "config", "show", "--config", str(config))
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout
    assert not any(line.startswith("prompt.forged") for line in result.stdout.splitlines())
    assert 'plugins.p\\x0aprompt.forged = 1\\x1b[2J = "m:f"  (file)' in result.stdout
