"""The operator scripts run as the docs say: bad input is a usage error, not a run.

``scripts/vendor-vectors``, ``scripts/mutation`` and the reliability scripts
(``load``, ``chaos-inbox``, ``fuzz-rpc``; docs/RELIABILITY.md, docs/TESTING.md)
are run as subprocesses, each the way a careless user would: an option instead
of a directory, a count of 0, an interrupted run. None may destroy a file, print
a traceback, pass having checked nothing, or leave a process or temp dir behind.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
VECTORS = Path("tests") / "vectors" / "conformance-subset.json.gz"
QUICK = 20.0  # seconds: bounds a usage error, which takes well under one


def _run(*argv: str, timeout: float = QUICK) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in a process group of its own; on timeout, kill the whole group.

    A script that runs instead of refusing starts a daemon and workers: none may
    outlive the test.
    """
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=QUICK)
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


# --- scripts/vendor-vectors -------------------------------------------------------------


@pytest.fixture
def vendor_tree(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the script in a tree of its own, beside a vendored file to protect.

    The script writes next to itself (``../tests/vectors``): the copy keeps the
    checkout's real file out of reach whatever the script does.
    """
    (tmp_path / "scripts").mkdir()
    script = tmp_path / "scripts" / "vendor-vectors"
    shutil.copy2(SCRIPTS / "vendor-vectors", script)
    vendored = tmp_path / VECTORS
    vendored.parent.mkdir(parents=True)
    vendored.write_bytes(b"the vendored vectors")
    return script, vendored


def test_vendor_vectors_never_replaces_the_file_with_nothing(
    vendor_tree: tuple[Path, Path], tmp_path: Path
) -> None:
    script, vendored = vendor_tree
    empty = tmp_path / "empty"
    empty.mkdir()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "x.json").write_text('{"not_cases": []}', encoding="utf-8")
    for argv, code in (
        (["--help"], 0),
        (["-h"], 0),
        ([str(tmp_path / "missing")], 2),
        ([str(empty)], 1),
        ([str(broken)], 1),
        ([], 2),
    ):
        run = _run(sys.executable, str(script), *argv)
        assert run.returncode == code, (argv, run.stdout, run.stderr)
        assert "Traceback" not in run.stderr, (argv, run.stderr)
        assert vendored.read_bytes() == b"the vendored vectors", argv
        assert sorted(p.name for p in vendored.parent.iterdir()) == [vendored.name]
    assert "Usage: scripts/vendor-vectors DIR" in _run(sys.executable, str(script), "-h").stdout


def test_vendor_vectors_rebuilds_from_a_real_directory(
    vendor_tree: tuple[Path, Path], tmp_path: Path
) -> None:
    script, vendored = vendor_tree
    source = tmp_path / "full"
    source.mkdir()
    transcript = [{"role": "user", "content": "hi"}]
    cases = [
        {"id": "s.c010-a", "input": transcript},
        {"id": "s.c400-b", "input": transcript},  # over 120 pairs: left to the full set
        {"id": "helper-x", "value": 1},
    ]
    (source / "a.json").write_text(json.dumps({"cases": cases}), encoding="utf-8")
    run = _run(sys.executable, str(script), str(source))
    assert run.returncode == 0, run.stderr
    document = json.loads(gzip.decompress(vendored.read_bytes()))
    assert [case["id"] for case in document["files"]["a.json"]] == ["s.c010-a", "helper-x"]
    assert list(document["inputs"].values()) == [transcript]


# --- scripts/mutation -------------------------------------------------------------------


@pytest.mark.parametrize("argv", [["--help"], ["-x"], ["scoutd.strategies.txt"], ["os"]])
def test_mutation_refuses_what_is_no_module_before_installing(argv: list[str]) -> None:
    run = _run(str(SCRIPTS / "mutation"), *argv)
    assert run.returncode == (0 if argv == ["--help"] else 2), (run.stdout, run.stderr)
    assert "== mutating" not in run.stdout and "No such option" not in run.stderr
    assert "Usage: scripts/mutation" in run.stdout + run.stderr or "not a module" in run.stderr


# --- scripts/pythons and the suite it shares with scripts/floors ------------------------


@pytest.mark.parametrize(
    "argv", [["--help"], ["x"], ["3.9"], ["2.7"], ["-n"], ["--floors", "3.9"], ["3.13", "-x"]]
)
def test_pythons_refuses_what_is_no_version_scoutd_admits(argv: list[str]) -> None:
    """Refused before anything is installed or run (no ``pythons:`` line)."""
    run = _run(str(SCRIPTS / "pythons"), *argv)
    assert run.returncode == (0 if argv == ["--help"] else 2), (run.stdout, run.stderr)
    assert "pythons:" not in run.stdout
    if argv != ["--help"]:
        assert argv[-1] in run.stderr
    else:
        assert "--floors" in run.stdout


def test_the_core_suite_names_requirements_and_test_paths_that_exist() -> None:
    """What the floors and the other Pythons install is the package's own ranges, and
    every path they run exists (a moved test file would leave a hole silently)."""
    requirements = _run(sys.executable, str(SCRIPTS / "core_suite.py"), "requirements")
    names = {re.split(r"[<>=!~\[; ]", line)[0] for line in requirements.stdout.split()}
    assert {"anyio", "watchdog", "msgspec", "redis", "pytest", "hypothesis"} <= names
    tests = _run(sys.executable, str(SCRIPTS / "core_suite.py"), "tests").stdout.split()
    paths = [t for t in tests if not t.startswith("-")]
    assert paths and all((ROOT / path).exists() for path in paths), paths
    assert _run(sys.executable, str(SCRIPTS / "core_suite.py")).returncode == 2


# --- the reliability scripts ------------------------------------------------------------

BAD_OPTIONS = [
    ("load", "prepare", "--clients", "0"),  # passed with 0 calls made
    ("load", "prepare", "--procs", "0"),  # ZeroDivisionError
    ("load", "prepare", "--large-share", "2"),
    ("load", "sessions", "--dirs", "0"),  # ZeroDivisionError, temp dir left behind
    ("load", "sessions", "--sessions", "0"),  # the daemon refused its config: traceback
    ("load", "fds", "--clients", "10"),  # never out of descriptors: 15 s, then a traceback
    ("load", "fds", "--limit", "-1"),
    ("chaos-inbox", "kill", "--kills", "0"),  # ZeroDivisionError
    ("chaos-inbox", "kill", "--min-interval", "0"),  # ZeroDivisionError
    ("chaos-inbox", "kill", "--min-interval", "1", "--max-interval", "0.5"),
    ("chaos-inbox", "race", "--consumers", "0"),  # waited 60 s for a drain, then a traceback
    ("chaos-inbox", "race", "--notices", "0"),  # FileNotFoundError
    ("fuzz-rpc", "--frames", "0"),  # passed having sent nothing
    ("fuzz-rpc", "--workers", "0"),  # ZeroDivisionError
    ("fuzz-rpc", "--rounds", "0"),  # IndexError
    ("fuzz-rpc", "--limit", "65536"),  # the generator's valid frames refused: false failures
    ("fuzz-rpc", "--max-seconds", "nan"),
]


@pytest.mark.parametrize("argv", BAD_OPTIONS, ids=" ".join)
def test_a_bad_option_is_a_usage_error(argv: tuple[str, ...]) -> None:
    name, *rest = argv
    try:
        run = _run(sys.executable, str(SCRIPTS / name), *rest, "--json")
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' '.join(argv)} ran instead of refusing its option")
    assert run.returncode == 2, (run.stdout, run.stderr[-2000:])
    assert "usage:" in run.stderr and "Traceback" not in run.stderr, run.stderr[-2000:]
    assert run.stdout == ""  # no JSON document: no run


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found += [int(entry), *_children(int(entry))]
    return found


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return []


def test_an_interrupted_race_leaves_nothing_behind() -> None:
    """Ctrl-C (SIGINT to the process group) once the daemon runs: its temp dir goes too."""
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPTS / "chaos-inbox"), "race", "--json"],
        cwd=ROOT,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    directory = None
    try:
        deadline = time.monotonic() + QUICK
        while directory is None and time.monotonic() < deadline:
            for child in _children(proc.pid):
                argv = _cmdline(child)
                if "serve" in argv and "--config" in argv:
                    directory = os.path.dirname(argv[argv.index("--config") + 1])
            time.sleep(0.02)
        assert directory is not None, "the race started no daemon"
        started = _children(proc.pid)
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(QUICK)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(QUICK)
    deadline = time.monotonic() + 5
    while any(map(_running, started)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not [pid for pid in started if _running(pid)]
    assert not os.path.exists(directory), f"{directory} left behind"


def test_a_fuzz_worker_reports_a_silent_daemon() -> None:
    """No answer within the timeout is a violation in the report, not a crash."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        path = f"/tmp/sdfuzz-{os.getpid()}.sock"  # short: Unix socket paths are limited
        server.bind(path)
        try:
            server.listen(1)
            held: list[socket.socket] = []
            accepting = threading.Thread(target=lambda: held.append(server.accept()[0]))
            accepting.start()
            code = (
                f"import sys; sys.path.insert(0, {str(SCRIPTS)!r}); import fuzz_rpc_worker as w; "
                f"w.ANSWER_TIMEOUT = 0.2; sys.exit(w.worker({path!r}, 3, 1, '/tmp', 1 << 20))"
            )
            run = _run(sys.executable, "-c", code)
            accepting.join(QUICK)
            for sock in held:
                sock.close()
        finally:
            os.unlink(path)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr[-2000:]
    report = json.loads(run.stdout.splitlines()[-1])
    assert report["violation_count"] == 1 and report["frames"] == 1
    assert "answer(s) in time" in report["violations"][0]


def _kill_run(*options: str) -> dict[str, Any]:
    """``chaos-inbox kill --mode library`` at a tiny size; its JSON document."""
    argv = ["kill", "--mode", "library", "--notices", "5", *options, "--json"]
    run = _run(sys.executable, str(SCRIPTS / "chaos-inbox"), *argv)
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
    document: dict[str, Any] = json.loads(run.stdout.splitlines()[-1])
    assert run.returncode == (0 if document["ok"] else 1)
    return document


def test_a_kill_run_short_of_its_kills_fails() -> None:
    """``--max-seconds`` ending the run before ``--kills`` kills is no pass."""
    document = _kill_run("--kills", "50", "--max-seconds", "1", "--rate", "0")
    [run] = document["runs"]
    assert run["kills"] < 50
    assert document["failures"] == [f"library: {run['kills']} kill(s) of the 50 asked for"]


def test_equal_kill_intervals_are_a_fixed_delay() -> None:
    """Without ``--rate``, the rate comes from the mean delay: log(1) divided by zero."""
    document = _kill_run("--kills", "1", "--min-interval", "0.05", "--max-interval", "0.05")
    assert document["ok"] and document["runs"][0]["kills"] >= 1
