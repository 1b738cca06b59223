"""Name rules of an inbox: delivery order is byte order, and arrival names sort in arrival order."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from scoutd.inbox import claim, inbox_dir, inbox_removed_dir, pick_up
from scoutd.inbox.files import lexists
from scoutd.inbox.names import MAX_NAMES, NAME_MAX, delivery_order, notice_names, numbered

# Plain visible file names, with and without extensions, some not valid UTF-8.
_PLAIN = st.text(
    alphabet=st.characters(blacklist_characters="/\0~", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=12,
).filter(lambda name: not name.startswith(".") and name != "abort")
NAMES = st.one_of(_PLAIN, st.builds(lambda stem, ext: f"{stem}.{ext}", _PLAIN, _PLAIN))


def _arrive(name: str, pending: list[str], times: int) -> list[str]:
    """Drop ``times`` notices called ``name`` into an inbox holding ``pending``."""
    arrived = []
    for _ in range(times):
        chosen = next(notice_names(name, pending))
        assert chosen not in pending
        pending.append(chosen)
        arrived.append(chosen)
    return arrived


@given(NAMES, st.integers(min_value=1, max_value=30))
def test_same_named_notices_sort_in_arrival_order(name: str, times: int) -> None:
    arrived = _arrive(name, [], times)
    assert arrived[0] == name
    assert sorted(arrived, key=delivery_order) == arrived


@given(NAMES, st.lists(st.integers(min_value=0, max_value=40), max_size=6), st.data())
def test_a_new_notice_sorts_after_every_pending_one_of_its_name(
    name: str, delivered: list[int], data: st.DataObject
) -> None:
    """Also after gaps (some delivered meanwhile), and whatever other names are pending."""
    arrived = _arrive(name, [], 40)
    pending = [arrived[i] for i in sorted(set(range(40)) - set(delivered))]
    new = next(notice_names(name, pending))
    assert new not in pending
    assert all(delivery_order(old) < delivery_order(new) for old in pending)
    unrelated = [o for o in data.draw(st.lists(NAMES, max_size=5)) if _unrelated(name, o)]
    assert next(notice_names(name, pending + unrelated)) == new


def _unrelated(name: str, other: str) -> bool:
    """Whether ``other`` is neither ``name`` nor one of its sequence names."""
    return next(notice_names(name, [other])) == name


def test_names_run_out_after_the_bound_instead_of_looping() -> None:
    names = list(notice_names("n.txt", ["n~99990.txt"]))
    assert names == [f"n~{n:05d}.txt" for n in range(99991, MAX_NAMES)]
    assert list(notice_names("n.txt", [f"n~{MAX_NAMES - 1:05d}.txt"])) == []


def test_the_plain_name_before_its_sequence_and_the_sequence_as_numbers() -> None:
    order = ["note.txt", "note~00001.txt", "note~00002.txt", "note~00010.txt", "note~00100.txt"]
    assert sorted(reversed(order), key=delivery_order) == order
    assert sorted(["note", "note~00002", "note~00001"], key=delivery_order) == [
        "note",
        "note~00001",
        "note~00002",
    ]


def test_delivery_order_compares_bytes_not_code_points() -> None:
    undecodable = os.fsdecode(b"\xff.txt")  # a lone surrogate in Python: U+DCFF
    emoji = "\U0001f600.txt"  # UTF-8 F0 9F 98 80: below 0xFF as bytes, above U+DCFF as text
    assert sorted([undecodable, emoji], key=delivery_order) == [emoji, undecodable]
    assert sorted([undecodable, emoji]) == [undecodable, emoji]  # what str order would do


def test_record_names_keep_their_extension() -> None:
    assert [numbered("note.txt", n) for n in range(3)] == ["note.txt", "note.1.txt", "note.2.txt"]
    assert numbered("abort", 1) == "abort.1"


def test_a_record_of_a_longest_name_is_named_again_not_left_as_a_claim(tmp_path: object) -> None:
    """Two notices of a 255-byte name: the second record was ``name.1``, too long,
    so it stayed a ``.claim-*`` entry, what a consumer killed mid-delivery leaves."""
    save_file = os.path.join(str(tmp_path), "a.chat")
    os.mkdir(inbox_dir(save_file))
    name = b"\xc3\xa9" * 125 + b"\xff.txt"  # 255 bytes, multi-byte and not UTF-8
    for text in (b"one", b"two"):
        path = os.path.join(os.fsencode(inbox_dir(save_file)), name)
        with open(path, "wb") as handle:
            handle.write(text)
        os.utime(path, (0, 0))
        assert pick_up(save_file, max_bytes=10, max_total_bytes=10).notices == [text.decode()]
    records = os.listdir(os.fsencode(inbox_removed_dir(save_file)))
    assert len(records) == 2 and not [r for r in records if r.startswith(b".")]
    assert all(len(r) <= NAME_MAX for r in records)


@given(NAMES, st.integers(min_value=1, max_value=MAX_NAMES))
def test_record_names_fit_a_file_name(stem: str, n: int) -> None:
    name = os.fsdecode(os.fsencode(stem * 255)[: NAME_MAX - 4]) + ".txt"  # the longest
    assert len(os.fsencode(numbered(name, n))) <= NAME_MAX
    assert numbered(name, n).endswith(f".{n}.txt")


@pytest.mark.parametrize("records", [0, 1, 2, 3, 100, 1000])
@pytest.mark.parametrize("gap", [None, 0, 1, 57])
def test_a_record_is_named_after_those_of_its_name_and_replaces_none(
    tmp_path: object, records: int, gap: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by halving (claim._first_free), the record still never replaces one and is
    the first free number when the numbers have no gap; with a gap, some free number."""
    save_file = os.path.join(str(tmp_path), "a.chat")
    os.mkdir(inbox_dir(save_file))
    removed = inbox_removed_dir(save_file)
    os.mkdir(removed)
    for n in range(records):
        with open(os.path.join(removed, numbered("status.txt", n)), "w") as handle:
            handle.write(f"old {n}")
    if gap is not None and gap < records:
        os.unlink(os.path.join(removed, numbered("status.txt", gap)))
    before = _texts(removed)
    path = os.path.join(inbox_dir(save_file), "status.txt")
    with open(path, "w") as handle:
        handle.write("new")
    os.utime(path, (0, 0))
    looks: list[str] = []

    def counted(name: str, dir_fd: int | None) -> bool:
        looks.append(name)
        return lexists(name, dir_fd)

    def link(source: str, target: str, **kwargs: Any) -> None:
        looks.append(target)
        real_link(source, target, **kwargs)

    real_link = os.link
    monkeypatch.setattr(claim, "lexists", counted)
    monkeypatch.setattr(os, "link", link)
    assert pick_up(save_file, max_bytes=10, max_total_bytes=10).notices == ["new"]
    # about 2 log2(n) looks and one link for the number, where trying each cost n links
    assert sum(name.startswith("status") for name in looks) <= 2 * records.bit_length() + 3
    after = _texts(removed)
    [added] = set(after) - set(before)
    assert after[added] == "new" and all(after[name] == text for name, text in before.items())
    if gap is None or gap >= records:
        assert added == numbered("status.txt", records)  # the plain linear answer


