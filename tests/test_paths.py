"""Safe rendering of paths and text: always encodable, valid text untouched."""

from __future__ import annotations

import os

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from scoutd import protocol
from scoutd.paths import display_path, safe_text, safe_value


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
