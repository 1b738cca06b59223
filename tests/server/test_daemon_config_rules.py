"""The daemon's configuration rules in this process, exact: what a generation refuses,
what ``load_daemon_config`` reads (the environment it is given, an empty file, the
abort signal, a file others may write), when a file being written is read at start,
and a reload that drops keys the running file set (docs/OPERATIONS.md, reload).

The settling read runs on a clock of its own here (``FakeClock``): every look and
every pause is counted, and a file's age is exact, so the bound itself is tested.
"""

from __future__ import annotations

import logging
import os
import re
import signal
from pathlib import Path

import pytest

import scoutd.config_paths
from scoutd import protocol
from scoutd.config import resolve_config
from scoutd.errors import ConfigError
from scoutd.security import PeerCred
from scoutd.server import daemon_config
from scoutd.server.daemon_config import (
    Snapshot,
    check_not_partial,
    load_daemon_config,
    warn_missing_roots,
)

T = 1_700_000_000  # a file's time, in whole seconds: its age on the fake clock is exact
SETTLE = 0.125  # the quiet time the tests set: a sum with T that floats hold exactly
LOOKS = daemon_config.SETTLE_TRIES


class FakeClock:
    """``time`` as the settling read sees it: ``sleep`` moves ``now`` and is counted;
    each look at it moves it ``step`` (a read that takes time)."""

    def __init__(self, now: float, step: float = 0.0) -> None:
        self.now = now
        self.step = step
        self.sleeps: list[float] = []

    def time(self) -> float:
        seen = self.now
        self.now += self.step
        return seen

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _clock(monkeypatch: pytest.MonkeyPatch, now: float, step: float = 0.0) -> FakeClock:
    clock = FakeClock(now, step)
    monkeypatch.setattr(daemon_config, "time", clock)
    monkeypatch.setattr(daemon_config, "SETTLE_SECONDS", SETTLE)
    return clock


def _file(tmp_path: Path, text: str, changed: float = T, name: str = "scoutd.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    path.chmod(0o600)
    ns = int(changed * 1_000_000_000)
    os.utime(path, ns=(ns, ns))
    return path


GOOD = "[prompt]\ncontext_window = 7777\n"
BROKEN = "[prompt]\ncontext_window = [\n"


# -- the settling read (startup) ---------------------------------------------------


@pytest.mark.parametrize("age", [SETTLE, 60.0], ids=["exactly-quiet", "long-quiet"])
def test_a_quiet_file_is_read_at_the_first_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, age: float
) -> None:
    path = _file(tmp_path, GOOD)
    clock = _clock(monkeypatch, T + age)
    config, _, _ = load_daemon_config(str(path), {}, settle=True)
    assert config.prompt.context_window == 7777
    assert clock.sleeps == []


@pytest.mark.parametrize("age", [SETTLE, 60.0], ids=["exactly-quiet", "long-quiet"])
def test_a_broken_quiet_file_fails_at_the_first_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, age: float
) -> None:
    path = _file(tmp_path, BROKEN)
    clock = _clock(monkeypatch, T + age)
    with pytest.raises(ConfigError, match="invalid config file"):
        load_daemon_config(str(path), {}, settle=True)
    assert clock.sleeps == []


def test_a_broken_file_that_turns_quiet_while_it_is_read_fails_with_its_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fresh when its error is read, quiet at the look after: it is looked at again
    (and fails then), never taken as read."""
    path = _file(tmp_path, BROKEN)
    clock = _clock(monkeypatch, T + SETTLE / 2, step=SETTLE / 2)
    with pytest.raises(ConfigError, match="invalid config file"):
        load_daemon_config(str(path), {}, settle=True)
    assert clock.sleeps == [SETTLE]


def test_an_empty_file_is_refused_quiet_or_fresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty file is what a reader sees between ``open(O_TRUNC)`` and the write."""
    path = _file(tmp_path, "")
    for settle in (False, True):
        clock = _clock(monkeypatch, T + 60)
        with pytest.raises(ConfigError, match="is empty"):
            load_daemon_config(str(path), {}, settle=settle)
        assert clock.sleeps == []
    clock = _clock(monkeypatch, T - 3600)  # dated an hour ahead: fresh at every look
    with pytest.raises(ConfigError, match="is empty"):
        load_daemon_config(str(path), {}, settle=True)
    assert clock.sleeps == [SETTLE] * LOOKS


