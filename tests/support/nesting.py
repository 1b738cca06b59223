"""How deep this interpreter lets JSON nest: the bound the tests of "nested too deeply" use.

scoutd sets no nesting bound of its own. msgspec's decoder and encoder stop at
the interpreter's C recursion limit, which Python sets, not scoutd: about
1,000 levels on Python 3.11, 1,500 on 3.12, 10,000 on 3.13
(docs/PROTOCOL.md, "Nesting"). A test of what is refused as too deep takes
its depths from here, so that it tests the same thing on every interpreter.
"""

from __future__ import annotations

import functools
import subprocess
import sys
import threading
from typing import Any

import msgspec

__all__ = ["decoder_limit", "nested", "too_deep"]

# Far past every limit above, and cheap to build: bisected below this.
_CEILING = 1 << 16


def _decodes(depth: int) -> bool:
    try:
        msgspec.json.decode(b"[" * depth + b"]" * depth)
    except RecursionError:
        return False
    return True


def _bisect() -> int:
    assert not _decodes(_CEILING), "the decoder takes any depth: no limit to test"
    low, high = 1, _CEILING  # low decodes, high does not
    while high - low > 1:
        middle = (low + high) // 2
        if _decodes(middle):
            low = middle
        else:
            high = middle
    return high


def _in_a_new_thread() -> int:
    found: list[int] = []
    thread = threading.Thread(target=lambda: found.append(_bisect()))
    thread.start()
    thread.join(60)
    assert found, "the measure did not end"
    return found[0]


@functools.cache
def decoder_limit() -> int:
    """The least depth of nested arrays the JSON decoder refuses, measured at the
    bottom of a new thread's stack: on Python 3.11 the limit counts the frames
    already on the stack too (a test's own, and pytest's, more under xdist),
    as a call made in a new thread (the client's, the daemon's) does not.

    Measured in a new interpreter, as a daemon started by a test has it: the
    limit follows ``sys.getrecursionlimit()``, which Hypothesis raises while it
    runs a test, so a measure taken here from inside one (a strategy's draw)
    would be remembered about twice too deep for every later test.
    """
    done = subprocess.run(
        [sys.executable, __file__], capture_output=True, text=True, timeout=60, check=True
    )
    return int(done.stdout)


def too_deep() -> int:
    """A depth every reader of this interpreter refuses, with room to spare (at least
    3,000: past the Python-level recursion limit too)."""
    return max(3_000, 2 * decoder_limit())


def nested(depth: int) -> Any:
    """A value nested ``depth`` lists deep."""
    value: Any = "deep"
    for _ in range(depth):
        value = [value]
    return value


if __name__ == "__main__":  # decoder_limit's measure, in a new interpreter
    print(_in_a_new_thread())
