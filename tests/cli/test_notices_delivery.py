"""``scoutd notify`` and ``scoutd abort``: the file is written as given, and said when stuck.

* A reason or notice holding a byte that is not UTF-8 (``$'stop \\xff'``) was
  never written: the abort failed with ``UnicodeEncodeError`` (an abort must
  always be written), the notice with "a bad --name". Both now hold the bytes
  the operator gave.
* Root writing into an agent's chat directory made a root-owned inbox the
  agent's claims could not empty: the notice was never delivered, exit 0.
* A notice whose record can never be written is never delivered: exit 1.
* A second abort of the same long reason warned that an abort "is already
  waiting ... yours was not written" (a 200-byte prefix compared with it).
* Control bytes of a path reached the terminal raw in an ``OSError``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import scoutd
from tests.reliability.harness import NOBODY, unprivileged_prefix

from .helpers import break_record, one_error_line, run

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as uid 65534")


def test_an_abort_and_a_notice_keep_bytes_that_are_not_utf8(home: Path) -> None:
    """A non-UTF-8 byte on the command line reaches the inbox as that byte, exit 0."""
    save_file = home / "agent.chat"
    inbox = Path(scoutd.inbox_dir(str(save_file)))
    noticed = run(home, "notify", "--name", "n.txt", str(save_file), "wrap up \udcff")
    assert noticed.returncode == 0, noticed.stderr
    assert (inbox / "n.txt").read_bytes() == b"wrap up \xff"
    aborted = run(home, "abort", str(save_file), "stop \udcff")
    assert aborted.returncode == 0, aborted.stderr
    assert aborted.stderr == ""
    assert (inbox / "abort").read_bytes() == b"stop \xff"
    stopped = run(home, "prepare", "--local", "--save-file", str(save_file), input="[]")
    assert stopped.returncode == 3, stopped.stderr


def test_a_notice_on_stdin_keeps_bytes_that_are_not_utf8(home: Path) -> None:
    """``notify -`` as the command line does: the bytes given, exit 0 (was exit 1)."""
    save_file = home / "agent.chat"
    noticed = run(home, "notify", "--name", "n.txt", str(save_file), "-", input=b"wrap up \xff\n")
    assert noticed.returncode == 0, noticed.stderr
    assert (Path(scoutd.inbox_dir(str(save_file))) / "n.txt").read_bytes() == b"wrap up \xff\n"


def test_the_writer_escapes_a_lone_surrogate_rather_than_lose_an_abort(home: Path) -> None:
    """A library caller's lone surrogate (no byte behind it) is escaped, never refused."""
    path = scoutd.write_abort(str(home / "agent.chat"), "stop \ud800")
    assert Path(path).read_bytes() == b"stop \\ud800"


@pytest.mark.parametrize("sabotage", ["regular-file", "dangling-symlink"])
def test_notify_says_when_its_notice_can_never_be_delivered(home: Path, sabotage: str) -> None:
    """No record can be written: every prepare leaves the notice; exit 1, file written."""
    save_file = home / "agent.chat"
    break_record(save_file, sabotage)
    noticed = run(home, "notify", str(save_file), "wrap up")
    assert noticed.returncode == 1
    written = Path(noticed.stdout.strip())
    assert written.read_text() == "wrap up"
    message = one_error_line(noticed)
    assert "the notice was written to" in message and "inbox_removed" in message
    assert "undelivered" in message


def test_the_same_long_reason_again_is_not_worth_a_warning(home: Path) -> None:
    """Whether an abort was kept is told by the writer, not by comparing 200 bytes."""
    save_file = str(home / "agent.chat")
    reason = "r" * 300
    assert run(home, "abort", save_file, reason).returncode == 0
    same = run(home, "abort", save_file, reason)
    assert same.returncode == 0 and same.stderr == "", same.stderr
    other = run(home, "abort", save_file, reason + " and more")
    assert other.returncode == 0
    warning = one_error_line(other)
    assert "yours was not written" in warning and "r" * 200 + "..." in warning
    assert Path(scoutd.inbox_dir(save_file), "abort").read_text() == reason


def test_an_os_error_shows_a_path_with_its_control_bytes_escaped(home: Path) -> None:
    """An ESC in a path cannot colour or clear the operator's terminal."""
    odd = home / "x\x1b[31mRED"
    odd.mkdir()
    (odd / "f").write_text("")
    result = run(home, "notify", str(odd / "f" / "agent.chat"), "hi")
    assert result.returncode == 1
    line = one_error_line(result)
    assert "\x1b" not in result.stderr
    assert "x\\x1b[31mRED/f" in line and "not a directory" in line


def _agents_directory(home: Path) -> Path:
    """A chat directory of uid 65534, mode 755, that uid 65534 can reach."""
    os.chmod(home, 0o755)
    chat = home / "a1"
    chat.mkdir(mode=0o755)
    os.chown(chat, NOBODY, NOBODY)
    return chat


@root_only
def test_root_makes_an_inbox_the_agent_owns_and_empties(home: Path) -> None:
    """A root notify into the agent's directory: the inbox is the agent's, the notice delivered."""
    save_file = _agents_directory(home) / "agent.chat"
    noticed = run(home, "notify", str(save_file), "wrap up")
    assert noticed.returncode == 0 and noticed.stderr == "", noticed.stderr
    inbox = Path(scoutd.inbox_dir(str(save_file)))
    st = inbox.stat()
    assert (st.st_uid, st.st_gid) == (NOBODY, NOBODY)
    messages = [{"role": "user", "content": "start"}]
    delivered = run(
        home,
        "prepare", "--local", "--save-file", str(save_file),
        input=json.dumps(messages),
        prefix=unprivileged_prefix(),
    )  # fmt: skip
    assert delivered.returncode == 0, delivered.stderr
    assert [m["content"] for m in json.loads(delivered.stdout)] == ["start", "wrap up"]
    assert list(inbox.iterdir()) == []


@root_only
def test_notify_warns_when_the_agent_cannot_empty_its_inbox(home: Path) -> None:
    """An inbox root made before (mode 755): the agent's claims never take the notice."""
    save_file = _agents_directory(home) / "agent.chat"
    Path(scoutd.inbox_dir(str(save_file))).mkdir(mode=0o755)
    noticed = run(home, "notify", str(save_file), "wrap up")
    assert noticed.returncode == 0
    warning = one_error_line(noticed)
    assert "owner (uid 65534) cannot empty the inbox" in warning
    assert "uid 65534 may not list and write and search" in warning