def _texts(directory: str) -> dict[str, str]:
    return {name: Path(directory, name).read_text() for name in os.listdir(directory)}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # 253 bytes: ".1.txt" fits exactly, nothing cut
        ("a" * 249 + ".txt", "a" * 249 + ".1.txt"),
        # 254 bytes: one byte over, one cut
        ("a" * 250 + ".txt", "a" * 249 + ".1.txt"),
        # 255 bytes: two over
        ("a" * 251 + ".txt", "a" * 249 + ".1.txt"),
        # a one-byte root before a 253-byte extension: the root goes whole
        ("r." + "e" * 252, ".1." + "e" * 252),
        # a 254-byte extension: the root goes, then the extension's last byte
        ("r." + "e" * 253, ".1." + "e" * 252),
        # no extension: the number goes at the end, the root cut for it
        ("a" * 255, "a" * 253 + ".1"),
    ],
)
def test_a_long_record_name_loses_the_end_of_its_root_and_no_more(name: str, expected: str) -> None:
    assert numbered(name, 1) == expected
    assert len(os.fsencode(numbered(name, 1))) == NAME_MAX


def test_a_root_cut_inside_a_character_keeps_the_bytes_before_the_cut() -> None:
    """The cut counts bytes; the half character left stands for its byte, as a name
    that is not UTF-8 does, and the record's name is those very bytes."""
    name = "é" * 125 + "x.txt"  # 255 bytes: 250 of "é", then 5
    cut = numbered(name, 7)
    assert os.fsencode(cut) == ("é" * 124).encode() + b"\xc3" + b".7.txt"


def _numbered_by_hand(name: bytes, n: int) -> bytes:
    """The record name by the rule's words: the root, the number, the extension, the
    root's end cut while too long, then the extension's end."""
    dot = name.rfind(b".")
    split = dot if dot > 0 and name[:dot].strip(b".") else len(name)
    root, ext, number = name[:split], name[split:], b".%d" % n
    while len(root) + len(number) + len(ext) > NAME_MAX and root:
        root = root[:-1]
    while len(root) + len(number) + len(ext) > NAME_MAX:
        ext = ext[:-1]
    return root + number + ext


@st.composite
def _raw_names(draw: st.DrawFn) -> bytes:
    """A file name's bytes, any length up to the longest, with or without a dot;
    a third of them at most 8 bytes short of the longest with a root of 1 to 3."""
    long_extension = draw(st.integers(0, 2)) == 0
    low = NAME_MAX - 8 if long_extension else 1
    size = draw(st.integers(low, NAME_MAX))
    body = draw(st.binary(min_size=size, max_size=size)).replace(b"/", b"_").replace(b"\0", b"_")
    at = draw(st.integers(1, min(3 if long_extension else size, size)))
    name = body[:at] + b"." + body[at + 1 :] if long_extension or draw(st.booleans()) else body
    assume(not name.startswith(b"."))
    return name


@given(_raw_names(), st.integers(min_value=1, max_value=MAX_NAMES))
def test_a_record_name_always_fits_and_cuts_only_what_it_must(name: bytes, n: int) -> None:
    """Any file name's bytes (not UTF-8 either), any extension's length."""
    record = os.fsencode(numbered(os.fsdecode(name), n))
    assert len(record) <= NAME_MAX
    assert record == _numbered_by_hand(name, n)
