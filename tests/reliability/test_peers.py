"""Peer credentials: a client running as another uid is refused unless allowed.

The client runs as uid/gid 65534 (``setpriv``), which needs root; without root
these tests are skipped with that reason (visible in the summary).
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from scoutd import protocol
from scoutd.strategies.inbox import inbox_dir, write_abort, write_notice
from tests.reliability.harness import NOBODY, ROOT, unprivileged_prefix
from tests.support.daemon import Daemon, wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="switching to uid 65534 needs root")

# Runs as uid 65534: one JSON-RPC exchange per argument after the socket path, through
# scoutd.Client when the method is "client.status", raw otherwise.
CLIENT = r"""
import json, socket, sys
from scoutd.client import Client
from scoutd.errors import RemoteError
path, out = sys.argv[1], []
for raw in sys.argv[2:]:
    request = json.loads(raw)
    if request["method"] == "client.status":
        try:
            out.append({"result": Client(path, timeout=10).status()})
        except RemoteError as exc:
            out.append({"error": {"code": exc.code, "message": str(exc)}})
        continue
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(path)
    try:
        s.sendall(json.dumps(request).encode() + b"\n")
    except BrokenPipeError:  # refused and closed before we wrote: the refusal is readable
        pass
    data = b""
    while not data.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    out.append(json.loads(data) if data.strip() else None)
    s.close()
print(json.dumps(out))
"""


def as_nobody(
    socket_path: str, *requests: dict[str, Any], prefix: list[str] | None = None
) -> list[Any]:
    """Run CLIENT as uid 65534 (or under ``prefix``, a ``setpriv`` command)."""
    run = subprocess.run(
        [*(unprivileged_prefix() if prefix is None else prefix), sys.executable, "-c", CLIENT]
        + [socket_path]
        + [json.dumps({"jsonrpc": "2.0", "id": 1, **r}) for r in requests],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
        env={**os.environ, "PYTHONPATH": ROOT},
        check=False,
    )
    assert run.returncode == 0, run.stderr
    result: list[Any] = json.loads(run.stdout)
    return result


def open_daemon(**settings: Any) -> Daemon:
    d = Daemon(daemon={"socket_mode": 0o666, **settings})
    os.chmod(d.dir, 0o755)
    return d


@pytest.fixture
def default_daemon() -> Iterator[Daemon]:
    with open_daemon() as d:
        yield d


def test_another_uid_is_refused_by_default(default_daemon: Daemon) -> None:
    d = default_daemon
    raw, library = as_nobody(d.socket_path, {"method": "status"}, {"method": "client.status"})
    assert raw["id"] is None and raw["error"]["code"] == protocol.FORBIDDEN
    assert f"uid {NOBODY}" in raw["error"]["data"]["reason"]
    assert library["error"]["code"] == protocol.FORBIDDEN
    with d.connect() as c:  # the daemon goes on for everyone else
        assert c.call("status")["result"]["counts"]["errors"] >= 2
    assert f"refused connection: peer uid {NOBODY}" in d.log()


def test_a_listed_gid_is_let_in() -> None:
    with open_daemon(allowed_gids=[NOBODY]) as d:
        [raw] = as_nobody(d.socket_path, {"method": "status"})
        assert "result" in raw


def test_another_uid_cannot_use_or_close_a_session_it_did_not_open() -> None:
    with open_daemon(allowed_uids=[0, NOBODY]) as d, d.connect() as c:
        root = os.path.join(d.dir, "chats")
        os.makedirs(root)
        session = c.call("session.open", {"save_file": os.path.join(root, "r.chat")})["result"]
        close, prepare = as_nobody(
            d.socket_path,
            {"method": "session.close", "params": {"session": session["session"]}},
            {"method": "prepare_prompt", "params": {"messages": [], "session": session["session"]}},
        )
        assert close["error"]["code"] == protocol.UNKNOWN_SESSION
        assert prepare["error"]["code"] == protocol.UNKNOWN_SESSION
        assert c.call("status")["result"]["counts"]["sessions"] == 1


def test_an_abort_never_signals_a_process_of_another_uid() -> None:
    """uid 65534 registers the pid of a root process: the abort must not kill it."""
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with open_daemon(allowed_uids=[0, NOBODY], abort_signal="KILL") as d:
            save_file = os.path.join(d.dir, "victim.chat")
            os.chmod(d.dir, 0o777)
            # a session of uid 65534 on a connection that stays open, naming root's process
            keeper = subprocess.Popen(
                [
                    *unprivileged_prefix(),
                    sys.executable,
                    "-c",
                    KEEPER,
                    d.socket_path,
                    save_file,
                    str(victim.pid),
                ],
                stdout=subprocess.PIPE,
                text=True,
                cwd="/",
                env={**os.environ, "PYTHONPATH": ROOT},
            )
            try:
                assert keeper.stdout is not None
                assert keeper.stdout.readline().strip() == "open"
                # an inbox uid 65534 may use: the daemon takes an abort only for a
                # session whose uid could take it itself
                os.makedirs(inbox_dir(save_file))
                os.chown(inbox_dir(save_file), NOBODY, NOBODY)
                write_abort(save_file, "try to kill root's process")
                assert keeper.stdout.readline().strip() == "aborted"
                # the daemon logs its refusal once it has decided: only then is a
                # still-living victim proof of anything
                wait_for(lambda: "not signalling pid" in d.log(), 10, "the refusal")
                assert victim.poll() is None  # still alive
            finally:
                keeper.kill()
                keeper.wait(10)
                if keeper.stdout is not None:
                    keeper.stdout.close()
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)


KEEPER = r"""
import json, socket, sys
path, save_file, pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(20)
s.connect(path)
request = {"jsonrpc": "2.0", "id": 1, "method": "session.open",
           "params": {"save_file": save_file, "pid": pid}}
