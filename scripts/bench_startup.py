"""The start-up figures of ``scripts/bench`` (docs/PERFORMANCE.md).

What a light ``scoutd`` verb costs an operator who runs it over many chats:
the wall time of ``scoutd notify`` (a notice dropped into a real inbox
directory), with no daemon answering and with a real one serving the config
file named, of ``scoutd abort`` (a new chat each run) with that daemon
serving, and of ``scoutd --help``, each as a ratio to ``python -c pass`` on
the same interpreter. Mostly interpreter start and imports: the verbs import
only what they use (docs/ARCHITECTURE.md, "Layers"). The five commands are
run in turn, many times, so that the same machine noise falls on each; the
figure is the median. Imported by ``scripts/bench.py``.
"""

from __future__ import annotations

import compileall
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["STARTUP_LIMIT", "bench_startup", "render_startup", "startup_targets"]

# A light verb may take at most this many times `python -c pass`: an operator who
# notifies a thousand chats waits for interpreter starts, not for scoutd's imports.
STARTUP_LIMIT = 4.0
# Per-command wall-time bound: a hung start is a failure, not a slow figure.
RUN_TIMEOUT = 60.0


def _wall(argv: Sequence[str], env: dict[str, str]) -> float:
    """The wall time of one run of ``argv``, from its start to its exit.

    Waited for by a blocking ``waitpid``, which returns at the exit. Not by
    ``subprocess.run(timeout=...)``: its wait polls, sleeping 0.5, 1, 2, ...
    up to 50 ms between looks, which rounded every figure up to the next of
    15.5, 31.5, 63.5, 113.5, 163.5 ms, ... (docs/PERFORMANCE.md). A timer,
    started before the clock, kills a run that hangs.
    """
    running: list[subprocess.Popen[bytes]] = []

    def kill() -> None:
        for process in running:
            process.kill()

    watchdog = threading.Timer(RUN_TIMEOUT, kill)
    watchdog.start()
    try:
        started = time.perf_counter()
        with subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL) as process:
            running.append(process)
            code = process.wait()
            elapsed = time.perf_counter() - started
    finally:
        watchdog.cancel()
    if code != 0:
        hung = f" (killed after {RUN_TIMEOUT:g} s)" if code == -signal.SIGKILL else ""
        raise RuntimeError(f"{' '.join(argv)} exited with {code}{hung}")
    return elapsed


def _compile_loaded() -> None:
    """Byte-compile every module this process loaded, as installing from a wheel does.

    Without it, a source newer than its bytecode (an edited checkout), or a
    dependency installed without bytecode (uv's default), with
    ``PYTHONDONTWRITEBYTECODE`` set, is compiled again by every run: the figure
    then times the compiler (``scoutd --help`` took 67.7 ms instead of 52.6 ms;
    ``scoutd notify``, with msgspec and typing_extensions compiled each time,
    80 ms instead of 55 ms). The benchmark has loaded the package, the CLI and
    everything they import by now.
    """
    # What the two verbs load, should the benchmark not have loaded it yet.
    import scoutd.cli.main
    import scoutd.cli.notices
    import scoutd.client.probe
    import scoutd.config
    import scoutd.inbox
    import scoutd.security  # noqa: F401

    for module in list(sys.modules.values()):
        source = getattr(module, "__file__", None)
        if isinstance(source, str) and source.endswith(".py"):
            compileall.compile_file(source, quiet=2)


