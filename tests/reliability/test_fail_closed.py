"""An operator can always stop an agent: aborts fail closed, watching scales, reloads follow.

The real daemon as a subprocess, real directories, watchdog's real inotify
reader. ``rescan_interval`` is set far beyond every wait here, so an abort that
arrives proves the event path, not the periodic rescan (docs/RELIABILITY.md).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from typing import Any

import pytest

from scoutd.strategies.inbox import inbox_dir, inbox_removed_dir, write_abort
from tests.reliability.harness import FaultDaemon
from tests.support.daemon import Daemon, LineClient, toml_text, wait_for

SLOW_RESCAN = 60.0  # never reached by a test: pushes come from file events
PUSH = 10.0


def open_session(c: LineClient, save_file: str) -> str:
    reply = c.call("session.open", {"save_file": save_file})
    assert "result" in reply, reply
    return str(reply["result"]["session"])


def hidden_aborts(save_file: str) -> list[str]:
    return sorted(n for n in os.listdir(inbox_dir(save_file)) if n.startswith(".abort-"))


def sabotage(save_file: str, how: str) -> None:
    """What an agent writing in its own chat directory can do to the removed directory."""
    removed = inbox_removed_dir(save_file)
    if how == "regular-file":
        with open(removed, "w") as handle:
            handle.write("not a directory")
    else:
        os.symlink(os.path.join(os.path.dirname(removed), "nowhere"), removed)


@pytest.mark.parametrize("how", ["regular-file", "dangling-symlink"])
def test_an_abort_that_cannot_be_moved_still_aborts(how: str) -> None:
    with Daemon(daemon={"rescan_interval": SLOW_RESCAN}) as d, d.connect() as c:
        save_file = os.path.join(d.dir, "agent.chat")
        os.makedirs(inbox_dir(save_file))
        sabotage(save_file, how)
        session = open_session(c, save_file)
        write_abort(save_file, "stop now")
        note = c.notification("session.aborted", PUSH)
        assert note["params"] == {"session": session, "save_file": save_file, "reason": "stop now"}
        reply = c.call("prepare_prompt", {"messages": [], "session": session})
        assert reply["error"]["code"] == -32001
        assert reply["error"]["data"]["reason"] == "stop now"
        assert len(hidden_aborts(save_file)) == 1  # the record, written elsewhere
        assert not os.path.lexists(os.path.join(inbox_dir(save_file), "abort"))
        # a session-less call on the same chat: the watcher's claim fails it once
        again = c.call("prepare_prompt", {"messages": [], "save_file": save_file})
        assert again["error"]["code"] == -32001
        log = d.log()
    assert "ERROR scoutd.inbox: abort file" in log and "recorded as" in log


SIGNAL_TARGET = "import time\ntime.sleep(60)\n"


def test_an_abort_that_cannot_be_moved_is_signalled() -> None:
    import subprocess
    import sys

    daemon = {"rescan_interval": SLOW_RESCAN, "abort_signal": "TERM"}
    agent = subprocess.Popen([sys.executable, "-c", SIGNAL_TARGET])
    try:
        with Daemon(daemon=daemon) as d, d.connect() as c:
            save_file = os.path.join(d.dir, "signalled.chat")
            os.makedirs(inbox_dir(save_file))
            sabotage(save_file, "regular-file")
            reply = c.call("session.open", {"save_file": save_file, "pid": agent.pid})
            assert "result" in reply, reply
            write_abort(save_file, "signal me")
            c.notification("session.aborted", PUSH)
            assert agent.wait(timeout=PUSH) != 0  # ended by SIGTERM
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait(timeout=PUSH)


def test_an_abort_in_a_chat_directory_created_after_open_arrives_by_event() -> None:
    with Daemon(daemon={"rescan_interval": SLOW_RESCAN}) as d, d.connect() as c:
        save_file = os.path.join(d.dir, "later", "deeper", "agent.chat")
        session = open_session(c, save_file)  # neither directory exists yet
        write_abort(save_file, "found you")  # creates both, then the abort
        note = c.notification("session.aborted", PUSH)
        assert note["params"]["session"] == session
        assert note["params"]["reason"] == "found you"


def daemon_threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise AssertionError("no Threads line")


def inotify_instances(pid: int) -> int:
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:inotify":
                count += 1
        except OSError:
            continue
    return count


def test_many_sessions_in_many_directories_keep_threads_and_instances_bounded() -> None:
    sessions = 300
    daemon = {"rescan_interval": SLOW_RESCAN, "max_sessions_per_uid": sessions}
    with Daemon(daemon=daemon) as d, d.connect() as c:
        save_files = [os.path.join(d.dir, f"c{n:03d}", "agent.chat") for n in range(sessions)]
        for n, save_file in enumerate(save_files):
            if n % 2:
                os.makedirs(inbox_dir(save_file))  # half exist, half appear later
            open_session(c, save_file)
        assert daemon_threads(d.pid) <= 64
        assert inotify_instances(d.pid) <= 8
        for save_file in (save_files[0], save_files[1], save_files[-1]):
            write_abort(save_file, "bounded")
            assert c.notification("session.aborted", PUSH)["params"]["save_file"] == save_file
        # the cap: one more session for this uid is refused, the daemon goes on
        extra = c.call("session.open", {"save_file": os.path.join(d.dir, "extra.chat")})
        assert extra["error"]["code"] == -32004
        assert extra["error"]["data"]["limit"] == sessions
        assert "result" in c.call("status")


NO_INOTIFY = """
import errno
import scoutd.watcher


