"""A process umask for the length of a ``with`` block (tests of file modes)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def umask(mask: int) -> Iterator[None]:
    """Set the process umask to ``mask``, and back when the block ends."""
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)
