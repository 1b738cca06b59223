"""Safe rendering of paths and text: always encodable, valid text untouched."""

from __future__ import annotations

import errno
import os
import pathlib
import stat

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scoutd import protocol
from scoutd.paths import display_path, file_kind, open_input, printable, safe_text, safe_value


def test_undecodable_bytes_are_shown_escaped() -> None:
    raw = b"/srv/caf\xe9/\xff.chat"
    assert display_path(raw) == "/srv/caf\\xe9/\\xff.chat"
    assert display_path(os.fsdecode(raw)) == "/srv/caf\\xe9/\\xff.chat"
    assert safe_text(os.fsdecode(raw)) == "/srv/caf\\xe9/\\xff.chat"
    assert safe_text("lone \ud800 surrogate") == "lone \\ud800 surrogate"
    assert safe_text("plain é ✓") == "plain é ✓"


@given(st.text())
def test_safe_text_always_encodes(text: str) -> None:
    safe = safe_text(text)
    safe.encode("utf-8")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        assert safe != text
    else:
        assert safe == text


@given(st.binary(max_size=40))
def test_every_path_renders(raw: bytes) -> None:
    shown = display_path(raw)
    shown.encode("utf-8")
    assert safe_text(os.fsdecode(raw)) == shown


def test_safe_value_cuts_what_nests_too_deep() -> None:
    value: list[object] = []
    top = value
    for _ in range(2000):
        inner: list[object] = []
        value.append(inner)
        value = inner
    assert msgspec.json.encode(safe_value(top))  # no RecursionError


@given(st.lists(st.text(), max_size=5))
def test_wire_lines_never_fail_on_surrogates(parts: list[str]) -> None:
    reason = "\udcff".join(parts)
    data = protocol.AbortedData(reason=reason, save_file="/a/\udce9.chat", session=None)
    line = protocol.encode_error(1, protocol.ABORTED, f"aborted: {reason}", data)
    decoded = msgspec.json.decode(line)
    assert decoded["error"]["data"]["reason"] == safe_text(reason)
    push = protocol.encode_notification(
        "session.aborted",
        protocol.SessionAbortedParams(session="s", save_file="/\udcff", reason=reason),
    )
    assert msgspec.json.decode(push)["params"]["save_file"] == "/\\xff"


def test_printable_escapes_what_could_move_a_terminal_and_nothing_else() -> None:
    """Control characters, C1 controls, separators, bidirectional overrides and
    other format characters, each in the shortest escape of its code; undecodable
    bytes as the byte; printable text of any script as it is."""
    cases = {
        "plain/名字 é ✓.txt": "plain/名字 é ✓.txt",
        "a\x1b[2Jb\n\r\x08\x7f": "a\\x1b[2Jb\\x0a\\x0d\\x08\\x7f",
        "\x85\xa0\xad": "\\x85\\xa0\\xad",  # C1 control, no-break space, soft hyphen
        "\u2028\u202e\u200b": "\\u2028\\u202e\\u200b",
        "\uffff": "\\uffff",  # the last code of four hex digits
        "\U000e0001": "\\U000e0001",  # a language tag
        os.fsdecode(b"\x80\xff\n"): "\\x80\\xff\\x0a",  # bytes not UTF-8, then a newline
        "lone \ud800": "lone \\ud800",
    }
    assert {text: printable(text) for text in cases} == cases


def test_printable_takes_bytes_and_paths() -> None:
    assert printable(b"a\xff\nb") == "a\\xff\\x0ab"
    assert printable(pathlib.Path("dir/a\tb")) == "dir/a\\x09b"
    assert printable(pathlib.PurePosixPath(os.fsdecode(b"\xe9"))) == "\\xe9"


def test_a_mode_of_no_known_kind_is_said_so() -> None:
    assert file_kind(0) == "an unknown kind of file"
    assert file_kind(stat.S_IFSOCK) == "a socket"


def test_an_input_file_opens_blocking_and_not_inherited(tmp_path: pathlib.Path) -> None:
    """A FIFO nobody writes to does not hang the open; what is read from it then
    waits for a writer (blocking), and no child process inherits it."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    fd, mode = open_input(str(fifo))
    try:
        assert stat.S_ISFIFO(mode)
        assert os.get_blocking(fd) and not os.get_inheritable(fd)
        assert os.fstat(fd).st_ino == os.stat(fifo).st_ino
    finally:
        os.close(fd)
    (tmp_path / "file").write_text("x")
    fd, mode = open_input(str(tmp_path / "file"))
    try:
        assert stat.S_ISREG(mode) and os.read(fd, 10) == b"x"
    finally:
        os.close(fd)


def test_an_input_that_is_a_directory_is_refused_in_words(tmp_path: pathlib.Path) -> None:
    with pytest.raises(IsADirectoryError) as raised:
        open_input(str(tmp_path))
    error = raised.value
    assert (error.errno, error.strerror, error.filename) == (
        errno.EISDIR,
        "it is a directory, not a file",
        str(tmp_path),
    )


def _nested(depth: int, leaf: object) -> object:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def test_safe_value_keeps_two_hundred_levels_and_cuts_the_next() -> None:
    assert safe_value(_nested(200, "\udcff")) == _nested(200, "\\xff")
    assert safe_value(_nested(201, "x")) == _nested(201, None)
    assert safe_value({"k\udce9": _nested(198, ("t",))}) == {"k\\xe9": _nested(198, ["t"])}
    assert safe_value({"k": _nested(200, 1)}) == {"k": _nested(200, None)}
