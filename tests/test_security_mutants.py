"""The access checks' cases that mutation testing found untested (docs/TESTING.md):
what each refusal says, the retries of a path that changes while it is resolved, the
root directory as a save file's, the groups a process holds, and root's rights."""

from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from scoutd.config import DaemonConfig
from scoutd.security import (
    Forbidden,
    PeerCred,
    check_access,
    check_peer,
    check_save_file,
    groups_of,
    inside_roots,
    may_take_abort,
    peer_credentials,
    reach_problem,
    resolve_roots,
)
from tests.support.ids import AS_ROOT, NOBODY


@pytest.fixture
def tree() -> Iterator[str]:
    """A directory that every user may search, with ``root/chats`` inside."""
    base = tempfile.mkdtemp(prefix="sd", dir="/tmp")
    try:
        os.makedirs(os.path.join(base, "root", "chats"))
        for path in (base, os.path.join(base, "root"), os.path.join(base, "root", "chats")):
            os.chmod(path, 0o755)
        yield base
    finally:
        shutil.rmtree(base)


def _refusal(call: Any, *args: Any) -> str:
    with pytest.raises(Forbidden) as raised:
        call(*args)
    return str(raised.value)


def test_each_refusal_of_a_save_file_says_why(tree: str) -> None:
    root = os.path.join(tree, "root")
    other = os.path.join(tree, "other")
    os.mkdir(other)
    roots = resolve_roots([root, other])
    for given, said in [
        (5, "save_file must be a non-empty string"),
        ("", "save_file must be a non-empty string"),
        (f"{root}/a\0.chat", "save_file contains a NUL byte"),
        ("chats/a.chat", "save_file must be an absolute path: 'chats/a.chat'"),
        (f"{root}/chats/", f"save_file must name a file: '{root}/chats/'"),
        (f"{root}/chats/.", f"save_file must name a file: '{root}/chats/.'"),
        (f"{root}/chats/..", f"save_file must name a file: '{root}/chats/..'"),
        (
            f"{tree}/a.chat",
            f"save_file '{tree}/a.chat' resolves to '{tree}/a.chat', outside allowed_roots"
            f" ({root}, {other})",
        ),
    ]:
        assert _refusal(check_save_file, given, roots) == said
    served_none = f"save_file '{root}/a.chat' resolves to '{root}/a.chat', outside allowed_roots"
    assert _refusal(check_save_file, f"{root}/a.chat", ()) == f"{served_none} (none)"


def test_a_relative_root_is_passed_over_not_the_end_of_the_search() -> None:
    assert inside_roots("/srv/chats/a.chat", ("relative", "/srv"))
    assert not inside_roots("/srv/chats/a.chat", ("relative", "/elsewhere"))


