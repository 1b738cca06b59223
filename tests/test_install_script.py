"""``scripts/install``: its help and its mistakes are told in one line, before pip runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 60.0


def install(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ROOT / "scripts" / "install"), *args],
        capture_output=True, text=True, timeout=TIMEOUT, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_prints_the_usage_and_installs_nothing(flag: str) -> None:
    result = install(flag)
    assert result.returncode == 0, result.stderr
    assert "scripts/install EXTRA" in result.stdout and "test" in result.stdout
    assert result.stderr == ""


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--bogus",), "unknown option: --bogus"),
        (("test]",), "not a list of extras"),
        (("tset",), "no extra named tset"),
        (("plot,nope",), "no extra named nope"),
        (("test", "dev"), "unexpected argument: dev"),
    ],
)
def test_a_mistake_is_one_line_and_exit_2(args: tuple[str, ...], says: str) -> None:
    result = install(*args)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and "InvalidRequirement" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "usage: scripts/install" in lines[0]


def _copy(tmp_path: Path, script: str) -> Path:
    """``script`` and pyproject.toml in a checkout-like directory whose path has a space."""
    root = tmp_path / "a checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy2(ROOT / "scripts" / script, root / "scripts" / script)
    shutil.copy2(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize("script", ["install", "serve"])
def test_a_python_that_is_not_there_is_named_and_nothing_is_made(
    tmp_path: Path, script: str
) -> None:
    root = _copy(tmp_path, script)
    result = subprocess.run(
        [str(root / "scripts" / script)], capture_output=True, text=True, timeout=TIMEOUT,
        env={**os.environ, "PYTHON": str(tmp_path / "no-python"), "SCOUTD_RUN_DIR": ""},
    )  # fmt: skip
    assert result.returncode == 1
    line = _one_line(result)
    assert line == f"scripts/{script}: no Python interpreter at PYTHON={tmp_path}/no-python:" \
        " set PYTHON to a Python >= 3.11"  # fmt: skip
    assert sorted(p.name for p in root.iterdir()) == ["pyproject.toml", "scripts"]


@pytest.mark.parametrize("script", ["install", "serve"])
def test_a_broken_virtualenv_is_named_not_rebuilt_over(tmp_path: Path, script: str) -> None:
    """``.venv/bin/python`` left dangling (its Python removed): venv does not repair it,
    so each run used to "create" it again and end in a shell error."""
    root = _copy(tmp_path, script)
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "python").symlink_to(tmp_path / "gone" / "python3")
    result = subprocess.run(
        [str(root / "scripts" / script)], capture_output=True, text=True, timeout=TIMEOUT,
        env={k: v for k, v in os.environ.items() if k not in ("PYTHON", "SCOUTD_RUN_DIR")},
    )  # fmt: skip
    assert result.returncode == 1
    assert _one_line(result) == (
        f"scripts/{script}: {root}/.venv/bin/python does not run Python >= 3.11 (a broken"
        f" virtualenv): remove {root}/.venv and run scripts/{script} again"
    )
    assert sorted(p.name for p in (root / ".venv").iterdir()) == ["bin"]
    assert not (root / "run").exists()


def test_the_commands_serve_prints_run_as_printed_from_a_path_with_spaces(
    tmp_path: Path,
) -> None:
    """Copied into a shell, each line ``scripts/serve`` suggests reaches its daemon,
    even where the socket's path holds a space (it used to be printed unquoted)."""
    run_dir = tmp_path / "run dir"
    socket_dir = tmp_path / "sock dir"
    socket_dir.mkdir(mode=0o700)
    socket_path = socket_dir / "s.sock"
    env = {k: v for k, v in os.environ.items() if k != "PYTHON"}
    env.update(SCOUTD_RUN_DIR=str(run_dir), SCOUTD_SOCKET=str(socket_path))
    serve = subprocess.Popen(
        [str(ROOT / "scripts" / "serve")], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True, env=env,
    )  # fmt: skip
    try:
        assert serve.stdout is not None
        lines = [serve.stdout.readline() for _ in range(8)]
        find = next(line.strip() for line in lines if line.strip().endswith("scoutd status"))
        shell_env = {k: v for k, v in env.items() if k != "SCOUTD_SOCKET"}
        shell_env["SCOUTD_CONFIG"] = str(tmp_path / "none.toml")
        (tmp_path / "none.toml").write_text("[daemon]\nallowed_roots = ['/']\n")
        exports = next(line.strip() for line in lines if line.strip().startswith("export PATH="))
        deadline = time.monotonic() + TIMEOUT
        while True:  # the daemon binds its socket just after the script's last line
            status = subprocess.run(
                ["bash", "-c", f"{exports.split('#')[0]}; {find} --timeout 5"],
                capture_output=True, text=True, env=shell_env, timeout=TIMEOUT,
            )  # fmt: skip
            if status.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert status.returncode == 0, (find, status.stderr)
        assert str(run_dir / "scoutd.toml") in status.stdout  # this daemon's
    finally:
        serve.terminate()
        serve.wait(timeout=TIMEOUT)
        if serve.stdout is not None:
            serve.stdout.close()


def test_serve_writes_absolute_paths_for_relative_settings(tmp_path: Path) -> None:
    """A relative SCOUTD_RUN_DIR used to go into ``allowed_roots`` as written: the
    daemon refused the config scripts/serve had just written, at this and every run."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHON"}
    env.update(SCOUTD_RUN_DIR="rel run", SCOUTD_SOCKET="rel.sock")
    result = subprocess.run(
        [str(ROOT / "scripts" / "serve"), "--print-config"], capture_output=True, text=True,
        timeout=TIMEOUT, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert f'socket_path = "{tmp_path}/rel.sock"' in result.stdout
    assert f'allowed_roots = ["{tmp_path}/rel run", ' in result.stdout
