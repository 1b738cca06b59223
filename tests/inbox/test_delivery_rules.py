"""Delivery order and the abort rule, on both paths: the library and the real daemon.

Order: notices are delivered in the byte order of their names, and the
writers name them so that this is arrival order, also for one ``--name``
used again and again. Abort: a pickup that finds an ``abort`` takes it alone;
every notice stays for the first run after an operator cleared the abort
(docs/STRATEGIES.md, "inbox"; an aborted chat stays aborted until then).
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from scoutd import Aborted, PromptConfig
from scoutd.inbox import inbox_dir, inbox_removed_dir, write_abort, write_notice
from scoutd.inbox.aborted import clear
from scoutd.strategies.inbox import inbox
from tests.support.daemon import Daemon, LineClient

PUSH_TIMEOUT = 10.0
ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def save_file(tmp_path: pathlib.Path) -> str:
    return str(tmp_path / "agent.chat")


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with Daemon() as running:
        yield running


def texts(messages: list[Any]) -> list[str]:
    return [message["content"] for message in messages]


def pending(save_file: str) -> list[str]:
    return sorted(os.listdir(inbox_dir(save_file)))


def cli_notify(save_file: str, text: str, *extra: str) -> str:
    """``scoutd notify`` as an operator runs it: a separate process."""
    done = subprocess.run(
        [sys.executable, "-m", "scoutd", "notify", *extra, save_file, text],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=ROOT,
        check=True,
    )
    return done.stdout.strip()


def prepare_over_socket(client: LineClient, save_file: str, **params: Any) -> dict[str, Any]:
    return client.call(
        "prepare_prompt",
        {
            "messages": [{"role": "user", "content": "go"}],
            "strategies": "inbox",
            "save_file": save_file,
            **params,
        },
    )


# --- order: the library path ---------------------------------------------------------


def test_one_name_written_three_times_is_delivered_in_arrival_order(save_file: str) -> None:
    for text in ("first", "second", "third"):
        write_notice(save_file, text, name="N.txt")
    assert pending(save_file) == ["N.txt", "N~00001.txt", "N~00002.txt"]
    out, report = inbox([], PromptConfig(), save_file=save_file)
    assert texts(out) == ["first", "second", "third"] and report.inbox_delivered == 3


def test_arrival_order_holds_across_calls_when_the_budget_cuts_a_pickup(save_file: str) -> None:
    """A notice left over by the byte budget keeps its place before later ones of its name."""
    small = PromptConfig(inbox_max_total_bytes=5)
    write_notice(save_file, "one..", name="N.txt")
    write_notice(save_file, "two..", name="N.txt")
    assert texts(inbox([], small, save_file=save_file)[0]) == ["one.."]
    write_notice(save_file, "three", name="N.txt")  # N.txt is free again, but must come last
    assert texts(inbox([], small, save_file=save_file)[0]) == ["two.."]
    assert texts(inbox([], small, save_file=save_file)[0]) == ["three"]


def test_unnamed_notices_are_delivered_in_drop_order(save_file: str) -> None:
    for n in range(20):
        write_notice(save_file, f"n{n}")
    assert texts(inbox([], PromptConfig(), save_file=save_file)[0]) == [f"n{n}" for n in range(20)]


def test_different_names_go_in_byte_order_of_the_names(save_file: str) -> None:
    for name in ("b.txt", "a.txt", "B.txt", "\U0001f600.txt"):
        write_notice(save_file, name, name=name)
    expected = ["B.txt", "a.txt", "b.txt", "\U0001f600.txt"]
    assert texts(inbox([], PromptConfig(), save_file=save_file)[0]) == expected


# --- order: the daemon path ------------------------------------------------------------


def test_cli_notify_with_one_name_twice_reaches_the_daemons_prompt_in_order(
    daemon: Daemon,
) -> None:
    save_file = os.path.join(daemon.dir, "order.chat")
    first = cli_notify(save_file, "first", "--name", "N.txt")
    second = cli_notify(save_file, "second", "--name", "N.txt")
    assert [os.path.basename(first), os.path.basename(second)] == ["N.txt", "N~00001.txt"]
    with daemon.connect() as client:
        answer = prepare_over_socket(client, save_file)
    assert texts(answer["result"]["messages"]) == ["go", "first", "second"]
    assert answer["result"]["report"][-1]["inbox_delivered"] == 2


# --- the abort rule: the library path --------------------------------------------------


def test_the_library_takes_an_abort_alone(save_file: str) -> None:
    write_notice(save_file, "sorts before", name="a.txt")
    write_abort(save_file, "stop")
    write_notice(save_file, "sorts after", name="z.txt")
    with pytest.raises(Aborted, match="stop"):
        inbox([], PromptConfig(), save_file=save_file)
    assert pending(save_file) == ["a.txt", "z.txt"]
    assert os.listdir(inbox_removed_dir(save_file)) == ["abort"]
    with pytest.raises(Aborted, match="stop"):  # the chat stays aborted: nothing taken
        inbox([], PromptConfig(), save_file=save_file)
    assert pending(save_file) == ["a.txt", "z.txt"]
    clear(save_file)
    out, _ = inbox([], PromptConfig(), save_file=save_file)  # the next run
    assert texts(out) == ["sorts before", "sorts after"]


def test_an_abort_of_another_kind_is_taken_alone_too(save_file: str) -> None:
    write_notice(save_file, "kept", name="a.txt")
    os.mkdir(os.path.join(inbox_dir(save_file), "abort"))
    with pytest.raises(Aborted, match="directory"):
        inbox([], PromptConfig(), save_file=save_file)
    assert pending(save_file) == ["a.txt"]
    with pytest.raises(Aborted, match="directory"):
        inbox([], PromptConfig(), save_file=save_file)
    clear(save_file)
    assert texts(inbox([], PromptConfig(), save_file=save_file)[0]) == ["kept"]


# --- the abort rule: the daemon path ---------------------------------------------------


def test_the_daemons_prepare_takes_an_abort_alone(daemon: Daemon) -> None:
    save_file = os.path.join(daemon.dir, "strategy.chat")
    write_notice(save_file, "sorts before", name="a.txt")
    write_abort(save_file, "stop")
    write_notice(save_file, "sorts after", name="z.txt")
    with daemon.connect() as client:
        refused = prepare_over_socket(client, save_file)
        assert refused["error"]["code"] == -32001
        assert refused["error"]["data"]["reason"] == "stop"
        assert pending(save_file) == ["a.txt", "z.txt"]
        still = prepare_over_socket(client, save_file)  # the chat stays aborted
        assert still["error"]["data"]["reason"] == "stop"
        assert pending(save_file) == ["a.txt", "z.txt"]
        clear(save_file)
        again = prepare_over_socket(client, save_file)  # the next run
    assert texts(again["result"]["messages"]) == ["go", "sorts before", "sorts after"]


def test_the_daemons_watcher_takes_an_abort_alone(daemon: Daemon) -> None:
    save_file = os.path.join(daemon.dir, "watched.chat")
    os.makedirs(inbox_dir(save_file))
    with daemon.connect() as client:
        opened = client.call("session.open", {"save_file": save_file})
        session = opened["result"]["session"]
        write_notice(save_file, "sorts before", name="a.txt")
        write_notice(save_file, "sorts after", name="z.txt")
        write_abort(save_file, "stop")
        note = client.notification("session.aborted", PUSH_TIMEOUT)
        assert note["params"]["reason"] == "stop"
        refused = prepare_over_socket(client, save_file, session=session)
        assert refused["error"]["code"] == -32001
        assert pending(save_file) == ["a.txt", "z.txt"]
        client.call("session.close", {"session": session})
        # the agent's next run, with a session of its own: aborted until cleared
        rerun = client.call("session.open", {"save_file": save_file})["result"]["session"]
        assert prepare_over_socket(client, save_file, session=rerun)["error"]["code"] == -32001
        assert pending(save_file) == ["a.txt", "z.txt"]
        clear(save_file)
        rerun = client.call("session.open", {"save_file": save_file})["result"]["session"]
        again = prepare_over_socket(client, save_file, session=rerun)
    assert texts(again["result"]["messages"]) == ["go", "sorts before", "sorts after"]
    assert sorted(os.listdir(inbox_removed_dir(save_file))) == ["a.txt", "abort", "z.txt"]


def test_an_abort_another_consumer_takes_first_still_leaves_the_notices(
    save_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seen in the listing, gone at the claim (the daemon's watcher won): no notice is taken."""
    from scoutd.inbox import pickup

    write_notice(save_file, "kept", name="a.txt")
    write_abort(save_file, "stop")
    real_take = pickup.take

    def watcher_wins(dirs: Any, name: str, max_bytes: int, **kwargs: Any) -> Any:
        if name == "abort":  # the other consumer's claim lands first
            os.rename(os.path.join(dirs.inbox, name), os.path.join(str(save_file) + ".taken"))
        return real_take(dirs, name, max_bytes, **kwargs)

    monkeypatch.setattr(pickup, "take", watcher_wins)
    out, report = inbox([], PromptConfig(), save_file=save_file)
    assert out == [] and report.inbox_delivered == 0
    assert pending(save_file) == ["a.txt"]
    monkeypatch.setattr(pickup, "take", real_take)
    assert texts(inbox([], PromptConfig(), save_file=save_file)[0]) == ["kept"]