def test_a_fresh_file_named_by_the_environment_is_read_once_quiet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The environment the caller passes names the file, for the looks and the read."""
    path = _file(tmp_path, GOOD)
    clock = _clock(monkeypatch, T)
    config, _, _ = load_daemon_config(None, {"SCOUTD_CONFIG": str(path)}, settle=True)
    assert (config.path, config.prompt.context_window) == (str(path), 7777)
    assert clock.sleeps == [SETTLE]


def test_no_file_at_all_is_the_defaults_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _clock(monkeypatch, T)
    environs: tuple[dict[str, str] | None, ...] = ({}, None)
    for environ in environs:  # None: this process's, as ``scoutd serve`` passes it
        config, roots, signum = load_daemon_config(None, environ, settle=True)
        assert (config.path, roots, signum) == (None, ("/",), None)
    assert clock.sleeps == []


@pytest.mark.parametrize("named_by", ["argument", "environment"])
def test_a_file_fresh_at_every_look_is_read_as_it_is_and_said_so(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    named_by: str,
) -> None:
    path = _file(tmp_path, GOOD)
    clock = _clock(monkeypatch, T - 3600)
    caplog.set_level(logging.WARNING, logger="scoutd.server")
    if named_by == "argument":
        config, _, _ = load_daemon_config(str(path), {}, settle=True)
    else:
        config, _, _ = load_daemon_config(None, {"SCOUTD_CONFIG": str(path)}, settle=True)
    assert (config.path, config.prompt.context_window) == (str(path), 7777)
    assert clock.sleeps == [SETTLE] * LOOKS
    said = (
        f"config file {path} changed within {SETTLE} s at every look"
        " (or is dated in the future): read as it is now"
    )
    assert [r.getMessage() for r in caplog.records] == [said]


def test_without_settling_a_fresh_broken_file_fails_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reload does not wait (it has the running file to tell a partial one by)."""
    path = _file(tmp_path, BROKEN)
    clock = _clock(monkeypatch, T)
    with pytest.raises(ConfigError, match="invalid config file"):
        load_daemon_config(str(path))
    assert clock.sleeps == []


# -- what load_daemon_config returns and refuses ------------------------------------


@pytest.mark.parametrize("settle", [False, True])
def test_the_environment_passed_is_the_one_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settle: bool
) -> None:
    """Not the process's own: ``scoutd config check`` and the tests pass their own."""
    served = tmp_path / "agents"
    served.mkdir()
    text = f'[daemon]\nallowed_roots = ["{served}"]\nabort_signal = "usr1"\n'
    path = _file(tmp_path, text)
    _clock(monkeypatch, T + 60)
    config, roots, signum = load_daemon_config(None, {"SCOUTD_CONFIG": str(path)}, settle=settle)
    assert (config.path, roots, signum) == (str(path), (str(served),), signal.SIGUSR1)


def test_an_abort_signal_that_is_no_signal_is_named(tmp_path: Path) -> None:
    path = _file(tmp_path, '[daemon]\nabort_signal = "SIGNOPE"\n')
    said = "invalid [daemon] abort_signal: abort_signal 'SIGNOPE' is not a signal name"
    with pytest.raises(ConfigError) as refused:
        load_daemon_config(str(path), {})
    assert str(refused.value) == said


@pytest.mark.skipif(os.geteuid() != 0, reason="root owns the file; others may write it")
def test_a_file_others_may_write_is_refused_with_why(tmp_path: Path) -> None:
    path = _file(tmp_path, GOOD)
    path.chmod(0o666)
    with pytest.raises(ConfigError) as refused:
        load_daemon_config(str(path), {})
    said = (
        rf"config file {re.escape(str(path))} is not used: [^;]+; only root and the"
        r" daemon's user may be able to change it \(it names code to run\)"
    )
    assert re.fullmatch(said, str(refused.value)), str(refused.value)


def test_each_root_that_is_no_directory_is_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "here").mkdir()
    roots = f'["{tmp_path / "here"}", "{tmp_path}/gone\\nforged"]'
    path = _file(tmp_path, f"[daemon]\nallowed_roots = {roots}\n")
    config, _, _ = load_daemon_config(str(path), {})
    caplog.set_level(logging.WARNING, logger="scoutd.server")
    warn_missing_roots(config)
    said = f"[daemon] allowed_roots entry {tmp_path}/gone\\x0aforged is not an existing directory"
    assert [r.getMessage() for r in caplog.records] == [said]


# -- what a generation refuses -----------------------------------------------------


def _snapshot(tmp_path: Path, daemon: str) -> Snapshot:
    config, roots, signum = load_daemon_config(str(_file(tmp_path, daemon)), {})
    return Snapshot(config=config, generation=3, roots=roots, abort_signal=signum)


