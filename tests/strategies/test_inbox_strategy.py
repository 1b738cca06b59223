"""The ``inbox`` strategy module (docs/STRATEGIES.md): the report of a delivery, and
:func:`inbox` passing the save file and both configured byte limits on to the pickup."""

from __future__ import annotations

import os
import pathlib
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from scoutd import Aborted, PromptConfig
from scoutd.inbox import Pickup
from scoutd.inbox.aborted import clear, held
from scoutd.strategies.base import InboxCall
from scoutd.strategies.inbox import (
    Redelivery,
    deliver,
    inbox,
    inbox_dir,
    write_abort,
    write_notice,
)

_CONTENTS = st.one_of(st.text(max_size=8), st.sampled_from([None, 3, ["part"], {"type": "text"}]))
_MESSAGES = st.lists(
    st.one_of(
        st.fixed_dictionaries({"role": st.sampled_from(["user", "tool"]), "content": _CONTENTS}),
        st.just({"role": "assistant"}),
    ),
    max_size=5,
)


def _chars(messages: list[Any]) -> int:
    """Characters of every string ``content`` (docs/STRATEGIES.md, the report)."""
    return sum(len(m["content"]) for m in messages if isinstance(m.get("content"), str))


@given(_MESSAGES, st.lists(st.text(max_size=6), max_size=4))
def test_the_report_counts_characters_before_and_after(
    messages: list[Any], notices: list[str]
) -> None:
    event("text before" if _chars(messages) else "no text before")
    out, report = deliver(messages, Pickup(list(notices)))
    assert report.chars_before == _chars(messages)
    assert report.chars_after == _chars(messages) + sum(map(len, notices))
    assert report.inbox_delivered == len(notices)
    assert report.strategy == "inbox"
    assert out == [*messages, *({"role": "user", "content": text} for text in notices)]
    assert (report.calls_kept, report.outputs_kept, report.notice) == (0, 0, False)


def test_an_abort_takes_no_notice() -> None:
    with pytest.raises(Aborted) as caught:
        deliver([], Pickup(["not delivered"], "stop"))
    assert caught.value.reason == "stop"


def _save(tmp_path: pathlib.Path, notices: list[str]) -> str:
    save_file = str(tmp_path / "agent.chat")
    for n, text in enumerate(notices):
        write_notice(save_file, text, name=f"{n:02d}")
    return save_file


def test_inbox_delivers_the_notices_of_the_save_file(tmp_path: pathlib.Path) -> None:
    save_file = _save(tmp_path, ["first", "second"])
    messages = [{"role": "user", "content": "go"}]
    out, report = inbox(messages, PromptConfig(), save_file=save_file)
    assert out == [
        {"role": "user", "content": "go"},
        {"role": "user", "content": "first"},
        {"role": "user", "content": "second"},
    ]
    assert (report.inbox_delivered, report.chars_before, report.chars_after) == (2, 2, 13)
    assert os.listdir(inbox_dir(save_file)) == []


def test_inbox_without_a_save_file_delivers_nothing(tmp_path: pathlib.Path) -> None:
    _save(tmp_path, ["waiting"])
    out, report = inbox([], PromptConfig())
    assert out == [] and report.inbox_delivered == 0
    assert inbox([], PromptConfig(), save_file=None)[0] == []


def test_inbox_cuts_one_notice_at_inbox_max_bytes(tmp_path: pathlib.Path) -> None:
    save_file = _save(tmp_path, ["0123456789ABCDEF", "short"])
    config = PromptConfig(inbox_max_bytes=10, inbox_max_total_bytes=1000)
    out, report = inbox([], config, save_file=save_file)
    assert [m["content"] for m in out] == [
        "0123456789\n[scoutd: notice truncated at 10 of 16 bytes]",
        "short",
    ]
    assert report.inbox_delivered == 2


_NOTE = "\n[scoutd: notice truncated at"


