"""``scoutd notify`` and ``scoutd abort`` say when their file will not reach the agent.

* An agent that swaps its chat directory for a symlink to another agent's
  used to have the operator's abort written into that other inbox, with exit 0
  and the path as given printed. A symlink on the way is followed only when
  root or the operator made it, and the real path written is printed.
* An inbox the daemon's account cannot list stops its chat (it fails closed):
  the command says so and exits 1, instead of 0.
* A chat outside the roots of the daemon that serves it (found as every verb
  finds it) is refused (notify) or warned about (abort), not taken silently.
* ``scoutd inbox`` prints every name an agent chose escaped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import scoutd
from scoutd.inbox import inbox_dir
from tests.reliability.harness import NOBODY, give_away, unprivileged_prefix
from tests.support.daemon import Daemon

from .helpers import DAEMON_START_TIMEOUT, run

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as uid 65534")


def daemon_env(d: Daemon) -> dict[str, str]:
    return {"SCOUTD_CONFIG": d.config_path, "SCOUTD_SOCKET": d.socket_path}


@root_only
def test_abort_refuses_a_chat_directory_swapped_for_another_agents(home: Path) -> None:
    a1, a2 = home / "agents" / "a1", home / "agents" / "a2"
    a2.mkdir(parents=True)
    real = home / "agents" / "a1.real"
    real.mkdir()
    a1.symlink_to(a2)  # the agent (uid 65534) swapped its directory
    os.lchown(a1, NOBODY, NOBODY)
    for verb, args in (("abort", ["stop"]), ("notify", ["note"])):
        result = run(home, verb, str(a1 / "agent.chat"), *args)
        assert result.returncode == 1, result
        assert "symbolic link owned by uid 65534" in result.stderr
        assert result.stdout == ""
    assert list(a2.iterdir()) == []  # nothing written into the other agent's directory


@root_only
def test_clear_never_follows_the_agents_symlink_to_another_chat(home: Path) -> None:
    """The same redirect against ``scoutd clear``: the other agent stays aborted."""
    a1, a2 = home / "a1", home / "a2"
    a2.mkdir()
    theirs = a2 / "agent.chat"
    assert run(home, "abort", str(theirs), "stop a2").returncode == 0
    a1.symlink_to(a2)
    os.lchown(a1, NOBODY, NOBODY)
    result = run(home, "clear", str(a1 / "agent.chat"))
    assert result.returncode == 1, result
    assert "symbolic link owned by uid 65534" in result.stderr
    assert (a2 / "agent.inbox" / "abort").read_text() == "stop a2"  # still waiting


def test_abort_through_a_symlink_of_the_operator_says_where_it_went(home: Path) -> None:
    real = home / "srv" / "a1"
    real.mkdir(parents=True)
    (home / "a1").symlink_to(real)  # made by the operator: followed
    result = run(home, "abort", str(home / "a1" / "agent.chat"), "stop")
    assert result.returncode == 0, result.stderr
    written = real / "agent.inbox" / "abort"
    assert result.stdout.strip() == str(written)
    assert written.read_text() == "stop"
    assert "leads through symbolic links" in result.stderr and str(real) in result.stderr


@pytest.fixture
def nobody_daemon() -> Iterator[Daemon]:
    """A daemon running as uid 65534 (its own account), on a tree it owns."""
    d = Daemon(
        daemon={"allowed_uids": [0, NOBODY], "socket_mode": 0o666},
        argv_prefix=unprivileged_prefix(),
    )
    give_away(d.dir)
    os.chmod(d.dir, 0o755)
    try:
        d.start(timeout=DAEMON_START_TIMEOUT)
        yield d
    finally:
        d.cleanup()


@root_only
def test_notify_and_abort_say_when_the_daemon_cannot_list_the_inbox(
    home: Path, nobody_daemon: Daemon
) -> None:
    d = nobody_daemon
    chat = Path(d.dir) / "chat"
    chat.mkdir()
    os.chown(chat, NOBODY, NOBODY)
    save_file = chat / "agent.chat"
    inbox = Path(inbox_dir(str(save_file)))
    inbox.mkdir(mode=0o700)  # root's, made by hand with umask 077
    for verb, args in (("notify", ["note"]), ("abort", ["stop"])):
        result = run(home, verb, str(save_file), *args, env=daemon_env(d))
        assert result.returncode == 1, result
        assert "the daemon cannot list that inbox" in result.stderr
        assert "uid 65534" in result.stderr
        assert result.stdout.strip().startswith(str(inbox))  # written all the same
    with d.connect() as c:
        reply = c.call("prepare_prompt", {"messages": [], "save_file": str(save_file)})
    assert reply["error"]["code"] == scoutd.protocol.ABORTED  # the chat fails closed


@root_only
def test_an_inbox_made_with_umask_077_is_open_to_the_daemons_group(
    home: Path, nobody_daemon: Daemon
) -> None:
    """The inbox gets the group access of its chat directory: the daemon sees the abort."""
    d = nobody_daemon
    chat = Path(d.dir) / "chat"
    chat.mkdir()
    os.chown(chat, 0, NOBODY)  # the operator's directory, shared with the daemon's group
    chat.chmod(0o770)
    save_file = chat / "agent.chat"
    with d.connect() as c:
        session = c.call("session.open", {"save_file": str(save_file)})["result"]["session"]
        umask = 'umask 077 && exec "$0" "$@"'
        result = subprocess.run(
            ["sh", "-c", umask, *_scoutd(), "abort", str(save_file), "stop"],
            capture_output=True,
            text=True,
            env={**os.environ, **daemon_env(d)},
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        note = c.notification("session.aborted", 10.0)
        assert note["params"] == {"session": session, "save_file": str(save_file), "reason": "stop"}


def _scoutd() -> list[str]:
    import sys

    return [sys.executable, "-m", "scoutd"]


def test_notify_and_abort_check_the_roots_of_the_daemon_found(home: Path) -> None:
    """No config file named: the running daemon's own roots decide."""
    served = home / "served"
    served.mkdir()
    d = Daemon(directory=str(home), daemon={"allowed_roots": [str(served)]})
    try:
        d.start(timeout=DAEMON_START_TIMEOUT)
        env = {"SCOUTD_CONFIG": "", "SCOUTD_SOCKET": d.socket_path}
        elsewhere = home / "elsewhere" / "agent.chat"
        refused = run(home, "notify", str(elsewhere), "hi", env=env)
        assert refused.returncode == 2, refused
        assert "outside allowed_roots" in refused.stderr and str(served) in refused.stderr
        assert not elsewhere.parent.exists()  # nothing created
        warned = run(home, "abort", str(elsewhere), "stop", env=env)
        assert warned.returncode == 0, warned.stderr
        assert "will not push this abort" in warned.stderr
        inside = run(home, "notify", str(served / "agent.chat"), "hi", env=env)
        assert inside.returncode == 0 and inside.stderr == "", inside
    finally:
        d.cleanup(keep=True)  # home is the fixture's
        shutil.rmtree(served, ignore_errors=True)


