"""The built distributions: what ``pip install scoutd`` gets, and what the sdist ships.

Built in process with hatchling (the build backend of pyproject.toml, in the
test extra), offline. The oracle is the source tree itself: every module and
data file under ``scoutd/`` reaches the wheel, and local tools' state never
reaches the sdist.
"""

from __future__ import annotations

import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest
from hatchling.builders.sdist import SdistBuilder
from hatchling.builders.wheel import WheelBuilder

ROOT = Path(__file__).resolve().parent.parent


def package_files() -> set[str]:
    """The files of the ``scoutd`` package in the source tree, bytecode left out."""
    return {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "scoutd").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("wheel")
    (built,) = WheelBuilder(str(ROOT)).build(directory=str(out), versions=["standard"])
    return str(built)


@pytest.fixture(scope="module")
def wheel_names(wheel: str) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def test_the_wheel_marks_the_package_as_typed(wheel_names: set[str]) -> None:
    # PEP 561: without the marker a user's mypy skips scoutd (import-untyped)
    # and every scoutd.prepare_prompt(...) is Any
    assert (ROOT / "scoutd" / "py.typed").is_file()
    assert "scoutd/py.typed" in wheel_names


def test_the_wheel_holds_the_whole_package_and_nothing_else(
    wheel: str, wheel_names: set[str]
) -> None:
    shipped = {name for name in wheel_names if not name.startswith("scoutd-")}
    assert shipped == package_files()
    (entry_points,) = [name for name in wheel_names if name.endswith(".dist-info/entry_points.txt")]
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read(entry_points).decode()
    assert "scoutd = scoutd.cli:run" in text.splitlines()


def test_the_sdist_ships_no_local_tool_state(tmp_path: Path) -> None:
    """A tool's cache that ignores itself with its own ``.gitignore`` (Grimp's
    ``.import_linter_cache``, used by scripts/check) is invisible to hatchling,
    which reads only the root ``.gitignore``: it must not ship all the same."""
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "README.md", ".gitignore"):
        shutil.copy2(ROOT / name, tree / name)
    shutil.copytree(ROOT / "scoutd", tree / "scoutd", ignore=shutil.ignore_patterns("__pycache__"))
    for cache in (".import_linter_cache", ".some_tool_cache"):
        (tree / cache).mkdir()
        (tree / cache / ".gitignore").write_text("*\n")
        (tree / cache / "state.json").write_text("{}\n")
    (sdist,) = SdistBuilder(str(tree)).build(directory=str(tmp_path / "out"), versions=["standard"])
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert not {name for name in names if name.startswith((".import_linter_cache", ".some_"))}
    assert "scoutd/py.typed" in names and "pyproject.toml" in names
