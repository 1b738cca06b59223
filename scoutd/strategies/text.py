"""The truncation marker (docs/STRATEGIES.md, tool messages): pure string helpers."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import msgspec

__all__ = ["ENCODE_ERRORS", "json_text", "shorten_string", "truncate_string"]

# What encoding a value JSON cannot hold raises (msgspec's and the json module's).
ENCODE_ERRORS = (msgspec.EncodeError, TypeError, UnicodeError, ValueError, OverflowError)

# What stands for the digest in a text made only to be measured (the same length).
_NO_DIGEST = "0" * 5
_lenient = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=repr).encode


def truncate_string(s: str, max: int = 150) -> str:
    """Cut the middle of ``s`` out and put a marker with its length and MD5 there.

    ``"head<...LEN - md5[:5]...>tail"``; ``s`` itself when it already fits. Lengths
    are in code points. Raises ``ValueError`` when ``max`` is too small to hold
    the marker.
    """
    return _truncated(s, max, True)


def _truncated(s: str, max: int, hashed: bool) -> str:
    """:func:`truncate_string`; ``hashed`` False: the digest's five hex digits written
    as zeros, a text of the same length without hashing ``s`` (for measuring it)."""
    length = len(s)
    if length <= max:
        return s
    if hashed:
        data = s.encode("utf-8", "surrogatepass")
        # pragma below: its mutants only change usedforsecurity (False, None or absent
        # differ only on a FIPS-restricted build, where the marker is no security use)
        digest = hashlib.md5(data, usedforsecurity=False).hexdigest()  # pragma: no mutate
    else:
        digest = _NO_DIGEST
    middle = f"<...{length} - {digest[:5]}...>"
    keep = (max - len(middle)) // 2
    if keep < 1:
        raise ValueError(
            f"truncate_string: max={max} cannot hold the marker {middle!r} plus one character"
        )
    return s[: keep - 1] + middle + s[-keep:]


def shorten_string(
    s: str, size: int = 200, warning: str = "Truncated", *, hashed: bool = True
) -> str:
    """Truncate ``s`` to about ``size`` code points and say so in a prefix.

    ``"Truncated (LEN): ..."`` when anything was cut, else ``s`` unchanged.
    ``hashed`` False: a text of the same length whose digest digits are zeros,
    cheaper when only its size is wanted.
    """
    cut = _truncated(s, size, hashed)
    if len(cut) < len(s):
        return f"{warning} ({len(s)}): {cut}"
    return s


def json_text(value: Any) -> str:
    """Compact JSON text of any value, for measuring what JSON cannot hold.

    An in-process caller's message may hold a lone surrogate (kept as it is),
    a key that is not a string (written as ``str(key)``) or an object JSON
    has no form for (written as its ``repr`` string): its size is still
    counted, never an exception (docs/FORMATS.md: such a message passes
    through). Nesting past the recursion limit raises ``RecursionError``,
    which ``prepare`` refuses as invalid messages.
    """
    return _lenient(_keyed(value))


def _keyed(value: Any) -> Any:
    if isinstance(value, dict):
        # a string key (a subclass too) is written as its characters, as encoders do
        return {k if isinstance(k, str) else str(k): _keyed(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_keyed(v) for v in value]
    return value
