"""The worker processes of ``scripts/chaos-inbox``: the producer and the library consumer.

``chaos-inbox _produce``: drop numbered notices into one inbox. ``chaos-inbox
_consume`` (kill mode) and ``_race`` (race mode): call the ``inbox`` strategy in
a loop and append what it delivered to a log, a whole call's deliveries at once.
"""

from __future__ import annotations

import os
import random
import sys
import time

from chaos_inbox_harness import IDLE_SLEEP, visible

from scoutd.config import PromptConfig
from scoutd.errors import Aborted, StillAborted
from scoutd.strategies.inbox import inbox, inbox_dir, write_notice


def produce(save_file: str, count: int, rate: float, prefix: str) -> int:
    """Drop ``count`` notices ``notice N`` at ``rate`` per second (0: as fast as possible)."""
    started = time.monotonic()
    for seq in range(count):
        name = None if not prefix else f"{prefix}-{seq:07d}.txt"
        write_notice(save_file, f"notice {seq:07d}", name=name)
        if rate > 0:
            delay = started + (seq + 1) / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
    print("done", flush=True)
    return 0


def consume(
    save_file: str, log_path: str, stop_path: str, max_seconds: float, race: bool, pause: float
) -> int:
    """Call the inbox strategy until told to stop; append what it delivered to ``log_path``.

    Each call's deliveries go out in one ``write`` on an O_APPEND descriptor, so a
    SIGKILL never leaves half a line. In race mode, wait for ``go`` on stdin first
    and log consumed aborts as ``A<TAB>reason``. ``pause``: sleep up to that many
    seconds (uniformly) after each call, so that the daemon's watcher gets its chances.
    """
    config = PromptConfig()
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    print("ready", flush=True)
    if race and sys.stdin.readline().strip() != "go":
        return 2
    directory = inbox_dir(save_file)
    deadline = time.monotonic() + max_seconds
    while time.monotonic() < deadline:
        try:
            messages, _ = inbox([], config, save_file=save_file)
        except StillAborted:  # the chat's marker, until the driver clears it: nothing taken
            time.sleep(random.uniform(0, pause))
            continue
        except Aborted as exc:
            os.write(fd, f"A\t{exc.reason}\n".encode())
            time.sleep(random.uniform(0, pause))
            continue
        if messages:
            tag = "N\t" if race else ""
            os.write(fd, "".join(f"{tag}{m['content']}\n" for m in messages).encode())
            time.sleep(random.uniform(0, pause))
            continue
        if os.path.exists(stop_path) and not visible(directory):
            break
        time.sleep(IDLE_SLEEP)
    os.close(fd)
    return 0
