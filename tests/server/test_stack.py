"""A daemon started on a small stack refuses a deeply nested request; it does not crash.

msgspec recurses in C up to the interpreter's recursion limit, which counts
levels and trusts the thread to have the usual 8 MiB of stack. ``scoutd serve``
gives itself that much (``scoutd/server/stack.py``): before, started under a
256 KiB stack limit, it died of ``SIGSEGV`` on a line nested just under the
limit (Python 3.11: about 975 levels; on 3.13 a 2 MiB stack was already too small).
Real daemon process, started through ``prlimit``.
"""

from __future__ import annotations

import shutil

import pytest

from scoutd.server.stack import STACK_BYTES

from ..support.daemon import Daemon
from ..support.nesting import decoder_limit, too_deep
from .test_error_table_deep import TOO_DEEP, WAIT, _deep_line

SMALL = 256 * 1024

pytestmark = pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs prlimit")


@pytest.mark.parametrize("pad", [0, 300_000], ids=["on the event loop", "in a worker"])
def test_a_daemon_on_a_small_stack_answers_a_deeply_nested_request(pad: int) -> None:
    """Just under the decoder's limit is decoded (then refused or served), past it
    refused; the daemon goes on, and says nothing of its stack."""
    with Daemon(argv_prefix=["prlimit", f"--stack={SMALL}:"]) as d, d.connect() as c:
        # up to the limit, which the daemon meets a few levels from where this
        # process measured it: the deepest it still decodes uses the most stack
        for rid, depth in enumerate(range(decoder_limit() - 60, decoder_limit() + 10, 5)):
            c.send_raw(_deep_line(rid, depth, pad))
            # an answer may hold the message back as deep: its start only
            head = c.read_line(WAIT)[:40].decode()
            assert head.startswith(f'{{"jsonrpc":"2.0","id":{rid},'), head
        c.send_raw(_deep_line("past", too_deep(), pad))
        reply = c.recv(WAIT)
        assert reply["id"] == "past" and reply["error"]["data"] == TOO_DEEP, reply
        assert "result" in c.call("status")
        assert d.proc is not None and d.proc.poll() is None
    assert "stack limit" not in d.log()


def test_a_stack_the_daemon_cannot_raise_is_said_at_start() -> None:
    """A hard limit under 8 MiB: the daemon serves, and its log says what it risks."""
    with Daemon(argv_prefix=["prlimit", f"--stack={SMALL}:{SMALL}"]) as d, d.connect() as c:
        assert "result" in c.call("status")
        assert "the stack limit is 256 KiB (hard)" in d.log()


def _stack_limits(pid: int) -> tuple[str, str]:
    """The soft and hard stack limits of process ``pid``, as /proc writes them."""
    with open(f"/proc/{pid}/limits", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("Max stack size"):
                soft, hard = line.split()[3:5]
                return soft, hard
    raise AssertionError("no stack limit in /proc")


MIB = 1024 * 1024


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        (f"{SMALL}:unlimited", (str(STACK_BYTES), "unlimited")),  # raised to 8 MiB, no more
        (f"{16 * MIB}:unlimited", (str(16 * MIB), "unlimited")),  # more: never lowered
        ("unlimited:unlimited", ("unlimited", "unlimited")),
        (f"{SMALL // 2}:{SMALL}", (str(SMALL), str(SMALL))),  # as far as the hard limit goes
        (f"{SMALL}:{STACK_BYTES}", (str(STACK_BYTES), str(STACK_BYTES))),  # enough: no warning
    ],
)
def test_the_daemon_raises_its_stack_to_8_mib_and_never_lowers_it(
    given: str, kept: tuple[str, str]
) -> None:
    with Daemon(argv_prefix=["prlimit", f"--stack={given}"]) as d, d.connect() as c:
        assert "result" in c.call("status")
        assert d.proc is not None  # prlimit runs the daemon in its own process
        assert _stack_limits(d.proc.pid) == kept
        warned = [line for line in d.log().splitlines() if "stack limit" in line]
    if kept[1] == str(SMALL):
        [line] = warned
        assert line.endswith(
            "WARNING scoutd.server: the stack limit is 256 KiB (hard), under the 8192 KiB"
            " a request nested as deep as this Python decodes may need: such a request"
            " can crash the daemon (raise LimitSTACK= or ulimit -s)"
        ), line
    else:
        assert warned == []