def bench_startup(results: dict[str, Any], runs: int, progress: Callable[[str], None]) -> None:
    """``startup_*_ms`` figures: ``python -c pass``, ``scoutd notify`` (no daemon
    answering; a daemon serving the config named), ``scoutd abort`` (that daemon
    serving), ``scoutd --help``."""
    from scoutd.testing import Daemon

    progress(f"start-up of light verbs, {runs} runs each")
    _compile_loaded()
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="sdbs", dir="/tmp") as directory:
        env = dict(os.environ)
        env["SCOUTD_CONFIG"] = os.path.join(directory, "scoutd.toml")
        with open(env["SCOUTD_CONFIG"], "w", encoding="utf-8") as config:
            socket_path = os.path.join(directory, "none.sock")  # no daemon answers there
            config.write(f"[daemon]\nsocket_path = {socket_path!r}\n")
            config.write(f"allowed_roots = [{directory!r}]\n")
        with Daemon(directory=directory, name="served", daemon={"log_level": "warning"}) as daemon:
            served_env = dict(env, SCOUTD_CONFIG=daemon.config_path)
            commands: dict[str, tuple[Callable[[int], list[str]], dict[str, str]]] = {
                "python": (lambda _: [python, "-c", "pass"], env),
                "notify": (_notify(python, directory, "agent"), env),
                "notify_served": (_notify(python, directory, "served"), served_env),
                "abort_served": (_abort(python, directory), served_env),
                "help": (lambda _: [python, "-m", "scoutd", "--help"], env),
            }
            samples: dict[str, list[float]] = {name: [] for name in commands}
            for run in range(runs):
                for name, (argv, command_env) in commands.items():
                    samples[name].append(_wall(argv(run), command_env))
        for chat in ("agent", "served"):
            delivered = len(os.listdir(os.path.join(directory, f"{chat}.inbox")))
            if delivered != runs:
                raise RuntimeError(f"scoutd notify delivered {delivered} notices, not {runs}")
        aborted = sum(
            os.path.isfile(os.path.join(directory, f"job{run}.inbox", "abort"))
            for run in range(runs)
        )
        if aborted != runs:
            raise RuntimeError(f"scoutd abort aborted {aborted} chats, not {runs}")
    for name, values in samples.items():
        results[f"startup_{name}_ms"] = statistics.median(values) * 1000


def _notify(python: str, directory: str, chat: str) -> Callable[[int], list[str]]:
    """``scoutd notify`` of a chat in ``directory``, its inbox made now (a real one)."""
    os.mkdir(os.path.join(directory, f"{chat}.inbox"))
    argv = [python, "-m", "scoutd", "notify", os.path.join(directory, f"{chat}.chat"), "Wrap up."]
    return lambda _: argv


def _abort(python: str, directory: str) -> Callable[[int], list[str]]:
    """``scoutd abort`` of a new chat in ``directory`` at each run (a second abort of
    one chat would find the first waiting)."""
    return lambda run: [
        python,
        "-m",
        "scoutd",
        "abort",
        os.path.join(directory, f"job{run}.chat"),
        "Stop.",
    ]


def startup_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The start-up targets: each light verb's wall time over ``python -c pass``."""
    rows = []
    for verb in ("notify", "notify_served", "abort_served", "help"):
        ratio = results[f"startup_{verb}_ms"] / results["startup_python_ms"]
        rows.append(
            {
                "name": f"startup_{verb}_ms / startup_python_ms",
                "value": round(ratio, 3),
                "target": STARTUP_LIMIT,
                "met": ratio <= STARTUP_LIMIT,
            }
        )
    return rows


def render_startup(r: dict[str, Any], row: Callable[..., str]) -> list[str]:
    """The start-up section of the readable report."""
    base = r["startup_python_ms"]
    return [
        "start-up (wall time, median)",
        row("python -c pass", f"{base:.1f} ms"),
        row(
            "scoutd notify (a real inbox)",
            f"{r['startup_notify_ms']:.1f} ms",
            f"{r['startup_notify_ms'] / base:.2f} x python",
        ),
        row(
            "scoutd notify, a daemon serving",
            f"{r['startup_notify_served_ms']:.1f} ms",
            f"{r['startup_notify_served_ms'] / base:.2f} x python",
        ),
        row(
            "scoutd abort, a daemon serving",
            f"{r['startup_abort_served_ms']:.1f} ms",
            f"{r['startup_abort_served_ms'] / base:.2f} x python",
        ),
        row(
            "scoutd --help",
            f"{r['startup_help_ms']:.1f} ms",
            f"{r['startup_help_ms'] / base:.2f} x python",
        ),
    ]