def test_an_abort_dropped_during_a_pickup_stops_it(
    save_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The notices taken are delivered, the rest stay with the abort for the next pickup."""
    from scoutd.inbox import pickup

    for name in ("a.txt", "b.txt", "c.txt"):
        write_notice(save_file, name, name=name)
    real_take = pickup.take

    def operator_aborts_meanwhile(dirs: Any, name: str, max_bytes: int, **kwargs: Any) -> Any:
        taken = real_take(dirs, name, max_bytes, **kwargs)
        if name == "a.txt":
            write_abort(save_file, "stop")
        return taken

    monkeypatch.setattr(pickup, "take", operator_aborts_meanwhile)
    out, _ = inbox([], PromptConfig(), save_file=save_file)
    assert texts(out) == ["a.txt"]
    assert pending(save_file) == ["abort", "b.txt", "c.txt"]
    with pytest.raises(Aborted, match="stop"):
        inbox([], PromptConfig(), save_file=save_file)


def test_empty_notices_by_thousands_do_not_hold_up_the_daemons_abort(daemon: Daemon) -> None:
    """An abort dropped while a prepare call takes 20,000 empty notices: the pickup stops.

    Empty notices cost no bytes of the budget, so one call took them all, while
    the watcher's claim of the abort waited for that pickup (60,000: a 27 s wait
    for the push). Now the pickup stops at the abort: the rest stay pending.
    """
    save_file = os.path.join(daemon.dir, "flood.chat")
    inbox_path, removed = inbox_dir(save_file), inbox_removed_dir(save_file)
    os.makedirs(inbox_path)
    count = 20_000
    for n in range(count):
        path = os.path.join(inbox_path, f"n{n:05d}.txt")
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        os.utime(path, (0, 0))  # complete: no settle wait
    answers: list[dict[str, Any]] = []
    with daemon.connect() as watching, daemon.connect() as agent:
        watching.call("session.open", {"save_file": save_file})
        caller = threading.Thread(
            target=lambda: answers.append(prepare_over_socket(agent, save_file)), daemon=True
        )
        caller.start()
        for _ in range(2000):  # bounded (20 s): the pickup has begun
            if os.path.exists(os.path.join(removed, "n00000.txt")):
                break
            time.sleep(0.01)
        write_abort(save_file, "stop")
        note = watching.notification("session.aborted", 60)
        assert note["params"]["reason"] == "stop"
        caller.join(60)
    delivered = answers[0]["result"]["report"][-1]["inbox_delivered"]
    assert 0 < delivered < count
    assert len(pending(save_file)) == count - delivered  # nothing lost: the rest waits
