"""docs/ARCHITECTURE.md names only what exists, and its layout lists every package.

The layout blocks (fenced blocks that start at ``scoutd/``) are read as a tree:
every entry must exist, and the first block must list exactly the packages of
``scoutd/``. The daemon's module table must list exactly ``scoutd/server/``'s
modules. Every file path the text names in backticks must exist.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "ARCHITECTURE.md"
PACKAGE = ROOT / "scoutd"

_ENTRY = re.compile(r"^( *)([A-Za-z_][\w.-]*(?:\.py|/))(?:\s|$)")
_PATH = re.compile(r"`([\w./-]+\.(?:py|md|toml)|[\w.-]+/[\w./-]*)`")


def _layout_blocks(text: str) -> list[list[str]]:
    blocks = re.findall(r"```\n(scoutd/\n.*?)```", text, flags=re.S)
    return [block.splitlines() for block in blocks]


def _entries(lines: list[str]) -> list[Path]:
    """The paths of a layout block: indentation nests an entry in the last directory."""
    stack: list[tuple[int, Path]] = [(-1, ROOT)]
    found = []
    for line in lines:
        match = _ENTRY.match(line)
        if match is None:
            continue
        indent, name = len(match.group(1)), match.group(2)
        while stack[-1][0] >= indent:
            stack.pop()
        path = stack[-1][1] / name.rstrip("/")
        found.append(path)
        if name.endswith("/"):
            stack.append((indent, path))
    return found


def _packages(directory: Path) -> set[str]:
    return {p.parent.name for p in directory.glob("*/__init__.py")}


def test_every_layout_entry_exists() -> None:
    blocks = _layout_blocks(DOC.read_text(encoding="utf-8"))
    assert len(blocks) >= 2  # the package and the client and the protocol
    for lines in blocks:
        entries = _entries(lines)
        assert len(entries) > 5
        missing = [str(p.relative_to(ROOT)) for p in entries if not p.exists()]
        assert missing == []


def test_the_layout_lists_every_package() -> None:
    entries = _entries(_layout_blocks(DOC.read_text(encoding="utf-8"))[0])
    listed = {p.name for p in entries if p.parent == PACKAGE and p.is_dir()}
    assert listed == _packages(PACKAGE)


def test_the_daemon_table_lists_every_server_module() -> None:
    text = DOC.read_text(encoding="utf-8")
    table = re.search(r"The daemon, `scoutd/server/`:\n\n(.*?)\n\n", text, flags=re.S)
    assert table is not None
    listed = set(re.findall(r"^\| `(\w+\.py)` \|", table.group(1), flags=re.M))
    modules = {p.name for p in (PACKAGE / "server").glob("*.py")} - {"__init__.py", "__main__.py"}
    assert listed == modules


def test_every_path_named_exists() -> None:
    """A path in backticks exists from the repository root, ``scoutd/`` or
    ``docs/``; a bare module name (``listener.py``) somewhere in the package."""
    text = DOC.read_text(encoding="utf-8")
    names = set(_PATH.findall(text))
    assert len(names) > 20
    missing = []
    for name in sorted(names):
        bases = (ROOT, PACKAGE, ROOT / "docs")
        if any((base / name).exists() for base in bases):
            continue
        if "/" not in name.rstrip("/") and any(PACKAGE.rglob(name)):
            continue
        missing.append(name)
    assert missing == []