@pytest.mark.parametrize("size", [10, 30])
def test_bytes_that_are_not_utf8_count_as_the_bytes_delivered(
    tmp_path: pathlib.Path, size: int
) -> None:
    """Each byte that is not UTF-8 is delivered as U+FFFD (3 bytes): the limits count those.

    A notice of ``size`` bytes 0xFF under ``inbox_max_bytes`` = 10 was delivered
    as 30 bytes (3 times the limit), and one call's total went 3 times over too.
    """
    save_file = _save(tmp_path, ["\udcff" * size, "\udcff" * size, "\udcff" * size])
    config = PromptConfig(inbox_max_bytes=10, inbox_max_total_bytes=20)
    out, _ = inbox([], config, save_file=save_file)
    texts = [m["content"] for m in out]
    assert texts[0] == "\ufffd" * 3 + f"{_NOTE} 10 of {size} bytes]"
    heads = [text.split(_NOTE)[0] for text in texts]
    assert all(set(head) == {"\ufffd"} and len(head.encode()) <= 10 for head in heads)
    assert sum(len(head.encode()) for head in heads) <= 20
    out, _ = inbox([], PromptConfig(), save_file=save_file)  # nothing lost: the rest waited
    assert len(texts) + len(out) == 3


def test_inbox_leaves_what_passes_inbox_max_total_bytes_for_the_next_call(
    tmp_path: pathlib.Path,
) -> None:
    save_file = _save(tmp_path, ["aaaaa", "bbbbb", "ccccc"])
    config = PromptConfig(inbox_max_bytes=100, inbox_max_total_bytes=8)
    out, report = inbox([], config, save_file=save_file)
    # 5 bytes, then the 3 bytes left of the budget; the third notice waits
    assert [m["content"] for m in out] == [
        "aaaaa",
        "bbb\n[scoutd: notice truncated at 3 of 5 bytes]",
    ]
    assert report.inbox_delivered == 2
    out, report = inbox([], config, save_file=save_file)
    assert [m["content"] for m in out] == ["ccccc"]


def test_inbox_cuts_an_abort_reason_at_inbox_max_bytes(tmp_path: pathlib.Path) -> None:
    save_file = _save(tmp_path, ["stays"])
    write_abort(save_file, "stop the run now")
    with pytest.raises(Aborted) as caught:
        inbox([], PromptConfig(inbox_max_bytes=8, inbox_max_total_bytes=1000), save_file=save_file)
    assert caught.value.reason.startswith("stop the")
    assert "run now" not in caught.value.reason
    assert held(save_file) == caught.value.reason  # the chat stays aborted with it
    clear(save_file)
    out, _ = inbox([], PromptConfig(), save_file=save_file)
    assert [m["content"] for m in out] == ["stays"]


def test_redelivered_notices_come_first_and_count_against_the_budget(
    tmp_path: pathlib.Path,
) -> None:
    save_file = _save(tmp_path, ["aaaaa", "bbbbb"])
    config = PromptConfig(inbox_max_bytes=100, inbox_max_total_bytes=9)
    redelivery = Redelivery(("é é",))  # 5 bytes of UTF-8: 4 left for the inbox
    call = InboxCall(redelivery=redelivery)
    out, report = inbox([], config, save_file=save_file, call=call)
    again, _ = inbox([], config, save_file=save_file, call=call)  # the carried ones went once
    assert [m["content"] for m in out] == [
        "é é",
        "aaaa\n[scoutd: notice truncated at 4 of 5 bytes]",
    ]
    assert report.inbox_delivered == 2
    assert [m["content"] for m in again] == ["bbbbb"]
    assert redelivery.delivered == [m["content"] for m in [*out, *again]]
    assert redelivery.carried == ()


def test_an_abort_outranks_the_notices_to_redeliver(tmp_path: pathlib.Path) -> None:
    save_file = _save(tmp_path, [])
    write_abort(save_file, "stop")
    redelivery = Redelivery(("again",))
    with pytest.raises(Aborted):
        inbox([], PromptConfig(), save_file=save_file, call=InboxCall(redelivery=redelivery))
    assert redelivery.carried == ("again",) and redelivery.delivered == []