s.sendall(json.dumps(request).encode() + b"\n")
reader = s.makefile("rb")
assert "result" in json.loads(reader.readline())
print("open", flush=True)
while True:
    message = json.loads(reader.readline())
    if message.get("method") == "session.aborted":
        print("aborted", flush=True)
        break
"""


HELLO = [{"role": "user", "content": "hello"}]


def test_a_caller_reaches_only_what_it_could_reach_itself() -> None:
    """The daemon acts for another uid only where that uid could act itself."""
    with open_daemon(allowed_uids=[0, NOBODY]) as d:
        private = os.path.join(d.dir, "private")
        shared = os.path.join(d.dir, "shared")
        os.mkdir(private, 0o700)
        os.mkdir(shared, 0o700)
        secret = os.path.join(private, "root.chat")
        write_notice(secret, "for root only", name="note.txt")
        write_abort(secret, "root's abort")
        refused = as_nobody(
            d.socket_path,
            {"method": "prepare_prompt", "params": {"messages": HELLO, "save_file": secret}},
            {"method": "session.open", "params": {"save_file": secret}},
        )
        for answer in refused:
            assert answer["error"]["code"] == protocol.FORBIDDEN, answer
            assert f"uid {NOBODY} may not access" in answer["error"]["data"]["reason"]
        assert sorted(os.listdir(inbox_dir(secret))) == ["abort", "note.txt"]  # untouched
        mine = os.path.join(shared, "mine.chat")
        write_notice(mine, "for nobody", name="note.txt")
        for path in (shared, inbox_dir(mine), os.path.join(inbox_dir(mine), "note.txt")):
            os.chown(path, NOBODY, NOBODY)
        (answer,) = as_nobody(
            d.socket_path,
            {"method": "prepare_prompt", "params": {"messages": HELLO, "save_file": mine}},
        )
        assert answer["result"]["messages"][-1]["content"] == "for nobody"
        # The daemon's own uid is not restricted by this check.
        with d.connect() as c:
            error = c.call("prepare_prompt", {"messages": HELLO, "save_file": secret})["error"]
            assert error["code"] == protocol.ABORTED


def _member_of_a_group_not_its_own() -> tuple[int, int, int] | None:
    """(uid, primary gid, gid) of a user the group database lists in another group."""
    for group in grp.getgrall():
        for name in group.gr_mem:
            try:
                user = pwd.getpwnam(name)
            except KeyError:
                continue
            if user.pw_uid not in (0, NOBODY) and user.pw_gid != group.gr_gid:
                return user.pw_uid, user.pw_gid, group.gr_gid
    return None


def _group_chat(d: Daemon, gid: int) -> str:
    """A chat in a directory of group ``gid`` (mode 0770) with a notice for that group."""
    directory = os.path.join(d.dir, "group")
    os.mkdir(directory)
    chat = os.path.join(directory, "g.chat")
    write_notice(chat, "for the group only", name="note.txt")
    for path in (directory, inbox_dir(chat), os.path.join(inbox_dir(chat), "note.txt")):
        os.chown(path, 0, gid)
        os.chmod(path, 0o660 if path.endswith(".txt") else 0o770)
    return chat


def test_a_group_the_client_dropped_is_not_used_for_it() -> None:
    """The peer's groups are its process's (SO_PEERGROUPS), not the user database's.

    A user listed in a group but running without it (``--clear-groups``, a
    sandbox) could not list that group's directory itself: the daemon got the
    group from the database and delivered the group's notice to it.
    """
    member = _member_of_a_group_not_its_own()
    if member is None:
        pytest.skip("no user of the group database is listed in a group other than its own")
    uid, primary, gid = member
    with open_daemon(allowed_uids=[0, uid]) as d:
        chat = _group_chat(d, gid)
        prefix = ["setpriv", f"--reuid={uid}", f"--regid={primary}", "--clear-groups"]
        (answer,) = as_nobody(
            d.socket_path,
            {"method": "prepare_prompt", "params": {"messages": HELLO, "save_file": chat}},
            prefix=prefix,
        )
        assert answer.get("error", {}).get("code") == protocol.FORBIDDEN, answer
        assert os.listdir(inbox_dir(chat)) == ["note.txt"]  # untouched
        (answer,) = as_nobody(
            d.socket_path,
            {"method": "prepare_prompt", "params": {"messages": HELLO, "save_file": chat}},
            prefix=[*prefix[:-1], f"--groups={gid}"],
        )
        assert answer["result"]["messages"][-1]["content"] == "for the group only"


def test_a_group_the_client_holds_counts_though_the_database_omits_it() -> None:
    """A process given a group the database does not list (systemd's SupplementaryGroups=)."""
    gid = 4242
    with open_daemon(allowed_uids=[0, NOBODY]) as d:
        chat = _group_chat(d, gid)
        prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", f"--groups={gid}"]
        (answer,) = as_nobody(
            d.socket_path,
            {"method": "prepare_prompt", "params": {"messages": HELLO, "save_file": chat}},
            prefix=prefix,
        )
        assert "result" in answer, answer
        assert answer["result"]["messages"][-1]["content"] == "for the group only"
