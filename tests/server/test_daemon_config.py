"""The config file the daemon runs with, as a hostile neighbour or a hurried operator
leaves it (docs/RELIABILITY.md, "What a client may configure").

The file names code (``[plugins]``, ``tokenizer``) and who may connect: a file
that anyone but root and the daemon's user could change is refused, at start,
at every reload and by ``scoutd config check``; a FIFO, a directory, a device or
a huge file is refused at once, never waited on nor read whole. A reload refused
keeps the running generation and the daemon serving.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from scoutd.config_paths import MAX_CONFIG_BYTES, read_config_bytes
from scoutd.config_rules import untrusted_writer
from scoutd.errors import ConfigError
from scoutd.server import load_daemon_config

from ..reliability.harness import NOBODY, unprivileged_prefix
from ..support.daemon import Daemon, wait_for

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another uid")

# What uid 65534 would need to run code as the daemon: its own uid let in and a
# tokenizer that runs a shell (called with every message text).
HOSTILE = """
import sys
path = sys.argv[1]
text = open(path).read().replace("[daemon]", "[daemon]\\nallowed_uids = [0, {uid}]", 1)
open(path, "w").write(text + '\\n[prompt]\\ntokenizer = "os:system"\\n')
"""

# The shell command hidden in every message: a witness file, made only if it runs.
CLIENT = """
import json, socket, sys
sock, witness = sys.argv[1], sys.argv[2]
cmd = "id > " + witness
messages = [{"role": "system", "content": cmd}, {"role": "user", "content": cmd}]
for i in range(30):
    call = {"id": f"c{i}", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
    messages.append({"role": "assistant", "content": cmd, "tool_calls": [call]})
    messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": cmd + "x" * 3000})
params = {"messages": messages, "config": {"context_window": 1000}}
s = socket.socket(socket.AF_UNIX)
s.settimeout(20)
s.connect(sock)
request = {"jsonrpc": "2.0", "id": 1, "method": "prepare_prompt", "params": params}
s.sendall(json.dumps(request).encode() + b"\\n")
print(s.makefile().readline()[:300])
"""


def _reload(d: Daemon) -> dict[str, object]:
    with d.connect() as c:
        return c.call("config.reload", timeout=10)


@ROOT_ONLY
@pytest.mark.parametrize("writable", ["file", "directory"])
def test_a_config_others_may_write_never_names_code_for_the_daemon(writable: str) -> None:
    """uid 65534 rewrites a world-writable config (or one in a world-writable
    directory) to let itself in and name ``os:system`` as the tokenizer: before the
    fix the root daemon reloaded it and ran the client's text as root."""
    with Daemon() as d:
        witness = os.path.join(d.dir, "witness")
        os.chmod(d.dir, 0o777 if writable == "directory" else 0o755)
        os.chmod(d.config_path, 0o666 if writable == "file" else 0o644)
        os.chmod(d.socket_path, 0o666)  # as if 65534 were in the socket's group
        if writable == "directory":  # what a writable directory allows: a new file
            os.rename(d.config_path, d.config_path + ".old")
            Path(d.config_path).write_text(Path(d.config_path + ".old").read_text())
            os.chown(d.config_path, NOBODY, NOBODY)
        hostile = [*unprivileged_prefix(), sys.executable, "-c", HOSTILE.format(uid=NOBODY)]
        subprocess.run([*hostile, d.config_path], check=True, timeout=20)
        refused = _reload(d)
        assert refused["error"]["code"] == -32005, refused
        assert "not used" in refused["error"]["message"]
        assert d.status()["config"]["generation"] == 1
        run = subprocess.run(
            [*unprivileged_prefix(), sys.executable, "-c", CLIENT, d.socket_path, witness],
            capture_output=True,
            text=True,
            timeout=30,
            cwd="/",
        )
        time.sleep(0.3)
        assert not os.path.exists(witness), Path(witness).read_text()
        assert "result" not in run.stdout  # not let in at all (socket ok, uid refused)
        assert d.alive()


def test_the_daemon_refuses_at_start_a_config_others_may_write(tmp_path: Path) -> None:
    config = tmp_path / "scoutd.toml"
    config.write_text(f'[daemon]\nallowed_roots = ["{tmp_path}"]\n')
    os.chmod(config, 0o646)
    with pytest.raises(ConfigError, match="writable by every user") as caught:
        load_daemon_config(str(config), environ={})
    assert "not used" in str(caught.value)
    os.chmod(config, 0o644)
    os.chmod(tmp_path, 0o1777)  # sticky: others may not replace root's entry
    assert load_daemon_config(str(config), environ={})[0].path == str(config)
    os.chmod(tmp_path, 0o777)
    with pytest.raises(ConfigError, match=f"{tmp_path} is writable by every user"):
        load_daemon_config(str(config), environ={})


@ROOT_ONLY
def test_a_config_reached_through_a_link_others_own_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real.toml"
    real.write_text(f'[daemon]\nallowed_roots = ["{tmp_path}"]\n')
    link = tmp_path / "scoutd.toml"
    link.symlink_to(real)
    assert untrusted_writer(str(link)) is None
    os.lchown(link, NOBODY, NOBODY)
    assert untrusted_writer(str(link)) == f"{link} is owned by uid {NOBODY}"
    os.chown(tmp_path, NOBODY, NOBODY)
    assert untrusted_writer(str(real)) == f"{tmp_path} is owned by uid {NOBODY}"


def test_a_group_writable_config_is_trusted_for_roots_group_only(tmp_path: Path) -> None:
    config = tmp_path / "scoutd.toml"
    config.write_text("[daemon]\n")
    os.chmod(config, 0o664)
    os.chown(config, os.geteuid(), 0)
    assert untrusted_writer(str(config)) is None
    if os.geteuid() == 0:
        os.chown(config, 0, NOBODY)
        assert untrusted_writer(str(config)) == f"{config} is writable by group {NOBODY}"


@pytest.mark.parametrize("kind", ["fifo", "directory", "device", "huge", "huge sparse"])
def test_a_config_that_is_no_small_regular_file_is_refused_at_once(
    tmp_path: Path, kind: str
) -> None:
    """Before the fix a FIFO blocked the reader for ever (the daemon's reload, its
    start, ``config check``) and a 1 GB sparse file was read whole (2 GB of RSS)."""
    path = str(tmp_path / "scoutd.toml")
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        os.mkdir(path)
    elif kind == "device":
        path = "/dev/zero"
    else:
        with open(path, "wb") as handle:
            handle.write(b"[daemon]\n" + b"#" * MAX_CONFIG_BYTES)
            if kind == "huge sparse":
                handle.truncate(1 << 30)
    started = time.monotonic()
    refused = r"cannot read config file .*: (it is .*, not a regular file|over 1048576 bytes)"
    with pytest.raises(ConfigError, match=refused):
        read_config_bytes(path)
    assert time.monotonic() - started < 1.0


def test_reload_of_a_fifo_or_a_huge_file_keeps_serving(tmp_path: Path) -> None:
    """A reload that met a FIFO used to hold the reload lock for ever: every later
    reload (SIGHUP, ``config.reload``) hung with it."""
    with Daemon() as d:
        good = Path(d.config_path).read_text()
        for make in (os.mkfifo, lambda p: Path(p).write_bytes(b"#" * (MAX_CONFIG_BYTES + 1))):
            os.replace(d.config_path, d.config_path + ".good")
            make(d.config_path)
            answer = _reload(d)
            assert answer["error"]["code"] == -32005, answer
            assert d.status()["config"]["generation"] == 1
            os.remove(d.config_path)
            os.replace(d.config_path + ".good", d.config_path)
        d.write_config(good + "\n# changed\n")
        assert wait_for(lambda: d.status()["config"]["generation"] >= 2, 10, "a good reload")


def test_config_check_escapes_names_it_prints(tmp_path: Path) -> None:
    """A key or a file name holding a newline or an escape sequence forged lines
    (in the daemon's log, on the operator's terminal); now they are escaped."""
    bad = tmp_path / "a\nERROR forged.toml"
    bad.write_text('[prompt]\n"x\\nERROR scoutd.server: forged\\u001b[2J" = 1\n')
    run = _config_check(bad)
    assert run.returncode == 2, run.stderr
    assert run.stderr.count("\n") == 1 and "\x1b" not in run.stderr, run.stderr
    assert "x\\x0aERROR scoutd.server: forged\\x1b[2J" in run.stderr
    assert "a\\x0aERROR forged.toml" in run.stderr
    good = tmp_path / "ok\x1b[2J.toml"
    good.write_text(f"[daemon]\nallowed_roots = [{json.dumps(str(tmp_path))}]\n")
    run = _config_check(good)
    assert run.returncode == 0, run.stderr
    assert "\x1b" not in run.stdout and "ok\\x1b[2J.toml" in run.stdout


def _config_check(path: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "scoutd", "config", "check", str(path)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    "first_part",
    [
        "[prompt]\ncontext_window = 9000\n",  # valid alone: allowed_roots would be "/"
        '[prompt]\ncontext_window = 9000\n[daemon]\nallowed_roots = ["',  # cut mid-value
    ],
    ids=["valid-alone", "cut-mid-value"],
)
def test_a_config_caught_between_two_writes_at_start_is_read_once_whole(
    tmp_path: Path, first_part: str
) -> None:
    """Before: a daemon that started between ``cat a > f`` and ``cat b >> f`` ran with
    the first part alone (``allowed_roots = ["/"]``), or failed on a cut value. The file
    is read once it has been quiet; the first part is dated a second ahead, so that it
    stays fresh however late the second write comes (within that second)."""
    import threading

    config = tmp_path / "scoutd.toml"
    served = tmp_path / "agents"
    served.mkdir()
    config.write_text(first_part, encoding="utf-8")
    config.chmod(0o600)
    ahead = time.time() + 1.0
    os.utime(config, (ahead, ahead))
    found: list[object] = []
    reader = threading.Thread(
        target=lambda: found.append(load_daemon_config(str(config), {}, settle=True)[0])
    )
    reader.start()
    time.sleep(0.05)  # the reader has read the first part (or will read the whole)
    whole = f'[prompt]\ncontext_window = 9000\n[daemon]\nallowed_roots = ["{served}"]\n'
    config.write_text(whole, encoding="utf-8")
    reader.join(10)
    assert not reader.is_alive()
    (loaded,) = found
    assert loaded.daemon.allowed_roots == (str(served),)  # type: ignore[attr-defined]
    assert loaded.prompt.context_window == 9000  # type: ignore[attr-defined]


def test_a_config_that_fails_long_after_its_last_write_fails_at_once(tmp_path: Path) -> None:
    """A broken file that nobody is writing is not waited for: its error stands."""
    config = tmp_path / "scoutd.toml"
    config.write_text("[daemon]\nallowed_roots = [\n", encoding="utf-8")
    config.chmod(0o600)
    past = time.time() - 60
    os.utime(config, (past, past))
    with pytest.raises(ConfigError, match="invalid config file"):
        load_daemon_config(str(config), {}, settle=True)


def test_scoutd_serve_reads_a_config_being_written_once_it_is_quiet(tmp_path: Path) -> None:
    """The daemon's own start (``scoutd serve``), not only the function: it serves the
    roots of the whole file, written after it started reading."""
    import shutil

    from scoutd.testing import LineClient

    short = tempfile.mkdtemp(prefix="sdq")  # a socket path short enough for AF_UNIX
    try:
        served = tmp_path / "agents"
        served.mkdir()
        sock = os.path.join(short, "s.sock")
        config = tmp_path / "scoutd.toml"
        config.write_text(f'[daemon]\nsocket_path = "{sock}"\n', encoding="utf-8")  # part one
        config.chmod(0o600)
        ahead = time.time() + 1.5  # fresh for its first 1.5 s, however slow the start
        os.utime(config, (ahead, ahead))
        with subprocess.Popen(
            [sys.executable, "-m", "scoutd", "serve", "--config", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        ) as daemon:
            try:
                # its start reads the first part within this (or the whole file later):
                # either way it must serve the whole file's roots
                time.sleep(0.3)
                whole = f'[daemon]\nsocket_path = "{sock}"\nallowed_roots = ["{served}"]\n'
                config.write_text(whole, encoding="utf-8")
                wait_for(lambda: os.path.exists(sock) or daemon.poll() is not None, 15, "a socket")
                assert daemon.poll() is None, daemon.stderr.read() if daemon.stderr else ""
                with LineClient(sock, 5.0) as client:
                    status = client.call("status")["result"]
                assert status["daemon"]["allowed_roots"] == [str(served)]
            finally:
                daemon.terminate()
                daemon.wait(10)
    finally:
        shutil.rmtree(short, ignore_errors=True)