def _served_only(home: Path, served: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``notify`` refuses a chat outside ``served`` (nothing created) and writes one in
    it; returns the second run."""
    elsewhere = home / "elsewhere" / "agent.chat"
    refused = run(home, "notify", str(elsewhere), "hi", env=env)
    assert refused.returncode == 2, refused
    assert "outside allowed_roots" in refused.stderr and str(served) in refused.stderr
    assert not elsewhere.parent.exists()
    inside = run(home, "notify", str(served / "agent.chat"), "hi", env=env)
    assert inside.returncode == 0, inside.stderr
    assert Path(inside.stdout.strip()).read_text() == "hi"
    return inside


def test_with_a_config_that_cannot_be_read_the_running_daemon_decides(home: Path) -> None:
    """The config named has a mistake: the daemon found without it gives the roots
    (it keeps serving with the config it loaded), and stderr says so."""
    served = home / "served"
    served.mkdir()
    typo = home / "typo.toml"
    typo.write_text(f'[daemon]\nallowed_roots = ["{home}"]\n[prompt]\nepoch_sise = 3\n')
    d = Daemon(directory=str(home), daemon={"allowed_roots": [str(served)]})
    try:
        d.start(timeout=DAEMON_START_TIMEOUT)
        env = {"SCOUTD_CONFIG": str(typo), "SCOUTD_SOCKET": d.socket_path}
        inside = _served_only(home, served, env)
        assert "epoch_sise" in inside.stderr
        assert f"checked against the allowed_roots of the daemon at {d.socket_path}" in (
            inside.stderr
        )
        elsewhere = home / "elsewhere" / "agent.chat"
        aborted = run(home, "abort", str(elsewhere), "stop", env=env)
        assert aborted.returncode == 0, aborted.stderr
        assert Path(aborted.stdout.strip()).read_text() == "stop"
        assert "will not push this abort" in aborted.stderr and "epoch_sise" in aborted.stderr
    finally:
        d.cleanup(keep=True)  # home is the fixture's
        shutil.rmtree(served, ignore_errors=True)


def test_the_daemon_running_the_config_named_decides_with_the_roots_it_serves(
    home: Path,
) -> None:
    """The daemon runs the file named, and failed to load it again after an edit (a
    typo, new roots): its roots in force decide, not the file's, and stderr says why."""
    served = home / "served"
    served.mkdir()
    d = Daemon(directory=str(home), daemon={"allowed_roots": [str(served)]})
    try:
        d.start(timeout=DAEMON_START_TIMEOUT)
        d.write_config(
            f'[daemon]\nsocket_path = "{d.socket_path}"\nallowed_roots = ["{home}"]\n'
            "[prompt]\nepoch_sise = 3\n"
        )
        deadline = time.monotonic() + DAEMON_START_TIMEOUT
        while d.status()["config"]["last_reload_error"] is None:  # the reload it refused
            assert time.monotonic() < deadline, d.log()
            time.sleep(0.05)
        env = {"SCOUTD_CONFIG": d.config_path, "SCOUTD_SOCKET": ""}
        inside = _served_only(home, served, env)
        assert f"the daemon could not load {d.config_path} again" in inside.stderr
        assert "epoch_sise" in inside.stderr
        assert f"checked against the allowed_roots of the daemon at {d.socket_path}" in (
            inside.stderr
        )
    finally:
        d.cleanup(keep=True)  # home is the fixture's
        shutil.rmtree(served, ignore_errors=True)


def test_inbox_prints_every_name_escaped(home: Path) -> None:
    save_file = home / "agent.chat"
    inbox = Path(inbox_dir(str(save_file)))
    inbox.mkdir()
    empty = run(home, "inbox", str(save_file))
    assert empty.stdout.splitlines() == [f"inbox {inbox}", "no notices pending"]
    forged = "x\x1b[2J\x1b[H\nscoutd: all clear\u202e.txt"
    (inbox / forged).write_text("hi")
    (inbox / ".hidden\x07").write_text("")
    listed = run(home, "inbox", str(save_file))
    assert listed.returncode == 0, listed.stderr
    assert "\x1b" not in listed.stdout and "\u202e" not in listed.stdout
    assert "\x07" not in listed.stdout
    lines = listed.stdout.splitlines()
    assert lines[1] == "1 notice pending, in delivery order"
    assert lines[2].startswith("  x\\x1b[2J\\x1b[H\\x0ascoutd: all clear\\u202e.txt ")
    assert lines[-1] == "  .hidden\\x07  (hidden)"
    assert not any(line.startswith("scoutd: all clear") for line in lines)
