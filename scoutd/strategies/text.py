"""The truncation marker (docs/STRATEGIES.md, tool messages): pure string helpers."""

from __future__ import annotations

import hashlib

__all__ = ["shorten_string", "truncate_string"]


def truncate_string(s: str, max: int = 150) -> str:
    """Cut the middle of ``s`` out and put a marker with its length and MD5 there.

    ``"head<...LEN - md5[:5]...>tail"``; ``s`` itself when it already fits. Lengths
    are in code points. Raises ``ValueError`` when ``max`` is too small to hold
    the marker.
    """
    length = len(s)
    if length <= max:
        return s
    data = s.encode("utf-8", "surrogatepass")
    # pragma below: its mutants only change usedforsecurity (False, None or absent
    # differ only on a FIPS-restricted build, where the marker is no security use)
    digest = hashlib.md5(data, usedforsecurity=False).hexdigest()  # pragma: no mutate
    middle = f"<...{length} - {digest[:5]}...>"
    keep = (max - len(middle)) // 2
    if keep < 1:
        raise ValueError(
            f"truncate_string: max={max} cannot hold the marker {middle!r} plus one character"
        )
    return s[: keep - 1] + middle + s[-keep:]


def shorten_string(s: str, size: int = 200, warning: str = "Truncated") -> str:
    """Truncate ``s`` to about ``size`` code points and say so in a prefix.

    ``"Truncated (LEN): ..."`` when anything was cut, else ``s`` unchanged.
    """
    cut = truncate_string(s, size)
    if len(cut) < len(s):
        return f"{warning} ({len(s)}): {cut}"
    return s
