"""The aborts the watcher claimed, kept for their chat's next session-less call: once each,
the newest reason, bounded, and lifted by an operator's clear."""

from __future__ import annotations

import threading
from functools import partial
from pathlib import Path

import anyio
import pytest

from scoutd.inbox.aborted import clear, mark
from scoutd.server.pending import MAX_PENDING_ABORTS, PendingAborts

pytestmark = pytest.mark.anyio


async def test_a_reason_is_given_once_and_none_was_never_kept() -> None:
    pending = PendingAborts()
    assert await pending.take("/c/a.inbox", None) is None
    pending.add("/c/a.inbox", "stop")
    assert await pending.take("/c/b.inbox", None) is None  # another chat's
    assert await pending.take("/c/a.inbox", None) == "stop"
    assert await pending.take("/c/a.inbox", None) is None  # given already


async def test_the_newest_reason_of_a_chat_wins() -> None:
    pending = PendingAborts()
    pending.add("/c/a.inbox", "first")
    pending.add("/c/a.inbox", "second")
    assert await pending.take("/c/a.inbox", None) == "second"


async def test_the_oldest_are_forgotten_past_the_bound_a_kept_one_made_new_again() -> None:
    pending = PendingAborts()
    for n in range(MAX_PENDING_ABORTS):
        pending.add(f"/c/{n}.inbox", f"stop {n}")
    pending.add("/c/0.inbox", "stop 0 again")  # the oldest, made the newest
    pending.add("/c/new.inbox", "stop new")  # one past the bound: the oldest goes
    assert await pending.take("/c/1.inbox", None) is None
    assert await pending.take("/c/0.inbox", None) == "stop 0 again"
    assert await pending.take("/c/2.inbox", None) == "stop 2"
    last = MAX_PENDING_ABORTS - 1
    assert await pending.take(f"/c/{last}.inbox", None) == f"stop {last}"
    assert await pending.take("/c/new.inbox", None) == "stop new"


@pytest.fixture
def marked(tmp_path: Path) -> tuple[str, PendingAborts]:
    """A chat whose marker stands, and its reason kept for its next session-less call."""
    save_file = str(tmp_path / "a.chat")
    mark(save_file, "stop")
    pending = PendingAborts()
    pending.add("inbox", "stop")
    return save_file, pending


async def test_a_reason_stands_while_the_chats_marker_does(
    marked: tuple[str, PendingAborts],
) -> None:
    save_file, pending = marked
    assert await pending.take("inbox", save_file) == "stop"


async def test_an_operators_clear_lifts_the_reason_kept(marked: tuple[str, PendingAborts]) -> None:
    save_file, pending = marked
    clear(save_file)
    assert await pending.take("inbox", save_file) is None  # served: cleared meanwhile
    assert await pending.take("inbox", save_file) is None  # and forgotten


async def test_a_marker_look_never_waits_for_the_threads_others_share(
    marked: tuple[str, PendingAborts],
) -> None:
    """The look for the marker runs on threads of its own: with every thread of the
    default pool taken (bounded here to 10 s), the chat's reason still comes."""
    save_file, pending = marked
    shared = anyio.to_thread.current_default_thread_limiter()
    total, shared.total_tokens = shared.total_tokens, 1
    release = threading.Event()
    holding = anyio.Event()

    def hold() -> None:  # the only thread of the default pool, until released
        anyio.from_thread.run_sync(holding.set)
        release.wait(30)

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(partial(anyio.to_thread.run_sync, hold, abandon_on_cancel=True))
            with anyio.fail_after(10):
                await holding.wait()
                assert await pending.take("inbox", save_file) == "stop"
            release.set()
    finally:
        release.set()
        shared.total_tokens = total
