"""The shipped deployment files: config/scoutd.toml and the systemd units.

The example config documents every key with its default, so it must never
drift from the code: each key of PromptConfig and DaemonConfig appears in it,
set or commented out, with the built-in default as its value (except the few
set on purpose, listed below).
"""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import msgspec
import pytest

from scoutd.config import DEFAULT_STRATEGIES, DaemonConfig, PromptConfig, resolve_config

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "config" / "scoutd.toml"
SYSTEMD = ROOT / "systemd"

# Set in the example to a value other than the default, on purpose.
DELIBERATE = {"daemon.allowed_roots"}
# Keys whose default is "unset" (None): the commented line shows an example value.
EXAMPLE_VALUES = {
    "prompt.max_tool_outputs",
    "prompt.cache_write_price",
    "prompt.cache_read_price",
    "prompt.tokenizer",
    "daemon.socket_group",
    "daemon.allowed_uids",
    "daemon.abort_signal",
    "daemon.max_prepares_per_uid",
}
# Unset keys whose example value is what "unset" means.
UNSET_MEANS = {
    "prompt.prompt_strategies": list(DEFAULT_STRATEGIES),
    "prompt.max_tool_outputs": PromptConfig().max_tool_calls,
}

_ENTRY = re.compile(r"^(# )?([a-z_][a-z0-9_]*) = ")
_TABLE = re.compile(r"^\[([a-z_]+)\]$")


class Entry(msgspec.Struct):
    table: str
    key: str
    commented: bool
    value: Any


def entries(text: str) -> list[Entry]:
    """Every ``key = value`` of the file, set or commented out (``# key = value``).

    A value may span lines (a multi-line string): following lines are taken,
    uncommented alike, until the fragment decodes as TOML.
    """
    lines = text.splitlines()
    found: list[Entry] = []
    table = ""
    for number, line in enumerate(lines):
        if header := _TABLE.match(line):
            table = header.group(1)
            continue
        match = _ENTRY.match(line)
        if match is None:
            continue
        commented = match.group(1) is not None
        fragment = line.removeprefix("# ") if commented else line
        for follower in lines[number + 1 :]:
            try:
                msgspec.toml.decode(fragment)
                break
            except msgspec.DecodeError:
                fragment += "\n" + (follower.removeprefix("# ") if commented else follower)
        key = match.group(2)
        found.append(Entry(table, key, commented, msgspec.toml.decode(fragment)[key]))
    return found


def uncommented(text: str) -> str:
    """The file with every commented-out key (and its continuation lines) set."""
    out: list[str] = []
    pending = False  # inside a commented multi-line value
    for line in text.splitlines():
        if pending or (_ENTRY.match(line) and line.startswith("# ")):
            line = line.removeprefix("# ")
            pending = line.count('"""') == 1 if not pending else '"""' not in line
        out.append(line)
    return "\n".join(out) + "\n"


def builtin(value: Any) -> Any:
    """The value as TOML/JSON sees it (tuples become lists)."""
    return msgspec.json.decode(msgspec.json.encode(value))


def test_example_validates() -> None:
    config = resolve_config(EXAMPLE, environ={})
    assert config.path == str(EXAMPLE)
    assert config.daemon.allowed_roots == ("/home", "/srv/agents")


def test_every_key_is_documented_with_its_default() -> None:
    found = {f"{e.table}.{e.key}": e for e in entries(EXAMPLE.read_text())}
    defaults = {f"prompt.{k}": getattr(PromptConfig(), k) for k in PromptConfig.__struct_fields__}
    defaults |= {f"daemon.{k}": getattr(DaemonConfig(), k) for k in DaemonConfig.__struct_fields__}
    missing = sorted(set(defaults) - set(found))
    assert not missing, f"keys missing from {EXAMPLE.name}: {missing}"
    for key, default in defaults.items():
        entry = found[key]
        if key in DELIBERATE:
            assert not entry.commented and builtin(entry.value) != builtin(default), key
        elif key in UNSET_MEANS:
            assert entry.commented and entry.value == UNSET_MEANS[key], key
        elif key in EXAMPLE_VALUES:
            assert default is None and entry.commented, key
        else:
            assert builtin(entry.value) == builtin(default), (
                f"{key}: {entry.value!r} != {default!r}"
            )
    assert all(found[key].commented for key in defaults if key.startswith("prompt.")), (
        "[prompt] keys stay commented: a value in the file would hide the environment variables"
    )
    assert set(found) - set(defaults) == {"plugins.my_compactor"}
    assert found["plugins.my_compactor"].commented