@pytest.mark.anyio
async def test_a_generation_refuses_a_peer_by_the_daemons_own_uid(tmp_path: Path) -> None:
    """Unset ``allowed_uids`` lets in the uid the daemon runs as, which is passed: not
    this process's (root here)."""
    snap = _snapshot(tmp_path, "[daemon]\n")
    peer = PeerCred(pid=77, uid=4242, gid=4343)
    assert snap.refusal(peer, 4242) is None
    said = "peer uid 4242 (gid 4343, pid 77) is not allowed"
    assert snap.refusal(peer, 4241) == said
    with pytest.raises(protocol.ProtocolError) as refused:
        snap.admit(peer, 4241, "/anywhere/x.chat", rid=5)
    error = refused.value
    assert (error.code, error.message, error.id) == (protocol.FORBIDDEN, f"forbidden: {said}", 5)
    assert error.data == protocol.ForbiddenData(reason=said)


@pytest.mark.anyio
@pytest.mark.parametrize("count", [0, 1, 2])
async def test_a_generation_names_its_roots_when_a_save_file_is_outside(
    tmp_path: Path, count: int
) -> None:
    served = [tmp_path / f"root{i}" for i in range(count)]
    for root in served:
        root.mkdir()
    listed = ", ".join(f'"{root}"' for root in served or [tmp_path / "unused"])
    snap = _snapshot(tmp_path, f"[daemon]\nallowed_roots = [{listed}]\n")
    if not served:  # no root that resolves: none is served
        snap = Snapshot(config=snap.config, generation=3, roots=(), abort_signal=None)
    peer = PeerCred(pid=77, uid=4242, gid=4343)
    outside = str(tmp_path / "elsewhere" / "x.chat")
    named = ", ".join(str(root) for root in served) or "none"
    said = f"save file {outside!r} is outside allowed_roots ({named})"
    assert snap.refusal(peer, 4242, outside) == said
    with pytest.raises(protocol.ProtocolError) as refused:
        snap.admit(peer, 4242, outside, rid="r")
    assert (refused.value.message, refused.value.id) == (f"forbidden: {said}", "r")
    assert refused.value.data == protocol.ForbiddenData(reason=said)
    for root in served:
        inside = str(root / "agent" / "x.chat")
        assert snap.refusal(peer, 4242, inside) is None
        snap.admit(peer, 4242, inside)  # no error


# -- a reload that drops keys the running file set ----------------------------------


RUNNING = (
    '[daemon]\nmax_connections = 9\nidle_timeout = 30.0\nabort_signal = "TERM"\n'
    "[prompt]\ncontext_window = 9000\ninbox_max_bytes = 4096\n"
)


@pytest.mark.parametrize(
    ("new", "said"),
    [
        (
            '[daemon]\nmax_connections = 9\nabort_signal = "TERM"\n'
            "[prompt]\ninbox_max_bytes = 4096\n",
            "[daemon] idle_timeout is no longer set",
        ),
        (
            "[prompt]\ncontext_window = 9000\n",
            "[daemon] max_connections, idle_timeout, abort_signal; [prompt] inbox_max_bytes"
            " are no longer set",
        ),
        (
            "[daemon]\nidle_timeout = 30.0\n[prompt]\ninbox_max_bytes = 4096\n",
            "[daemon] max_connections, abort_signal are no longer set",
        ),
    ],
)
def test_a_reload_that_drops_kept_keys_names_each_by_table(
    tmp_path: Path, new: str, said: str
) -> None:
    running = resolve_config(str(_file(tmp_path, RUNNING, name="old.toml")), environ={})
    partial = resolve_config(str(_file(tmp_path, new, name="new.toml")), environ={})
    with pytest.raises(ConfigError) as refused:
        check_not_partial(running, partial)
    rest = (
        f" in {tmp_path}/new.toml: the file looks partly written; keeping the running"
        " configuration (restart to remove a key, or set it to its default)"
    )
    assert str(refused.value) == said + rest


def test_a_reload_that_finds_the_default_file_gone_keeps_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, it said the keys were "no longer set in " an empty name."""
    default = _file(tmp_path, RUNNING)
    monkeypatch.setattr(scoutd.config_paths, "DEFAULT_CONFIG_PATH", str(default))
    running = resolve_config(None, environ={})
    default.unlink()
    with pytest.raises(ConfigError) as refused:
        check_not_partial(running, resolve_config(None, environ={}))
    assert str(refused.value) == (
        f"no config file is found any more (the running one is {default}): keeping the"
        " running configuration (restart to run without a file)"
    )
    check_not_partial(resolve_config(None, environ={}), resolve_config(None, environ={}))
