"""The ``scoutd`` command ends at once when it is done and nothing is left to run.

``scoutd.cli.run`` (the console script, ``python -m scoutd``) skips the
interpreter's teardown after ``scoutd notify`` (docs/PERFORMANCE.md, "The
teardown skipped"). Each test runs the real command in a process whose ``__main__``
holds an object that says so when the teardown collects it, so that the
teardown is seen to run or not.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import scoutd

from .helpers import run

_PROGRAM = """
import sys

class Teardown:
    def __del__(self):
        sys.stderr.write("teardown\\n")

kept = Teardown()
{extra}
from scoutd.cli import run

sys.argv = ["scoutd", *sys.argv[1:]]
run()
"""

_AT_EXIT = "import atexit\natexit.register(lambda: sys.stderr.write('callback\\n'))"
# A thread still running when the verb is done (it waits for the main thread to end):
# the process must wait for it.
_THREAD = (
    "import threading\n"
    "main = threading.main_thread()\n"
    "threading.Thread(target=lambda: (main.join(), sys.stderr.write('thread done\\n'))).start()"
)


def _scoutd(
    home: Path, extra: str, *args: str, config: str = "empty.toml"
) -> subprocess.CompletedProcess[str]:
    program = ("-c", _PROGRAM.format(extra=extra))
    return run(home, *args, env={"SCOUTD_CONFIG": str(home / config)}, program=program)


def _notices(save_file: Path) -> list[str]:
    inbox = Path(scoutd.inbox_dir(str(save_file)))
    return sorted(path.read_text() for path in inbox.iterdir())


def test_a_light_verb_ends_without_the_teardown(home: Path) -> None:
    save_file = home / "a.chat"
    result = _scoutd(home, "", "notify", str(save_file), "Wrap up.")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # no teardown ran
    [written] = result.stdout.splitlines()  # the output is whole
    assert Path(written).read_text() == "Wrap up."
    assert _notices(save_file) == ["Wrap up."]


def test_a_refused_light_verb_keeps_its_exit_code(home: Path) -> None:
    (home / "roots.toml").write_text(f'[daemon]\nallowed_roots = ["{home / "agents"}"]\n')
    result = _scoutd(home, "", "notify", str(home / "a.chat"), "x", config="roots.toml")
    assert result.returncode == 2
    assert "outside allowed_roots" in result.stderr
    assert not Path(scoutd.inbox_dir(str(home / "a.chat"))).exists()


@pytest.mark.parametrize(
    ("extra", "said"), [(_AT_EXIT, "callback"), (_THREAD, "thread done")], ids=["atexit", "thread"]
)
def test_what_is_left_to_run_still_runs(home: Path, extra: str, said: str) -> None:
    """An exit callback (logging's flush, a temporary directory's cleanup) or a
    thread still running: the process exits as usual."""
    save_file = home / "a.chat"
    result = _scoutd(home, extra, "notify", str(save_file), "Wrap up.")
    assert result.returncode == 0, result.stderr
    assert said in result.stderr.splitlines()
    assert "teardown" in result.stderr.splitlines()
    assert _notices(save_file) == ["Wrap up."]


def test_a_verb_that_logs_exits_as_usual(home: Path) -> None:
    save_file = home / "a.chat"
    result = _scoutd(home, "", "inbox", str(save_file))
    assert result.returncode == 0, result.stderr
    assert "teardown" in result.stderr.splitlines()
    assert result.stdout.startswith("no inbox at ")
