"""The CLI verbs of the daemon side: ``scoutd metrics`` and ``config check`` warnings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from scoutd.testing import ROOT
from tests.server.test_metrics import parse_exposition
from tests.support.daemon import Daemon


def test_scoutd_metrics_prints_the_exposition() -> None:
    with Daemon() as d, d.connect() as c:
        c.call("status")
        run = subprocess.run(
            [sys.executable, "-m", "scoutd", "metrics", "--socket", d.socket_path],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": ROOT},
        )
    assert run.returncode == 0, run.stderr
    samples = parse_exposition(run.stdout)
    assert samples['scoutd_requests_total{method="status"}'] >= 2  # the harness's and ours
    assert samples['scoutd_requests_total{method="metrics"}'] == 1


def test_config_check_warns_about_a_missing_root(tmp_path: Path) -> None:
    directory = str(tmp_path)
    config = os.path.join(directory, "scoutd.toml")
    missing = os.path.join(directory, "nope")
    with open(config, "w", encoding="utf-8") as handle:
        handle.write(f'[daemon]\nallowed_roots = ["{directory}", "{missing}"]\n')
    run = subprocess.run(
        [sys.executable, "-m", "scoutd", "config", "check", config],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == f"ok: {config}\n"
    assert run.stderr == f"warning: allowed_roots entry {missing} is not an existing directory\n"


def test_python_m_scoutd_server_is_scoutd_serve() -> None:
    """Documented in docs/PERFORMANCE.md (profiling); it has no options of its own."""
    run = subprocess.run(
        [sys.executable, "-m", "scoutd.server", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("usage: scoutd serve ")
