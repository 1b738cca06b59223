"""Who a read stands for: the rule by which root never reads for an agent what the agent may
not read (``scoutd/inbox/files.py``), checked against the kernel itself.

The oracle is a child process run as the user (``setpriv``), which tries to open
each file: the kernel's answer, not a second copy of the rule. Mutation testing
showed no test compared the rule's branches (owner, group, other; a user the
user database lacks) with it (docs/TESTING.md, "The twelfth round").
"""

from __future__ import annotations

import errno
import itertools
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from scoutd.inbox import files, walk
from scoutd.inbox.files import open_regular
from tests.support.ids import AS_ROOT, NOBODY

# A uid and gid no user database here names: its groups are the directory's gid alone.
STRANGER = 54321
OWNERS = (NOBODY, 0, STRANGER, 12345)
GROUPS = (NOBODY, 0, STRANGER, 12345)
MODES = (0o000, 0o400, 0o040, 0o004, 0o440, 0o404, 0o044, 0o444)

_TRY_EACH = """
import json, os, sys
found = {}
for path in sys.argv[1:]:
    try:
        os.close(os.open(path, os.O_RDONLY))
        found[path] = True
    except PermissionError:
        found[path] = False
print(json.dumps(found))
"""

pytestmark = [
    AS_ROOT,
    pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv to run as a user"),
]


@pytest.fixture
def files_of_every_kind() -> Iterator[list[str]]:
    """A file of each owner, group and mode, in a directory every user may search."""
    top = tempfile.mkdtemp(prefix="scoutd-rights-", dir="/tmp")
    try:
        os.chmod(top, 0o755)
        paths = []
        for owner, group, mode in itertools.product(OWNERS, GROUPS, MODES):
            path = os.path.join(top, f"{owner}-{group}-{mode:o}")
            pathlib.Path(path).write_text("x")
            os.chown(path, owner, group)
            os.chmod(path, mode)
            paths.append(path)
        yield paths
    finally:
        shutil.rmtree(top)


def kernel_lets(uid: int, gid: int, groups: str, paths: list[str]) -> dict[str, bool]:
    """Which of ``paths`` the kernel lets ``uid`` open for reading."""
    command = ["setpriv", f"--reuid={uid}", f"--regid={gid}", groups]
    done = subprocess.run(
        [*command, sys.executable, "-c", _TRY_EACH, *paths],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    found: dict[str, bool] = json.loads(done.stdout)
    return found


@pytest.mark.parametrize(
    ("uid", "gid", "groups"),
    [(NOBODY, NOBODY, "--init-groups"), (STRANGER, STRANGER, "--clear-groups")],
    ids=["a user of the database", "a uid the database lacks"],
)
def test_the_rule_answers_as_the_kernel_does(
    files_of_every_kind: list[str], uid: int, gid: int, groups: str
) -> None:
    kernel = kernel_lets(uid, gid, groups, files_of_every_kind)
    reader = files._Reader(uid, gid)
    ours = {path: reader.may_read(os.stat(path)) for path in files_of_every_kind}
    assert ours == kernel
    # the cases reached: each branch of the rule, both ways
    by_owner = [os.stat(path).st_uid == uid for path in files_of_every_kind]
    assert sum(by_owner) == len(GROUPS) * len(MODES)
    assert 0 < sum(kernel.values()) < len(kernel)


def test_root_reads_everything(files_of_every_kind: list[str]) -> None:
    reader = files._Reader(0, 0)
    assert all(reader.may_read(os.stat(path)) for path in files_of_every_kind)
    assert all(kernel_lets(0, 0, "--clear-groups", files_of_every_kind).values())


def test_a_directory_of_a_uid_the_database_lacks_lends_its_gid(tmp_path: pathlib.Path) -> None:
    """The stranger's directory: a file of another owner that only its group may read is
    read; one only its owner may read is refused, in the error the caller logs."""
    os.chown(tmp_path, STRANGER, STRANGER)
    for name, group_read in (("shared", 0o040), ("private", 0o400)):
        path = tmp_path / name
        path.write_text(name)
        os.chown(path, 12345, STRANGER)
        os.chmod(path, group_read)
    dfd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fd, _ = open_regular("shared", dfd)
        os.close(fd)
        with pytest.raises(PermissionError) as raised:
            open_regular("private", dfd)
    finally:
        os.close(dfd)
    error = raised.value
    assert (error.errno, error.strerror, error.filename) == (
        errno.EACCES,
        f"uid {STRANGER}, whose directory it is in, may not read it",
        "private",
    )


def test_what_is_no_regular_file_is_refused_by_name(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seen at the first look (a FIFO), or swapped in before the open (a directory)."""
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "swapped").mkdir()
    (tmp_path / "plain").write_text("a regular file")
    dfd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(OSError) as at_the_look:
            open_regular("fifo", dfd)
        regular = os.lstat("plain", dir_fd=dfd)
        lstat = os.lstat

        def looks_regular(path: Any, *args: Any, **kwargs: Any) -> Any:
            return regular if path == "swapped" else lstat(path, *args, **kwargs)

        monkeypatch.setattr(os, "lstat", looks_regular)
        with pytest.raises(OSError) as at_the_open:
            open_regular("swapped", dfd)
    finally:
        os.close(dfd)
    for raised, name in ((at_the_look, "fifo"), (at_the_open, "swapped")):
        error = raised.value
        assert (error.errno, error.strerror, error.filename) == (
            errno.EINVAL,
            "not a regular file",
            name,
        )


def test_root_and_the_caller_own_the_links_that_are_followed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Root's links and the caller's own, whoever the caller is; no one else's."""
    link = os.stat_result((0o120777, 0, 0, 1, 0, 0, 0, 0, 0, 0))
    mine = os.stat_result((0o120777, 0, 0, 1, 1000, 1000, 0, 0, 0, 0))
    theirs = os.stat_result((0o120777, 0, 0, 1, 1001, 1001, 0, 0, 0, 0))
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert walk.trusted_link(link) and walk.trusted_link(mine)
    assert not walk.trusted_link(theirs)
    error = walk._untrusted("/chats/mine", theirs)
    assert (error.errno, error.strerror, error.filename) == (
        errno.ELOOP,
        "is a symbolic link owned by uid 1001 (neither root nor uid 1000), not followed",
        "/chats/mine",
    )
