"""The reference tables of the docs say what the code does.

docs/OPERATIONS.md lists every configuration key with its default (and, for
``[prompt]``, its environment variable) and names every ``[fleet]`` key,
docs/PROTOCOL.md the error codes, the limits and the metrics, and they and
docs/RELIABILITY.md name the keys a per-call override may only lower. Each is
read here and compared with the code's own definitions (``scoutd.config``,
``scoutd.protocol.messages``, the metrics as rendered), so that a new key, a
changed default or a renamed code cannot leave the docs behind. Every
``SCOUTD_*`` environment variable the package reads must be documented too.
"""

from __future__ import annotations

import re
from pathlib import Path

from scoutd.config import TIGHTEN_ONLY, DaemonConfig, FleetConfig, PromptConfig
from scoutd.fleet.metrics import metrics_text
from scoutd.protocol import messages
from scoutd.server.metrics import Gauges, Metrics

ROOT = Path(__file__).resolve().parent.parent
OPERATIONS = (ROOT / "docs" / "OPERATIONS.md").read_text(encoding="utf-8")
PROTOCOL = (ROOT / "docs" / "PROTOCOL.md").read_text(encoding="utf-8")
RELIABILITY = (ROOT / "docs" / "RELIABILITY.md").read_text(encoding="utf-8")


def table(doc: str, heading: str) -> list[list[str]]:
    """The body rows of the first Markdown table after ``heading``, cells stripped."""
    lines = doc[doc.index(heading) :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def number(cell: str) -> int | float | None:
    """The number a default cell starts with (``0o660``, ``2.0``, ``1048576``), or None."""
    match = re.match(r"`?(0o[0-7]+|\d+\.\d+|\d+)", cell)
    if match is None:
        return None
    text = match.group(1)
    return float(text) if "." in text else int(text, 0)


def default_of(struct: type[PromptConfig] | type[DaemonConfig], key: str) -> object:
    return getattr(struct(), key)


def test_every_prompt_key_is_in_the_table_with_its_variable_and_default() -> None:
    rows = {row[0].strip("`"): row for row in table(OPERATIONS, "### `[prompt]`")}
    assert set(rows) == set(PromptConfig.__struct_fields__)
    for key, (_, variable, default, _meaning) in rows.items():
        expected = "PROMPT_STRATEGY" if key == "prompt_strategies" else key.upper()
        assert variable == f"`{expected}`", key
        value = default_of(PromptConfig, key)
        if isinstance(value, bool):
            assert default == str(value).lower(), key
        elif isinstance(value, (int, float)):
            assert number(default) == value, key
        elif value is None:
            assert default.startswith("unset"), key


def test_every_daemon_key_is_in_the_table_with_its_default() -> None:
    rows = {row[0].strip("`"): row for row in table(OPERATIONS, "### `[daemon]`")}
    assert set(rows) == set(DaemonConfig.__struct_fields__)
    for key, (_, default, _meaning) in rows.items():
        value = default_of(DaemonConfig, key)
        if isinstance(value, (int, float)):
            assert number(default) == value, key
        elif isinstance(value, str):
            assert default == f'`"{value}"`' or default == f"`{value}`", key
        elif value is None:
            assert default.startswith("unset"), key


def test_every_fleet_key_is_named_in_the_fleet_section() -> None:
    section = OPERATIONS[OPERATIONS.index("## A fleet") :]
    section = section[: section.index("\n## ")]
    missing = [
        key for key in FleetConfig.__struct_fields__ if not re.search(rf"\b{key}\b", section)
    ]
    assert missing == []


def test_the_protocol_limits_table_gives_the_daemon_defaults() -> None:
    for row in table(PROTOCOL, "## Limits"):
        key, default = row[0].strip("`"), row[1]
        if key in DaemonConfig.__struct_fields__ and number(default) is not None:
            value = default_of(DaemonConfig, key)
            assert number(default) == value, key


def test_the_error_codes_table_matches_the_protocol() -> None:
    rows = table(PROTOCOL, "## Error codes")
    documented = {int(row[0]): row[1].strip("`") for row in rows}
    codes = {
        value: name
        for name, value in vars(messages).items()
        if name.isupper() and isinstance(value, int) and -32768 <= value <= -32000
    }
    assert documented == codes


def test_the_keys_an_override_may_only_lower_are_named_where_overrides_are() -> None:
    """docs/PROTOCOL.md's ``config`` parameter, docs/OPERATIONS.md's per-call
    overrides and docs/RELIABILITY.md's rule on them each name every tighten-only
    key (a client is refused above them)."""
    config_row = next(row for row in table(PROTOCOL, "Params:") if row[0] == "`config`")
    overrides = OPERATIONS[OPERATIONS.index("### Per-call overrides") :]
    overrides = overrides[: overrides.index("\n## ")]
    rule = RELIABILITY[RELIABILITY.index("2. **An override may lower a limit") :]
    rule = rule[: rule.index("\n3. ")]
    for key in sorted(TIGHTEN_ONLY):
        assert f"`{key}`" in config_row[2], key
        assert f"`{key}`" in overrides, key
        assert f"`{key}`" in rule, key


def test_every_environment_variable_read_is_documented() -> None:
    docs = "\n".join(
        path.read_text(encoding="utf-8")
        for path in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    )
    read = set()
    for path in (ROOT / "scoutd").rglob("*.py"):
        read |= set(re.findall(r"\bSCOUTD_[A-Z][A-Z_]*[A-Z]\b", path.read_text(encoding="utf-8")))
    assert read, "no SCOUTD_ variable found: the pattern no longer matches the code"
    assert sorted(name for name in read if name not in docs) == []


def test_every_metric_is_in_the_metrics_table() -> None:
    gauges = Gauges(
        uptime=1.0,
        connections=0,
        sessions=0,
        watches=0,
        pending_request_bytes=0,
        config_generation=1,
        version="0",
        aborts=0,
    )
    fleet = messages.FleetStatus(host="h", connected=True, caught_up=True)
    text = Metrics(["status"]).render(gauges, {}) + metrics_text(fleet)
    names = set(re.findall(r"^# TYPE (scoutd_\w+) ", text, re.M))
    assert len(names) > 10
    documented = " ".join(row[0] for row in table(PROTOCOL, "### `metrics`"))
    assert sorted(name for name in names if f"`{name}" not in documented) == []
