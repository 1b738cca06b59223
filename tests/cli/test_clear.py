"""``scoutd clear``: an aborted chat stays aborted until an operator lifts it (real files)."""

from __future__ import annotations

import json
from pathlib import Path

import scoutd
from scoutd.inbox.aborted import marker_paths
from scoutd.testing import conversation

from .helpers import one_error_line, run


def prepare(home: Path, save_file: Path) -> int:
    done = run(
        home, "prepare", "--local", "--save-file", str(save_file), input=json.dumps(conversation(3))
    )
    return done.returncode


def test_an_abort_stays_until_cleared(home: Path) -> None:
    save_file = home / "agent.chat"
    assert run(home, "abort", str(save_file), "budget exhausted").returncode == 0
    assert prepare(home, save_file) == 3  # consumed here
    marker = marker_paths(str(save_file))[0]
    assert Path(marker).read_text() == "budget exhausted"
    done = run(home, "prepare", "--local", "--save-file", str(save_file), input="[]")
    assert done.returncode == 3
    assert one_error_line(done) == "scoutd: aborted: budget exhausted"
    assert run(home, "abort", str(save_file), "and again").returncode == 0  # waits in the inbox
    cleared = run(home, "clear", str(save_file))
    assert cleared.returncode == 0, cleared.stderr
    inbox = scoutd.inbox_dir(str(save_file))
    assert cleared.stdout.splitlines() == [f"{inbox}/abort", marker]
    assert cleared.stderr == ""
    assert prepare(home, save_file) == 0
    again = run(home, "clear", str(save_file))
    assert again.returncode == 0 and again.stdout == ""
    assert one_error_line(again) == "scoutd: warning: the chat was not aborted: nothing to clear"


def test_clear_says_when_the_chat_stays_aborted(home: Path) -> None:
    save_file = home / "agent.chat"
    marker = Path(marker_paths(str(save_file))[0])
    marker.mkdir()  # a marker that is a directory aborts too, and is removed only when empty
    (marker / "inside").write_text("x")
    assert prepare(home, save_file) == 3
    done = run(home, "clear", str(save_file))
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith(f"scoutd: warning: {marker} could not be removed:")
    assert lines[1].startswith("scoutd: the chat is still aborted: aborted by operator")
    assert marker.is_dir()


def test_clear_refuses_a_save_file_without_a_name(home: Path) -> None:
    done = run(home, "clear", "/")
    assert done.returncode == 2
    assert "has no file name" in one_error_line(done)


def test_clear_prints_every_path_escaped(home: Path) -> None:
    """A chat directory an agent named with a terminal escape and a newline: what
    ``clear`` prints is one escaped line per path (docs/RELIABILITY.md, rule 7)."""
    chats = home / "x\x1b[2J\nscoutd: all clear"
    chats.mkdir()
    save_file = chats / "agent.chat"
    assert run(home, "abort", str(save_file), "stop").returncode == 0
    cleared = run(home, "clear", str(save_file))
    assert cleared.returncode == 0, cleared.stderr
    assert "\x1b" not in cleared.stdout
    lines = cleared.stdout.splitlines()
    assert lines == [f"{home}/x\\x1b[2J\\x0ascoutd: all clear/agent.inbox/abort"]


def test_a_path_that_names_no_file_never_reaches_another_chat(home: Path) -> None:
    """``D/``, ``''`` (the current directory), ``.`` or ``..`` name no chat: refused with 2,
    nothing done. ``abspath`` used to make ``D/`` the chat ``D.chat`` beside ``D``, so
    ``scoutd clear D/`` lifted that chat's abort, and ``abort D/`` stopped it."""
    chats = home / "a1"
    chats.mkdir()
    (chats / "empty.toml").write_text("")  # the config of runs from within it
    neighbour = home / "a1.chat"  # the chat that D/ used to mean
    assert run(home, "abort", str(neighbour), "stop a1").returncode == 0
    assert prepare(home, neighbour) == 3
    for verb in (("clear",), ("inbox",), ("notify",), ("abort",)):
        for given in (f"{chats}/", "", ".", f"{chats}/.."):
            text = ("hi",) if verb == ("notify",) else ()
            result = run(chats, *verb, given, *text)
            assert result.returncode == 2, (verb, given, result.stderr)
            assert one_error_line(result).endswith("has no file name: name the chat's file")
    refused = run(chats, "prepare", "--local", "--save-file", f"{chats}/", input="[]")
    assert refused.returncode == 2, refused.stderr
    assert prepare(home, neighbour) == 3  # still aborted, with its reason
    assert not (chats / ".inbox").exists() and not (home / ".inbox").exists()
