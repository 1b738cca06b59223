"""The truncation helpers on what the golden vectors do not hold."""

from __future__ import annotations

import hashlib

import pytest

from scoutd.strategies.text import json_text, shorten_string, truncate_string


def test_a_lone_surrogate_is_truncated_and_hashed_as_is() -> None:
    """Python strings may hold lone surrogates (decoded with surrogateescape, or
    built by hand): the marker's MD5 is over their surrogatepass bytes."""
    text = "a\ud800" * 200
    digest = hashlib.md5(text.encode("utf-8", "surrogatepass")).hexdigest()[:5]
    cut = truncate_string(text, 150)
    assert f"<...400 - {digest}...>" in cut
    assert cut.startswith("a\ud800") and len(cut) <= 150


def test_truncate_string_defaults_to_150() -> None:
    assert truncate_string("x" * 150) == "x" * 150
    assert truncate_string("x" * 151) == truncate_string("x" * 151, 150) != "x" * 151


def test_shorten_string_defaults_to_200_and_the_word_truncated() -> None:
    text = "x" * 201
    assert shorten_string(text) == shorten_string(text, 200, "Truncated")
    assert shorten_string(text).startswith("Truncated (201): ")
    assert shorten_string("x" * 200) == "x" * 200
    assert shorten_string(text, warning="Cut").startswith("Cut (201): ")


@pytest.mark.parametrize("size", [150, 151, 152, 153])
def test_truncation_keeps_as_much_head_as_tail_within_the_size(size: int) -> None:
    text = "".join(chr(ord("a") + n % 26) for n in range(1000))
    cut = truncate_string(text, size)
    head, _, rest = cut.partition("<...")
    tail = rest.partition("...>")[2]
    assert len(cut) <= size
    assert len(head) + 1 == len(tail) and text.startswith(head) and text.endswith(tail)


def test_a_string_that_fits_is_returned_unchanged() -> None:
    assert truncate_string("x" * 150, 150) == "x" * 150
    with pytest.raises(ValueError, match="max=10"):
        truncate_string("x" * 50, 10)


class _Renamed(str):
    """A string key whose ``str()`` is another text: JSON writes its characters."""

    def __str__(self) -> str:
        return "renamed"


def test_json_text_writes_a_string_key_as_its_characters_and_others_as_str() -> None:
    """What the text measured holds is what an encoder sends: a key that is a string
    (a subclass too) as its own characters, any other key as its ``str()``."""
    assert json_text({_Renamed("key"): [{_Renamed("k2"): 1}]}) == '{"key":[{"k2":1}]}'
    assert json_text({1: (None, {2.5: "x"})}) == '{"1":[null,{"2.5":"x"}]}'
    assert json_text({None: 1, False: 2}) == '{"None":1,"False":2}'  # str(), as documented
