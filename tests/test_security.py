"""Peer credentials and save-file confinement (docs/OPERATIONS.md)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator

import pytest

from scoutd import protocol
from scoutd.config import DaemonConfig
from scoutd.security import (
    Forbidden,
    PeerCred,
    check_access,
    check_peer,
    check_save_file,
    may_take_abort,
    peer_credentials,
    process_owned_by,
    reach_problem,
    resolve_roots,
)
from tests.support.daemon import Daemon

NOBODY = 65534
HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture
def tree() -> Iterator[str]:
    """root/ (allowed) with chats/ and a symlink escaping to outside/."""
    base = tempfile.mkdtemp(prefix="sd", dir="/tmp")
    try:
        os.makedirs(os.path.join(base, "root", "chats"))
        os.makedirs(os.path.join(base, "outside"))
        os.symlink(os.path.join(base, "outside"), os.path.join(base, "root", "escape"))
        os.symlink(os.path.join(base, "root", "chats"), os.path.join(base, "root", "alias"))
        yield base
    finally:
        shutil.rmtree(base)


def test_save_file_must_stay_under_the_roots(tree: str) -> None:
    root = os.path.join(tree, "root")
    roots = resolve_roots([root])
    inside = os.path.join(root, "chats", "a.chat")
    assert check_save_file(inside, roots) == inside
    # a symlinked directory that stays inside resolves to its target
    assert check_save_file(os.path.join(root, "alias", "a.chat"), roots) == inside
    # the file itself need not exist, nor its directory
    assert check_save_file(os.path.join(root, "new", "b.chat"), roots).startswith(root)
    for bad in (
        os.path.join(tree, "outside", "a.chat"),
        os.path.join(root, "..", "outside", "a.chat"),
        os.path.join(root, "chats", "..", "..", "outside", "a.chat"),
        os.path.join(root, "escape", "a.chat"),  # a symlinked directory pointing outside
        os.path.join(root, "escape", "..", "outside", "a.chat"),  # ".." after the symlink
        root + "x/a.chat",  # a sibling sharing the prefix is not under the root
        "relative/a.chat",
        os.path.join(root, "chats", ".."),
        os.path.join(root, "a\0.chat"),
        "",
    ):
        with pytest.raises(Forbidden):
            check_save_file(bad, roots)
    assert check_save_file("/etc/anything", resolve_roots(["/"])) == "/etc/anything"
    assert resolve_roots(["relative", root]) == (root,)


def test_a_save_file_lies_strictly_inside_a_root(tree: str) -> None:
    """A root that is itself the save file would leave its inbox outside the root."""
    save_file = os.path.join(tree, "root", "chats", "a.chat")
    with pytest.raises(Forbidden, match="outside allowed_roots") as refused:
        check_save_file(save_file, resolve_roots([save_file]))
    # the refusal names the roots served, so the client knows where to put its chat
    assert str(refused.value).endswith(f"outside allowed_roots ({save_file})")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to lay out files of another uid")
def test_access_follows_the_mode_bits(tree: str) -> None:
    chats = os.path.join(tree, "root", "chats")
    save_file = os.path.join(chats, "a.chat")
    nobody = PeerCred(pid=1, uid=NOBODY, gid=NOBODY)
    os.chmod(tree, 0o755)
    os.chmod(os.path.join(tree, "root"), 0o755)
    for mode, owner, group, allowed in [
        (0o700, 0, 0, False),  # root's private directory
        (0o755, 0, 0, False),  # readable, not writable: the daemon would move files for it
        (0o777, 0, 0, True),
        (0o700, NOBODY, NOBODY, True),  # its own
        (0o070, NOBODY, NOBODY, False),  # the owner class decides, even when group bits allow
        (0o070, 0, NOBODY, True),  # its group
        (0o707, 0, NOBODY, False),  # the group class decides, even when other bits allow
    ]:
        os.chown(chats, owner, group)
        os.chmod(chats, mode)
        if allowed:
            check_access(save_file, nobody)
        else:
            with pytest.raises(Forbidden, match=f"uid {NOBODY} may not access"):
                check_access(save_file, nobody)
        check_access(save_file, PeerCred(pid=1, uid=0, gid=0))  # root passes, as in the kernel
    os.chmod(os.path.join(tree, "root"), 0o700)  # an ancestor without search permission
    os.chmod(chats, 0o777)
    with pytest.raises(Forbidden):
        check_access(save_file, nobody)


def test_a_save_file_that_names_no_bytes_is_forbidden(tree: str) -> None:
    """A lone surrogate (valid in Python's JSON, not in a file name) is refused, not raised.

    It raised ``UnicodeEncodeError`` from ``realpath``: callers catch ``Forbidden``.
    """
    root = os.path.join(tree, "root")
    for name in ("\ud800/a.chat", "chats/a\ud800.chat", "chats/\udfff"):
        with pytest.raises(Forbidden, match="cannot be encoded"):
            check_save_file(os.path.join(root, name), resolve_roots([root]))
    # Bytes that are not UTF-8, held as surrogate escapes, are a file name like any other.
    inside = os.path.join(root, "chats", "\udcff.chat")
    assert check_save_file(inside, resolve_roots([root])) == inside


def test_peer_credentials_carry_the_process_groups() -> None:
    """The groups are the connecting process's (SO_PEERGROUPS), not the user database's."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        peer = peer_credentials(a)
    assert (peer.pid, peer.uid, peer.gid) == (os.getpid(), os.geteuid(), os.getegid())
    assert peer.groups == frozenset((os.getegid(), *os.getgroups()))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to own files as another uid")
def test_access_uses_the_peers_own_groups_when_known(tree: str) -> None:
    """A group the database lists but the process dropped grants nothing; one it holds does."""
    chats = os.path.join(tree, "root", "chats")
    save_file = os.path.join(chats, "a.chat")
    os.chmod(tree, 0o755)
    os.chmod(os.path.join(tree, "root"), 0o755)
    os.chown(chats, 0, 4242)
    os.chmod(chats, 0o770)
    with pytest.raises(Forbidden):
        check_access(save_file, PeerCred(1, NOBODY, NOBODY, frozenset({NOBODY})))
    check_access(save_file, PeerCred(1, NOBODY, NOBODY, frozenset({NOBODY, 4242})))
    assert may_take_abort(save_file, NOBODY, NOBODY, frozenset({4242}))
    assert not may_take_abort(save_file, NOBODY, NOBODY, frozenset())


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to own files as another uid")
def test_a_sticky_inbox_of_another_uid_is_refused_and_its_abort_not_taken(tree: str) -> None:
    """In a sticky directory uid 65534 may take only its own entries: the daemon takes for it
    only what it could take itself (and a pickup takes every entry, so such an inbox is
    refused whole)."""
    chats = os.path.join(tree, "root", "chats")
    save_file = os.path.join(chats, "a.chat")
    inbox = os.path.join(chats, "a.inbox")
    nobody = PeerCred(pid=1, uid=NOBODY, gid=NOBODY)
    for path in (tree, os.path.join(tree, "root")):
        os.chmod(path, 0o755)
    os.chmod(chats, 0o1777)
    check_access(save_file, nobody)  # a sticky chat directory: the inbox is what is taken from
    os.mkdir(inbox)
    os.chmod(inbox, 0o1777)
    with pytest.raises(Forbidden, match="sticky bit"):
        check_access(save_file, nobody)
    abort = os.path.join(inbox, "abort")
    with open(abort, "w") as handle:
        handle.write("root's")
    assert not may_take_abort(save_file, NOBODY, NOBODY)
    os.chown(abort, NOBODY, NOBODY)  # its own abort, in a sticky inbox: it could take it
    assert may_take_abort(save_file, NOBODY, NOBODY)
    os.chown(abort, 0, 0)
    os.chmod(inbox, 0o777)  # not sticky, writable by all
    assert may_take_abort(save_file, NOBODY, NOBODY)
    os.chmod(inbox, 0o755)  # not writable by it: it could not move the abort
    assert not may_take_abort(save_file, NOBODY, NOBODY)
    assert may_take_abort(save_file, 0, 0)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to own files as another uid")
def test_reach_problem_names_what_keeps_a_daemon_out(tree: str) -> None:
    inbox = os.path.join(tree, "root", "chats")
    for path in (tree, os.path.join(tree, "root")):
        os.chmod(path, 0o755)
    os.chmod(inbox, 0o700)
    groups = frozenset({NOBODY})
    problem = reach_problem(inbox, NOBODY, groups)
    assert problem is not None and "may not list and search" in problem and "700" in problem
    assert reach_problem(inbox, 0, frozenset({0})) is None
    os.chown(inbox, 0, NOBODY)
    os.chmod(inbox, 0o750)
    assert reach_problem(inbox, NOBODY, groups) is None  # its group may
    os.chmod(os.path.join(tree, "root"), 0o700)
    problem = reach_problem(inbox, NOBODY, groups)
    assert problem is not None and "may not search" in problem


def test_peer_checks() -> None:
    own = DaemonConfig()
    check_peer(PeerCred(pid=1, uid=1000, gid=1000), own, own_uid=1000)
    with pytest.raises(Forbidden, match="uid 0"):
        check_peer(PeerCred(pid=1, uid=0, gid=0), own, own_uid=1000)  # root is not implicit
    with pytest.raises(Forbidden):
        check_peer(PeerCred(pid=1, uid=1001, gid=1001), own, own_uid=1000)
    listed = DaemonConfig(allowed_uids=(1001,), allowed_gids=(50,))
    check_peer(PeerCred(pid=1, uid=1001, gid=1), listed, own_uid=1000)
    check_peer(PeerCred(pid=1, uid=1002, gid=50), listed, own_uid=1000)
    with pytest.raises(Forbidden):
        check_peer(PeerCred(pid=1, uid=1000, gid=1000), listed, own_uid=1000)


def test_process_owned_by() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert process_owned_by(child.pid, os.getuid())
        assert not process_owned_by(child.pid, os.getuid() + 12345)
        assert not process_owned_by(os.getpid(), os.getuid())  # never ourselves
        assert not process_owned_by(1, 0)
    finally:
        child.kill()
        child.wait(10)
    assert not process_owned_by(child.pid, os.getuid())  # gone (reaped)


def test_forbidden_paths_over_the_wire(tree: str) -> None:
    root = os.path.join(tree, "root")
    with Daemon(daemon={"allowed_roots": [root]}) as d, d.connect() as c:
        for save_file in (
            os.path.join(tree, "outside", "a.chat"),
            os.path.join(root, "..", "outside", "a.chat"),
            os.path.join(root, "escape", "a.chat"),
            "relative.chat",
        ):
            for method, params in (
                ("session.open", {"save_file": save_file}),
                ("prepare_prompt", {"messages": HELLO, "save_file": save_file}),
            ):
                reply = c.call(method, params)
                assert reply["error"]["code"] == protocol.FORBIDDEN, (method, save_file)
                assert reply["error"]["data"]["reason"]
        ok = os.path.join(root, "chats", "a.chat")
        assert "result" in c.call("session.open", {"save_file": ok})
        assert not os.path.exists(os.path.join(root, "chats", "a.inbox"))  # never created
        assert "result" in c.call("status")


CLIENT = """
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
s.connect(sys.argv[1])
try:
    s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"status"}\\n')
except (BrokenPipeError, ConnectionResetError):
    pass  # a refused peer may be cut off before it sends: its error line is still there
data = b""
while not data.endswith(b"\\n"):
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
print(data.decode().strip() or "EOF")
"""


def _as_nobody(socket_path: str) -> dict[str, object]:
    setpriv = shutil.which("setpriv")
    if setpriv:
        prefix = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    elif shutil.which("runuser"):
        prefix = ["runuser", "-u", "nobody", "--"]
    else:
        pytest.skip("neither setpriv nor runuser is available")
    run = subprocess.run(
        [*prefix, sys.executable, "-I", "-c", CLIENT, socket_path],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.returncode == 0, run.stderr
    reply: dict[str, object] = json.loads(run.stdout)
    return reply


@pytest.mark.skipif(os.getuid() != 0, reason="switching to uid 65534 needs root")
def test_a_peer_with_another_uid_is_refused() -> None:
    with Daemon(daemon={"socket_mode": 0o666}) as d:
        os.chmod(d.dir, 0o755)
        reply = _as_nobody(d.socket_path)
        assert reply["id"] is None
        error = reply["error"]
        assert isinstance(error, dict) and error["code"] == protocol.FORBIDDEN
        assert f"uid {NOBODY}" in error["data"]["reason"]
        with d.connect() as c:  # the daemon goes on
            assert c.call("status")["result"]["counts"]["errors"] >= 1


@pytest.mark.skipif(os.getuid() != 0, reason="switching to uid 65534 needs root")
def test_a_listed_uid_is_let_in() -> None:
    with Daemon(daemon={"socket_mode": 0o666, "allowed_uids": [0, NOBODY]}) as d:
        os.chmod(d.dir, 0o755)
        reply = _as_nobody(d.socket_path)
        assert reply["id"] == 1 and "result" in reply
