"""The text a file delivers: at most its byte limit, a character cut by the limit held back,
a character cut by the file's own end shown as a replacement (docs/TESTING.md, "The twelfth
round": no test had read either end of a cut character)."""

from __future__ import annotations

import os
import pathlib

import pytest

from scoutd.inbox.files import read_text

EURO = "€".encode()  # three bytes


def read(path: pathlib.Path, data: bytes, max_bytes: int) -> str:
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        return read_text(fd, len(data), max_bytes)
    finally:
        os.close(fd)


def test_a_character_the_file_itself_cuts_is_a_replacement(tmp_path: pathlib.Path) -> None:
    assert read(tmp_path / "f", b"ab" + EURO[:2], 100) == "ab\ufffd"


def test_a_character_the_limit_cuts_is_held_back(tmp_path: pathlib.Path) -> None:
    assert read(tmp_path / "f", b"ab" + EURO + b"cd", 4) == (
        "ab\n[scoutd: notice truncated at 4 of 7 bytes]"
    )


@pytest.mark.parametrize("limit", [1, 2, 3, 4, 5, 6])
def test_the_limit_counts_the_bytes_delivered(tmp_path: pathlib.Path, limit: int) -> None:
    """Against a plain oracle: the longest prefix of whole characters within the limit."""
    text = "a€b€"  # 1 + 3 + 1 + 3 bytes
    delivered = read(tmp_path / "f", text.encode(), limit)
    kept = max((text[:n] for n in range(len(text) + 1) if len(text[:n].encode()) <= limit), key=len)
    assert delivered == f"{kept}\n[scoutd: notice truncated at {limit} of 8 bytes]"


def test_a_file_longer_than_one_read_is_read_whole(tmp_path: pathlib.Path) -> None:
    data = b"x" * ((1 << 20) + 5)
    assert read(tmp_path / "f", data, len(data)) == data.decode()


@pytest.mark.parametrize("limit", [10, (1 << 20) + 10], ids=["one read", "two reads"])
def test_no_more_is_read_than_the_limit_needs(tmp_path: pathlib.Path, limit: int) -> None:
    """One byte past the limit tells that there was more: a huge file is not read whole."""
    path = tmp_path / "f"
    path.write_bytes(b"y" * (limit + 90))
    fd = os.open(path, os.O_RDONLY)
    try:
        read_text(fd, limit + 90, limit)
        assert os.lseek(fd, 0, os.SEEK_CUR) == limit + 1
    finally:
        os.close(fd)