class Refused:
    def __init__(self, *args, **kwargs):
        raise OSError(errno.EMFILE, "inotify instance limit reached")


scoutd.watcher.Reader = Refused
"""

NO_THREADS = """
import threading
import scoutd.watcher

_start = scoutd.watcher.Reader.start


def start(self):
    raise RuntimeError("can't start new thread")


scoutd.watcher.Reader.start = start
"""


@pytest.mark.parametrize("faults", [NO_INOTIFY, NO_THREADS], ids=["no-inotify", "no-threads"])
def test_watching_that_cannot_start_falls_back_to_the_rescan(faults: str) -> None:
    with FaultDaemon(faults, daemon={"rescan_interval": 0.5}) as d, d.connect() as c:
        save_file = os.path.join(d.dir, "fallback.chat")
        os.makedirs(inbox_dir(save_file))
        session = open_session(c, save_file)
        write_abort(save_file, "rescanned")
        note = c.notification("session.aborted", PUSH)
        assert note["params"]["session"] == session
        log = d.log()
    assert "native file watching unavailable" in log


def config_status(c: LineClient) -> dict[str, Any]:
    return dict(c.call("status")["result"]["config"])


def test_reload_survives_a_deleted_and_recreated_config_directory() -> None:
    d = Daemon()
    conf = os.path.join(d.dir, "conf")
    os.makedirs(conf)
    d.config_path = os.path.join(conf, "scoutd.toml")
    d.write_config()
    with d, d.connect() as c:
        assert config_status(c)["generation"] == 1
        shutil.rmtree(conf)
        wait_for(lambda: config_status(c)["last_reload_error"], PUSH, "a failed reload")
        os.makedirs(conf)
        d.prompt["epoch_size"] = 7
        d.write_config()
        wait_for(lambda: config_status(c)["generation"] >= 2, PUSH, "the reload")
        assert config_status(c)["last_reload_error"] is None
        d.prompt["epoch_size"] = 9
        d.write_config()
        wait_for(lambda: config_status(c)["generation"] >= 3, PUSH, "a later reload")


def test_reload_notices_a_configmap_style_symlink_swap() -> None:
    """``scoutd.toml -> ..data/scoutd.toml``, ``..data -> ..v1``, then ``..data -> ..v2``."""
    d = Daemon()
    conf = os.path.join(d.dir, "conf")
    for version in ("..v1", "..v2"):
        os.makedirs(os.path.join(conf, version))
    text = toml_text({"daemon": d.daemon})
    with open(os.path.join(conf, "..v1", "scoutd.toml"), "w") as handle:
        handle.write(text)
    with open(os.path.join(conf, "..v2", "scoutd.toml"), "w") as handle:
        handle.write(text + "\n[prompt]\nepoch_size = 5\n")
    os.symlink("..v1", os.path.join(conf, "..data"))
    os.symlink(os.path.join("..data", "scoutd.toml"), os.path.join(conf, "scoutd.toml"))
    d.config_path = os.path.join(conf, "scoutd.toml")
    with d, d.connect() as c:
        assert config_status(c)["generation"] == 1
        os.symlink("..v2", os.path.join(conf, "..data_tmp"))
        os.rename(os.path.join(conf, "..data_tmp"), os.path.join(conf, "..data"))
        wait_for(lambda: config_status(c)["generation"] >= 2, PUSH, "the swap's reload")
        shutil.rmtree(os.path.join(conf, "..v1"))
        # the new target directory is watched now: an edit there reloads too
        with open(os.path.join(conf, "..v2", "scoutd.toml"), "a") as handle:
            handle.write("inbox_max_bytes = 4096\n")
        wait_for(lambda: config_status(c)["generation"] >= 3, PUSH, "the edit's reload")


SLOW_SETTLE = """
import scoutd.strategies.inbox_files
scoutd.strategies.inbox_files.SETTLE_TIME = 1.0  # far beyond the writer's pause below
"""


def test_an_abort_written_in_place_is_read_once_complete() -> None:
    with FaultDaemon(SLOW_SETTLE, daemon={"rescan_interval": SLOW_RESCAN}) as d, d.connect() as c:
        save_file = os.path.join(d.dir, "slow.chat")
        os.makedirs(inbox_dir(save_file))
        open_session(c, save_file)
        path = os.path.join(inbox_dir(save_file), "abort")
        handle = open(path, "w")  # noqa: SIM115 - a writer pausing mid-file
        try:
            handle.write("budget ")
            handle.flush()
            time.sleep(0.1)
            handle.write("exhausted")
        finally:
            handle.close()
        note = c.notification("session.aborted", PUSH)
        assert note["params"]["reason"] == "budget exhausted"


def test_an_abort_closed_by_its_writer_needs_no_settle_wait() -> None:
    """Close-write is seen by the watcher: even a huge settle time is not waited for."""
    faults = SLOW_SETTLE.replace("1.0", "30.0")
    with FaultDaemon(faults, daemon={"rescan_interval": SLOW_RESCAN}) as d, d.connect() as c:
        save_file = os.path.join(d.dir, "closed.chat")
        os.makedirs(inbox_dir(save_file))
        open_session(c, save_file)
        done = threading.Event()

        def writer() -> None:
            with open(os.path.join(inbox_dir(save_file), "abort"), "w") as handle:
                handle.write("closed at once")
            done.set()

        threading.Thread(target=writer).start()
        assert done.wait(PUSH)
        note = c.notification("session.aborted", PUSH)  # far less than 30 s
        assert note["params"]["reason"] == "closed at once"
