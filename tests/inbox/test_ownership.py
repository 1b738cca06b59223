"""What root makes in an agent's inbox, the agent's own process can use.

``scoutd notify`` and ``scoutd abort`` often run as root, and the daemon runs
as root, in a chat directory the agent owns; the agent's own process (the
library) picks the inbox up too. Two things root made there locked the
agent's pickup out:

* a root notice of mode 0600 (umask 077): the agent could move it but never
  read it, so it was left in place at every pickup, never delivered; a root
  abort of mode 0600 aborted with a generic sentence instead of its reason;
* the removed directory, made root-owned (0755) by the daemon's first claim:
  every later claim of the agent's own process failed (``EACCES``), so no
  notice was ever delivered by the library again.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from scoutd.inbox import inbox_dir, inbox_removed_dir, pick_up, write_abort, write_notice
from tests.reliability.harness import NOBODY, unprivileged_python
from tests.support.umask import umask

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as uid 65534")

# The agent's own pickup, in its own process: what it got, as one JSON line.
PICKUP = (
    "import json, sys\n"
    "from scoutd.inbox import pick_up\n"
    "got = pick_up(sys.argv[1], max_bytes=1000, max_total_bytes=10000)\n"
    "print(json.dumps([got.notices, got.abort]))\n"
)


@pytest.fixture
def agents_chat() -> Iterator[str]:
    """A save file in a chat directory of uid 65534, mode 0700, that uid 65534 can reach."""
    top = Path(tempfile.mkdtemp(prefix="sdw"))
    try:
        os.chmod(top, 0o755)
        chat = top / "chat"
        chat.mkdir(mode=0o700)
        os.chown(chat, NOBODY, NOBODY)
        yield str(chat / "agent.chat")
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _agent_pickup(save_file: str) -> list[object]:
    proc = unprivileged_python(PICKUP, save_file)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    result: list[object] = json.loads(out)
    return result


def _as_root_with_umask_077(write: object, *args: str) -> str:
    with umask(0o077):
        assert callable(write)
        path: str = write(*args)
    return path


@root_only
@pytest.mark.parametrize("inbox_first", [False, True], ids=["new-inbox", "agents-inbox"])
def test_a_root_notice_with_umask_077_reaches_the_agents_own_pickup(
    agents_chat: str, inbox_first: bool
) -> None:
    """Root (umask 077) writes a notice; the agent's pickup delivers it once (was: never)."""
    if inbox_first:  # the agent made its inbox itself, private
        os.mkdir(inbox_dir(agents_chat), 0o700)
        os.chown(inbox_dir(agents_chat), NOBODY, NOBODY)
    path = _as_root_with_umask_077(write_notice, agents_chat, "wrap up now")
    st = os.stat(path)
    assert st.st_mode & 0o077 == 0  # nothing granted to anyone else
    assert (st.st_uid, st.st_gid) == (NOBODY, NOBODY)
    assert _agent_pickup(agents_chat) == [["wrap up now"], None]
    assert os.listdir(inbox_dir(agents_chat)) == []
    assert _agent_pickup(agents_chat) == [[], None]


@root_only
def test_a_root_abort_with_umask_077_gives_its_reason_to_the_agents_pickup(
    agents_chat: str,
) -> None:
    """Root (umask 077) writes an abort; the agent's pickup aborts with its reason."""
    _as_root_with_umask_077(write_abort, agents_chat, "budget exceeded")
    assert _agent_pickup(agents_chat) == [[], "budget exceeded"]


@root_only
def test_a_root_notice_in_a_root_inbox_stays_roots(tmp_path: Path) -> None:
    """Only the inbox's owner is given the file: root's inbox keeps root's files."""
    path = _as_root_with_umask_077(write_notice, str(tmp_path / "a.chat"), "x")
    st = os.stat(path)
    assert (st.st_uid, st.st_mode & 0o777) == (0, 0o600)


@root_only
@pytest.mark.parametrize("first", ["notice", "abort"])
def test_a_removed_directory_root_made_is_the_inbox_owners(agents_chat: str, first: str) -> None:
    """The daemon (root) claims first; the agent's own pickup still delivers (was: never)."""
    os.mkdir(inbox_dir(agents_chat), 0o750)
    os.chown(inbox_dir(agents_chat), NOBODY, NOBODY)
    if first == "abort":
        write_abort(agents_chat, "stop")
        assert pick_up(agents_chat, max_bytes=100, max_total_bytes=100).abort == "stop"
    else:
        write_notice(agents_chat, "first")
        assert pick_up(agents_chat, max_bytes=100, max_total_bytes=100).notices == ["first"]
    st = os.stat(inbox_removed_dir(agents_chat))
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (NOBODY, NOBODY, 0o750)
    write_notice(agents_chat, "second")
    assert _agent_pickup(agents_chat) == [["second"], None]
    assert os.listdir(inbox_dir(agents_chat)) == []
    assert not [n for n in os.listdir(os.path.dirname(agents_chat)) if n.startswith(".")]


@root_only
def test_a_removed_directory_root_makes_for_itself_stays_roots(tmp_path: Path) -> None:
    """Root's own inbox: the removed directory is made as ever (root's, its umask), not
    with the inbox's mode as for another user's."""
    save_file = str(tmp_path / "a.chat")
    write_notice(save_file, "x")
    os.chmod(inbox_dir(save_file), 0o700)
    with umask(0o022):
        assert pick_up(save_file, max_bytes=100, max_total_bytes=100).notices == ["x"]
    made = os.stat(inbox_removed_dir(save_file))
    assert (made.st_uid, stat.S_IMODE(made.st_mode)) == (0, 0o755)