def test_every_key_has_a_comment() -> None:
    lines = EXAMPLE.read_text().splitlines()
    for number, line in enumerate(lines):
        if _ENTRY.match(line):
            previous = lines[number - 1]
            assert previous.startswith("#") and not _ENTRY.match(previous), line


def test_example_with_every_line_uncommented_validates(tmp_path: Path) -> None:
    """Commented examples are valid too: uncommenting one never breaks the file."""
    full = tmp_path / "full.toml"
    full.write_text(uncommented(EXAMPLE.read_text()))
    config = resolve_config(full, environ={})
    assert config.prompt.compaction_notice == PromptConfig().compaction_notice
    assert config.prompt.prompt_strategies == DEFAULT_STRATEGIES
    assert config.daemon.abort_signal == "TERM"
    assert config.plugins == {"my_compactor": "my_package.strategies:compact"}
    assert {k for k, v in config.origins.items() if v == "file"} >= {
        f"prompt.{k}" for k in PromptConfig.__struct_fields__
    }


# ------------------------------------------------------------------ systemd units


def unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=True, empty_lines_in_values=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    parser.read_string((SYSTEMD / name).read_text())
    return parser


def test_service_unit() -> None:
    service = unit("scoutd.service")
    assert service["Unit"]["Requires"] == "scoutd.socket"
    assert service["Unit"]["After"] == "scoutd.socket"
    s = service["Service"]
    expected = {
        "Type": "notify",
        "ExecStart": "/usr/bin/env scoutd serve --config /etc/scoutd/scoutd.toml",
        "ExecReload": "/bin/kill -HUP $MAINPID",
        "WatchdogSec": "30",
        "Restart": "on-failure",
        "RuntimeDirectory": "scoutd",
        "RuntimeDirectoryPreserve": "yes",
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "ProtectHome": "no",
        "PrivateTmp": "yes",
        "PrivateDevices": "yes",
        "ProtectKernelTunables": "yes",
        "ProtectKernelModules": "yes",
        "ProtectControlGroups": "yes",
        "RestrictAddressFamilies": "AF_UNIX",
        "RestrictNamespaces": "yes",
        "LockPersonality": "yes",
        "MemoryDenyWriteExecute": "yes",
        "SystemCallArchitectures": "native",
        "CapabilityBoundingSet": "",
        # threads and memory are bounded by design (docs/RELIABILITY.md)
        "TasksMax": "128",
        "MemoryHigh": "1G",
        "MemoryMax": "2G",
    }
    for key, value in expected.items():
        assert s.get(key) == value, key
    # /home is writable only through the documented placeholder list.
    assert "/home" in s["ReadWritePaths"].split() or "-/home" in s["ReadWritePaths"].split()
    assert service["Install"]["WantedBy"] == "multi-user.target"


def test_socket_unit() -> None:
    sock = unit("scoutd.socket")["Socket"]
    assert sock["ListenStream"] == "/run/scoutd/scoutd.sock"
    assert sock["SocketMode"] == "0660"
    assert "#SocketGroup=" in (SYSTEMD / "scoutd.socket").read_text()
    assert unit("scoutd.socket")["Install"]["WantedBy"] == "sockets.target"


def test_systemd_analyze_verify(tmp_path: Path) -> None:
    """systemd itself accepts every directive (where systemd-analyze is installed)."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    for name in ("scoutd.service", "scoutd.socket"):
        shutil.copy(SYSTEMD / name, tmp_path / name)
    result = subprocess.run(
        [analyze, "verify", str(tmp_path / "scoutd.socket"), str(tmp_path / "scoutd.service")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    complaints = [
        line
        for line in (result.stdout + result.stderr).splitlines()
        if "scoutd." in line
        and re.search(r"Unknown|Invalid|Failed to parse|ignoring|bad-setting", line)
    ]
    assert not complaints, "\n".join(complaints)
