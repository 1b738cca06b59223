"""What ``scoutd inbox`` prints, and its ``--json`` record, for listings built by hand.

Each expected line and record is written out here in full, so that any change to
what an operator reads (or a script parses) shows.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from scoutd.inbox import (
    list_inbox,
    listing_lines,
    listing_record,
    write_abort,
    write_notice,
)
from scoutd.inbox import listing as listing_module
from scoutd.inbox.listing import InboxEntry, InboxListing
from scoutd.inbox.pickup import selected

# 2023-11-14 22:13:20.123456789 UTC, and the same a second and a half later
T1 = 1_700_000_000_123_456_789
T2 = 1_700_000_001_623_000_000
ROOT = pathlib.Path(__file__).resolve().parents[2]

NOTICES = [
    InboxEntry("a.txt", None, 5, T1),
    InboxEntry("longer-name.txt", None, 123456, T2),
]
IGNORED = (InboxEntry(".tmp-1-ab", None, 3, T1), InboxEntry("sub", "a directory", 4096, T2))


def test_a_missing_inbox_says_nothing_is_pending() -> None:
    listing = InboxListing("/chats/run.inbox", False, [])
    assert listing_lines(listing) == ["no inbox at /chats/run.inbox: nothing pending"]
    assert listing_record(listing) == {
        "inbox": "/chats/run.inbox",
        "exists": False,
        "abort": None,
        "notices": [],
        "ignored": [],
    }


def test_notices_line_up_with_their_sizes_and_times_and_the_ignored_go_last() -> None:
    listing = InboxListing("/chats/run.inbox", True, NOTICES, ignored=IGNORED)
    assert listing_lines(listing) == [
        "inbox /chats/run.inbox",
        "2 notices pending, in delivery order",
        "  a.txt                    5 bytes  2023-11-14T22:13:20.123Z",
        "  longer-name.txt     123456 bytes  2023-11-14T22:13:21.623Z",
        "ignored (never delivered):",
        "  .tmp-1-ab  (hidden)",
        "  sub  (a directory)",
    ]
    assert listing_record(listing) == {
        "inbox": "/chats/run.inbox",
        "exists": True,
        "abort": None,
        "notices": [
            {
                "name": "a.txt",
                "kind": "a regular file",
                "bytes": 5,
                "mtime": "2023-11-14T22:13:20.123Z",
            },
            {
                "name": "longer-name.txt",
                "kind": "a regular file",
                "bytes": 123456,
                "mtime": "2023-11-14T22:13:21.623Z",
            },
        ],
        "ignored": [
            {
                "name": ".tmp-1-ab",
                "kind": "a regular file",
                "bytes": 3,
                "mtime": "2023-11-14T22:13:20.123Z",
            },
            {
                "name": "sub",
                "kind": "a directory",
                "bytes": 4096,
                "mtime": "2023-11-14T22:13:21.623Z",
            },
        ],
    }


def test_one_notice_is_one_and_none_is_said() -> None:
    one = InboxListing("/i", True, NOTICES[:1])
    assert listing_lines(one)[1:] == [
        "1 notice pending, in delivery order",
        "  a.txt          5 bytes  2023-11-14T22:13:20.123Z",
    ]
    assert listing_lines(InboxListing("/i", True, [])) == ["inbox /i", "no notices pending"]


def test_each_kind_of_abort_says_what_reason_it_gives() -> None:
    regular = InboxEntry("abort", None, 9, T1)
    cases = [
        (regular, "stop now", "'stop now'"),
        (regular, "", "no reason"),
        (regular, None, "unreadable: a generic reason"),
        (InboxEntry("abort", "a FIFO", 0, T1), None, "it is a FIFO, never read: a generic reason"),
    ]
    for entry, reason, why in cases:
        listing = InboxListing("/i", True, [], entry, reason)
        assert listing_lines(listing) == [
            "inbox /i",
            f"abort pending ({why}): the next pickup aborts; notices stay",
            "no notices pending",
        ]
        record = listing_record(listing)["abort"]
        assert record == {
            "name": "abort",
            "kind": "a regular file" if entry.kind is None else entry.kind,
            "bytes": entry.size,
            "mtime": "2023-11-14T22:13:20.123Z",
            "reason": reason,
        }


def test_hostile_names_and_reasons_are_escaped_in_lines_and_records() -> None:
    """A name the agent chose cannot move the cursor or forge a line; bytes that are
    not UTF-8 show as ``\\xNN`` in both forms, and the record stays valid JSON."""
    name = "evil\x1b[2J\nforged.txt"
    undecodable = os.fsdecode(b"caf\xe9.txt")
    listing = InboxListing(
        os.fsdecode(b"/chats/\xff.inbox"),
        True,
        [InboxEntry(name, None, 1, T1), InboxEntry(undecodable, None, 2, T1)],
        InboxEntry("abort", None, 4, T1),
        os.fsdecode(b"why \xfe"),
    )
    lines = listing_lines(listing)
    assert lines[0] == "inbox /chats/\\xff.inbox"
    assert lines[1] == "abort pending ('why \\\\xfe'): the next pickup aborts; notices stay"
    assert lines[3].startswith("  evil\\x1b[2J\\x0aforged.txt  ")
    assert lines[4].startswith("  caf\\xe9.txt")
    assert all("\x1b" not in line and "\n" not in line for line in lines)
    record = listing_record(listing)
    json.dumps(record)  # no lone surrogate: it encodes
    assert record["inbox"] == "/chats/\\xff.inbox"
    assert record["abort"]["reason"] == "why \\xfe"
    assert [n["name"] for n in record["notices"]] == [name, "caf\\xe9.txt"]


def test_the_command_prints_the_same_record_as_json(tmp_path: pathlib.Path) -> None:
    save_file = str(tmp_path / "run.chat")
    write_notice(save_file, "hello", name="n.txt")
    write_abort(save_file, "enough")
    done = subprocess.run(
        [sys.executable, "-m", "scoutd", "inbox", "--json", save_file],
        capture_output=True,
        timeout=60,
        cwd=ROOT,
        check=True,
    )
    assert json.loads(done.stdout) == listing_record(list_inbox(save_file))
    assert json.loads(done.stdout)["abort"]["reason"] == "enough"


def test_a_missing_inbox_is_false_in_the_record_not_null(tmp_path: pathlib.Path) -> None:
    record = listing_record(list_inbox(str(tmp_path / "run.chat")))
    assert record["exists"] is False and record["notices"] == []


def test_notices_are_listed_in_the_byte_order_of_their_names(tmp_path: pathlib.Path) -> None:
    """Bytes that are not UTF-8 sort by their byte (``\\xff`` last), not by the code
    point that stands for them in Python (below an emoji's)."""
    save_file = str(tmp_path / "run.chat")
    for name in (os.fsdecode(b"\xff.txt"), "\U0001f600.txt", "b.txt", "B.txt"):
        write_notice(save_file, "x", name=name)
    names = [entry.name for entry in list_inbox(save_file).notices]
    assert [os.fsencode(name) for name in names] == [
        b"B.txt",
        b"b.txt",
        "\U0001f600.txt".encode(),
        b"\xff.txt",
    ]


def test_an_entry_taken_while_listed_is_skipped_and_the_rest_still_listed(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another consumer takes the first entry the listing meets, between the
    directory's scan and its ``lstat``: that one is left out, the others stay."""
    save_file = str(tmp_path / "run.chat")
    for name in ("a.txt", "b.txt", "c.txt"):
        write_notice(save_file, name, name=name)
    taken: list[str] = []

    def taken_first(entry: os.DirEntry[str]) -> str | None:
        if not taken:
            taken.append(entry.name)
            os.unlink(entry.path)
        return selected(entry)

    monkeypatch.setattr(listing_module, "selected", taken_first)
    names = [entry.name for entry in list_inbox(save_file).notices]
    assert len(taken) == 1
    assert names == sorted({"a.txt", "b.txt", "c.txt"} - set(taken))


def test_a_long_abort_reason_is_cut_with_a_note_of_its_size(tmp_path: pathlib.Path) -> None:
    save_file = str(tmp_path / "run.chat")
    write_abort(save_file, "r" * 5000)
    reason = list_inbox(save_file).abort_reason
    assert reason == "r" * 4096 + "\n[scoutd: notice truncated at 4096 of 5000 bytes]"


def test_the_record_has_the_shape_docs_operations_shows() -> None:
    """docs/OPERATIONS.md's example of ``scoutd inbox --json`` has the record's keys."""
    text = (ROOT / "docs" / "OPERATIONS.md").read_text()
    after = text.index("`scoutd inbox --json SAVE_FILE`")
    start = text.index("```json\n", after) + len("```json\n")
    documented = json.loads(text[start : text.index("```", start)])
    example = InboxListing("/i", True, NOTICES, InboxEntry("abort", None, 1, T1), "r", IGNORED)
    record = listing_record(example)
    assert documented.keys() == record.keys()
    assert documented["abort"].keys() == record["abort"].keys()
    for key in ("notices", "ignored"):
        assert {tuple(entry) for entry in documented[key]} == {tuple(e) for e in record[key]}
