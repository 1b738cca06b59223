"""The C stack a daemon runs on: enough that a request nested as deep as the
interpreter can decode is refused with an error, never a crash.

msgspec decodes and encodes nested JSON by recursing in C, until the
interpreter's C recursion limit stops it (Python sets that limit, not scoutd:
about 1,000 levels on 3.11, 1,500 on 3.12, 10,000 on 3.13). The limit counts
levels, not bytes: it trusts the thread to have the usual 8 MiB of stack. On
less, a line nested just under the limit overflows the stack first: with a
2 MiB stack (``ulimit -s 2048``) a Python 3.13 daemon died of ``SIGSEGV`` on
one request nested 9,990 levels, and every client lost it; on 256 KiB a 3.11
daemon did on about 975. ``scoutd serve`` therefore gives its main thread
(through its soft ``RLIMIT_STACK``, which the kernel checks as the stack grows)
and every thread it starts 8 MiB (docs/OPERATIONS.md, "Logs": "The stack").
"""

from __future__ import annotations

import resource
import threading

__all__ = ["STACK_BYTES", "ensure_stack"]

# The stack every thread of the daemon gets: the usual default of Linux and
# systemd, about twice what the deepest line Python 3.13 decodes needs.
STACK_BYTES = 8 * 1024 * 1024


def ensure_stack() -> str | None:
    """Give the main thread and the threads started from now on ``STACK_BYTES`` of
    stack where they had less; return why not (a hard limit below it), else None.

    Process-wide: for ``scoutd serve``, never for a program that embeds the daemon.
    """
    threading.stack_size(STACK_BYTES)
    soft, hard = resource.getrlimit(resource.RLIMIT_STACK)
    if soft == resource.RLIM_INFINITY or soft >= STACK_BYTES:
        return None
    if hard != resource.RLIM_INFINITY and hard < STACK_BYTES:
        resource.setrlimit(resource.RLIMIT_STACK, (hard, hard))
        return (
            f"the stack limit is {hard // 1024} KiB (hard), under the"
            f" {STACK_BYTES // 1024} KiB a request nested as deep as this Python decodes"
            " may need: such a request can crash the daemon (raise LimitSTACK= or ulimit -s)"
        )
    resource.setrlimit(resource.RLIMIT_STACK, (STACK_BYTES, hard))
    return None
