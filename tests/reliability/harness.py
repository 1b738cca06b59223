"""Helpers of the reliability suite: run the reliability scripts, drop privileges.

The scripts (``scripts/chaos-inbox``, ``scripts/fuzz-rpc``, ``scripts/load``)
are run as subprocesses at a small size with ``--json``; their figures and
failed checks come back as a dict. The same code runs at full size by hand.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Any

import pytest

from tests.support.daemon import Daemon

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = os.path.join(ROOT, "scripts")
NOBODY = 65534
GROUP = 4242  # a group no test user is in unless given it (setpriv --groups)


def run_script(name: str, *args: str, timeout: float = 150.0) -> dict[str, Any]:
    """Run ``scripts/<name> ARGS --json``; return its JSON document (checked for ``ok``)."""
    run = subprocess.run(
        [sys.executable, os.path.join(SCRIPTS, name), *args, "--json"],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        check=False,
    )
    lines = run.stdout.strip().splitlines()
    assert lines, f"{name} printed nothing (exit {run.returncode}):\n{run.stderr[-4000:]}"
    document: dict[str, Any] = json.loads(lines[-1])
    assert document["failures"] == [], document
    assert run.returncode == 0 and document["ok"], run.stderr[-4000:]
    return document


def unprivileged_prefix() -> list[str]:
    """A command prefix that runs as uid/gid 65534 when we are root; [] otherwise.

    Root reads and writes through any file mode, so permission faults can only be
    produced for an unprivileged process.
    """
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot drop privileges")
    return [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


def notice_as_nobody(save_file: str, *, group: int | None = None) -> str:
    """``write_notice(save_file, "hi")`` run as uid 65534 (a member of ``group`` only,
    when given); the path it wrote."""
    prefix = unprivileged_prefix()
    if group is not None and prefix:
        prefix = [*prefix[:-1], f"--groups={group}"]  # instead of --clear-groups
    code = "import sys; from scoutd.inbox import write_notice as w; print(w(sys.argv[1], 'hi'))"
    done = subprocess.run(
        [*prefix, sys.executable, "-c", code, save_file],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


# An agent's own client, standard library only (it runs as uid 65534, which may not
# read this checkout's virtual environment): opens a session on argv[2] with its own
# pid and prints the session id; then, for each JSON [method, params] line on stdin,
# makes that call and prints {"answer": ..., "pushed": [the reasons of the
# session.aborted that came first]}.
AGENT = r"""
import json, os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(20)
s.connect(sys.argv[1])
reader = s.makefile("rb")
def call(n, method, params):
    s.sendall(json.dumps({"jsonrpc": "2.0", "id": n, "method": method, "params": params})
              .encode() + b"\n")
    pushed = []
    while True:
        message = json.loads(reader.readline())
        if message.get("method") == "session.aborted":
            pushed.append(message["params"]["reason"])
        elif message.get("id") == n:
            return message, pushed
answer, _ = call(0, "session.open", {"save_file": sys.argv[2], "pid": os.getpid()})
print(json.dumps(answer["result"]["session"]), flush=True)
for n, line in enumerate(sys.stdin, 1):
    answer, pushed = call(n, *json.loads(line))
    print(json.dumps({"answer": answer, "pushed": pushed}), flush=True)
"""


def unprivileged_python(
    code: str, *args: str, prefix: list[str] | None = None
) -> subprocess.Popen[str]:
    """``python -c code args...`` as :func:`unprivileged_prefix`'s user (or under
    ``prefix``, a ``setpriv`` command), this checkout on its path, lines on its stdin
    and stdout: an agent's own process."""
    return subprocess.Popen(
        [*(unprivileged_prefix() if prefix is None else prefix), sys.executable, "-c", code, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd="/",
        env={**os.environ, "PYTHONPATH": ROOT},
    )


def give_away(top: str) -> None:
    """Let the unprivileged user of :func:`unprivileged_prefix` use the tree under ``top``."""
    if os.geteuid() != 0:
        return
    for directory, dirs, files in os.walk(top):
        for name in [directory, *(os.path.join(directory, n) for n in dirs + files)]:
            if not os.path.islink(name):
                os.chown(name, NOBODY, NOBODY)


# ``python -c`` boot line of a daemon with injected faults: import the test's fault
# module (written into the daemon's directory, which is on its PYTHONPATH), then run
# the real daemon with the real command line.
_BOOT = (
    "import sys, scoutd_faults; from scoutd.cli import main;"
    " sys.exit(main(['serve', *sys.argv[1:]]))"
)


class FaultDaemon(Daemon):
    """The real daemon, with ``faults`` (Python source) imported before it starts.

    The fault module patches scoutd at the OS or thread boundary (a failing
    hand-off, a tiny queue); it usually checks a toggle file so that a test can
    switch the fault on and off while the daemon runs (:meth:`fault`).
    """

    def __init__(self, faults: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with open(os.path.join(self.dir, "scoutd_faults.py"), "w", encoding="utf-8") as handle:
            handle.write(faults)

    def command(self) -> list[str]:
        config = ["--config", self.config_path, "--socket", self.socket_path]
        return [*self.argv_prefix, sys.executable, "-c", _BOOT, *config]

    @property
    def toggle(self) -> str:
        return os.path.join(self.dir, "faults.on")

    def fault(self, on: bool) -> None:
        if on:
            open(self.toggle, "w").close()
        elif os.path.exists(self.toggle):
            os.unlink(self.toggle)