def test_a_path_that_changes_while_resolved_is_tried_again_then_refused(
    tree: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """realpath raises when a link on the way is swapped meanwhile: a few tries, then a
    refusal that names the path; a chain of links too long for it is refused alike."""
    root = os.path.join(tree, "root")
    roots = resolve_roots([root])
    save_file = os.path.join(root, "chats", "a.chat")
    real = os.path.realpath
    failures = iter(range(3))

    def swapped_three_times(path: str) -> str:
        if next(failures, None) is not None:
            raise FileNotFoundError(path)
        return real(path)

    monkeypatch.setattr(os.path, "realpath", swapped_three_times)
    assert check_save_file(save_file, roots) == save_file

    def always_swapped(path: str) -> str:
        raise FileNotFoundError(path)

    monkeypatch.setattr(os.path, "realpath", always_swapped)
    said = _refusal(check_save_file, save_file, roots)
    assert said == f"save_file '{save_file}' kept changing while it was resolved"

    def too_deep(path: str) -> str:
        raise RecursionError

    monkeypatch.setattr(os.path, "realpath", too_deep)
    assert _refusal(check_save_file, save_file, roots) == (
        f"save_file '{save_file}': too many symbolic links"
    )


def test_without_allowed_uids_the_daemons_own_uid_alone_is_let_in() -> None:
    check_peer(PeerCred(1, os.getuid(), 4242), DaemonConfig())
    with pytest.raises(Forbidden, match=r"^peer uid 4243 \(gid 4242, pid 7\) is not allowed$"):
        check_peer(PeerCred(7, 4243, 4242), DaemonConfig())


def test_a_user_the_database_does_not_know_has_its_primary_group_alone() -> None:
    assert groups_of(3_999_999, 4242) == frozenset({4242})


def test_a_save_file_in_the_root_directory_is_checked_like_any_other() -> None:
    nobody = PeerCred(1, NOBODY, NOBODY, frozenset({NOBODY}))
    assert reach_problem("/", NOBODY, frozenset({NOBODY})) is None  # / is searchable by all
    said = _refusal(check_access, "/a.chat", nobody)
    assert said.startswith(f"uid {NOBODY} may not access / (the save file's directory")


@AS_ROOT
def test_root_passes_whatever_the_mode_bits(tree: str) -> None:
    chats = os.path.join(tree, "root", "chats")
    os.chown(chats, NOBODY, NOBODY)
    os.chmod(chats, 0o700)  # nobody's own: root has no right by the bits
    save_file = os.path.join(chats, "a.chat")
    assert reach_problem(chats, 0, frozenset({0})) is None
    check_access(save_file, PeerCred(1, 0, 0, frozenset({0})))
    assert may_take_abort(save_file, 0, 0)
    assert reach_problem(chats, 1, frozenset({1})) is not None  # uid 1 is no root
    assert not may_take_abort(save_file, 1, 1)


@AS_ROOT
def test_reach_problem_says_what_keeps_a_process_out(tree: str) -> None:
    chats = os.path.join(tree, "root", "chats")
    groups = frozenset({NOBODY})
    missing = os.path.join(tree, "missing")
    said = reach_problem(missing, NOBODY, groups)
    assert said == f"{missing} cannot be examined: No such file or directory"
    a_file = os.path.join(tree, "file")
    open(a_file, "w").close()
    assert reach_problem(a_file, NOBODY, groups) == f"{a_file} is not a directory"
    rwx = os.R_OK | os.W_OK | os.X_OK
    said = reach_problem(chats, NOBODY, groups, rwx)
    assert said == f"uid {NOBODY} may not list and write and search {chats} (mode 755)"
    os.chown(chats, NOBODY, 0)
    os.chmod(chats, 0o700)
    assert reach_problem(chats, NOBODY, groups, rwx) is None  # the owner's bits
    os.chmod(os.path.join(tree, "root"), 0o750)
    said = reach_problem(chats, NOBODY, groups)
    assert said == f"uid {NOBODY} may not search {tree}/root (mode 750)"


@AS_ROOT
def test_check_access_names_the_directory_it_stopped_at(tree: str) -> None:
    nobody = PeerCred(1, NOBODY, NOBODY, frozenset({NOBODY}))
    missing = os.path.join(tree, "missing")
    assert _refusal(check_access, f"{missing}/a.chat", nobody) == f"{missing} does not exist"
    loop = os.path.join(tree, "loop")
    os.symlink(loop, loop)
    said = _refusal(check_access, f"{loop}/a.chat", nobody)
    assert said == f"cannot check {loop}: Too many levels of symbolic links"
    chats = os.path.join(tree, "root", "chats")
    assert _refusal(check_access, f"{chats}/a.chat", nobody) == (
        f"uid {NOBODY} may not access {chats} (the save file's directory or one above it);"
        " the daemon acts only where the caller could"
    )
    os.chmod(chats, 0o777)
    inbox = os.path.join(chats, "a.inbox")
    os.mkdir(inbox)
    os.chmod(inbox, 0o1777)
    assert _refusal(check_access, f"{chats}/a.chat", nobody) == (
        f"{inbox} has the sticky bit and belongs to uid 0: uid {NOBODY} may not take entries"
        " it does not own there; the daemon acts only where the caller could"
    )


_CONNECT = (
    "import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.recv(1)"
)


@AS_ROOT
def test_peer_credentials_read_every_supplementary_group(tmp_path: Any) -> None:
    """The groups come from the kernel for the connecting process: three of them here."""
    path = str(tmp_path / "s.sock")
    extra = [4242, 4343, 4444]
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(path)
        server.listen(1)
        server.settimeout(30)
        child = subprocess.Popen([sys.executable, "-c", _CONNECT, path], extra_groups=extra)
        try:
            conn, _ = server.accept()
            with conn:
                peer = peer_credentials(conn)
        finally:
            child.kill()
            child.wait(30)
    assert peer.pid == child.pid
    assert peer.groups == frozenset({os.getegid(), *extra})


class _Kernel:
    """A socket whose kernel tells the peer's credentials, and its groups as ``groups``
    (None: it cannot tell them)."""

    def __init__(self, groups: bytes | None) -> None:
        self.groups = groups

    def getsockopt(self, level: int, option: int, size: int) -> bytes:
        if option == socket.SO_PEERCRED:
            return struct.pack("3i", 10, 20, 30)
        if self.groups is None:
            raise OSError(92, "Protocol not available")
        return self.groups


def test_the_groups_are_the_whole_ids_the_kernel_gives_else_the_primary_one() -> None:
    def read(groups: bytes | None) -> PeerCred:
        return peer_credentials(_Kernel(groups))  # type: ignore[arg-type]

    assert read(None) == PeerCred(10, 20, 30, frozenset({30}))
    two = struct.pack("2I", 40, 50)
    assert read(two) == PeerCred(10, 20, 30, frozenset({30, 40, 50}))
    assert read(two + b"\x07") == read(two)  # a stray byte is no group
