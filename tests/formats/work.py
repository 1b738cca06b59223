"""An operation counter for complexity tests: lines of scoutd's own code run.

Wall-clock time depends on the machine and its load; the number of lines the
interpreter runs in scoutd's modules for one call does not. A path that is
linear in its input runs about four times the lines for four times the input;
a quadratic one about sixteen times. Work done inside C (``list.index``,
``in`` on a list, slicing) is not counted, so the tests pair this with inputs
built to make such work grow too (``scoutd/testing/worst.py``), and the bench
measures the CPU time itself (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import scoutd

_ROOT = os.path.dirname(os.path.abspath(scoutd.__file__)) + os.sep


def lines_run(call: Callable[[], Any]) -> int:
    """How many lines of the ``scoutd`` package ``call()`` runs (in this thread)."""
    count = 0

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return local

    def global_(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename.startswith(_ROOT) else None

    previous = sys.gettrace()
    sys.settrace(global_)
    try:
        call()
    finally:
        sys.settrace(previous)
    return count


def growth(work: Callable[[int], int], n: int, factor: int = 4) -> float:
    """``work(factor * n) / work(n)`` divided by ``factor``: about 1 for a linear path,
    about ``factor`` for a quadratic one."""
    return work(factor * n) / work(n) / factor
