"""The engine behind the framework hooks: one scoutd session per run (docs/INTEGRATIONS.md)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

import scoutd
from scoutd.inbox.aborted import clear, held
from scoutd.integrations._run import RunPreparer
from scoutd.protocol.messages import MAX_RECALL_SEARCH
from scoutd.strategies.inbox import write_abort, write_notice
from tests.support.daemon import Daemon, wait_for
from tests.test_recall import chat_outputs, chat_run

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CONVERSATION: list[dict[str, Any]] = [
    {"role": "user", "content": "list the files"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "a.py\nb.py\n" * 400},
]


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with Daemon() as running:
        yield running


def test_in_process_equals_the_library(tmp_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    config = {"max_tool_chars": 100}
    with (
        caplog.at_level(logging.DEBUG, logger="scoutd.integrations"),
        RunPreparer(save_file=str(tmp_path / "a.chat"), config=config) as preparer,
    ):
        got = preparer.prepare(CONVERSATION)
    assert got.messages == scoutd.prepare(CONVERSATION, config=config).messages
    assert got.format == "openai-chat"
    assert preparer.last is got
    assert "prepared 3 messages into 3 (openai-chat;" in caplog.text


@pytest.mark.parametrize("through_daemon", [False, True])
def test_recall_arguments_of_the_wrong_type_get_a_text(
    daemon: Daemon, through_daemon: bool
) -> None:
    """What a model sends is checked before any daemon sees it: a text, never an exception."""
    socket = daemon.socket_path if through_daemon else None
    save_file = os.path.join(daemon.dir, f"wrong-{through_daemon}.chat")
    with RunPreparer(save_file=save_file, socket=socket) as preparer:
        preparer.prepare(CONVERSATION)
        for handle, search in (({"n": 1}, None), (None, ["x"])):
            answer = preparer.recall(handle, search)
            assert answer == "handle and search must be strings"


def test_recall_answers_alike_in_process_and_through_the_daemon(
    daemon: Daemon, tmp_path: Any
) -> None:
    """What a model sends to the recall tool never becomes an exception: the daemon is
    asked what the in-process lookup would look up, so arguments past the wire's bounds
    (a padded handle, one that is no string, a long one) get the same answer."""
    messages = chat_run(5, user_every=0)
    there = os.path.join(daemon.dir, "alike.chat")
    with (
        RunPreparer(save_file=str(tmp_path / "alike.chat"), recall=True) as local,
        RunPreparer(save_file=there, socket=daemon.socket_path, recall=True) as remote,
    ):
        local.prepare(messages)
        remote.prepare(messages)
        for handle in ("#2" + " " * 70, " 2 ", 2, True, "9" * 70, "#x" + "y" * 80, 10**30):
            assert remote.recall(handle) == local.recall(handle), handle
        assert local.recall("#2" + " " * 70) == chat_outputs(messages)[1]
        assert local.recall(True).startswith("malformed handle 'True'")
        # a search past the wire's bound is the same tool-error text, not a refusal
        long = "line 5.1: " * (MAX_RECALL_SEARCH // 10 + 1)
        too_long = f"search is too long ({len(long)} characters): give at most {MAX_RECALL_SEARCH}"
        assert remote.recall(search=long) == local.recall(search=long) == too_long + " characters"
        assert remote.recall(search="value_4_7") == local.recall(search="value_4_7")


def test_a_strategy_callable_runs_in_process_only(daemon: Daemon) -> None:
    rounds: list[int] = []

    def spy(messages: list[Any]) -> list[Any]:
        rounds.append(len(messages))
        return messages

    with RunPreparer(strategies=spy) as preparer:
        assert preparer.prepare(CONVERSATION).messages == CONVERSATION
    assert rounds == [3]
    with pytest.raises(TypeError, match="cannot run in the daemon"):
        RunPreparer(strategies=spy, socket=daemon.socket_path)


def test_abort_is_sticky_in_process(tmp_path: Any) -> None:
    save_file = str(tmp_path / "a.chat")
    preparer = RunPreparer(save_file=save_file)
    preparer.prepare(CONVERSATION)
    write_abort(save_file, "stop now")
    for _ in range(2):  # the file is consumed by the first round; the abort stays
        with pytest.raises(scoutd.Aborted, match="stop now"):
            preparer.prepare(CONVERSATION)
    assert preparer.aborted == "stop now"
    assert not os.path.exists(os.path.join(scoutd.inbox_dir(save_file), "abort"))


@pytest.mark.parametrize("where", ["in-process", "daemon"])
def test_an_aborted_chat_stays_aborted_for_a_new_preparer(
    where: str, daemon: Daemon, tmp_path: Any
) -> None:
    """The abort file is gone with the first run; the chat stays aborted until cleared."""
    socket = daemon.socket_path if where == "daemon" else None
    directory = daemon.dir if where == "daemon" else str(tmp_path)
    save_file = os.path.join(directory, f"again-{where}.chat")
    with RunPreparer(save_file=save_file, socket=socket) as first:
        first.prepare(CONVERSATION)
        write_abort(save_file, "stop for good")
        with pytest.raises(scoutd.Aborted, match="stop for good"):
            first.prepare(CONVERSATION)
    abort = os.path.join(scoutd.inbox_dir(save_file), "abort")
    # The daemon marks the chat before its claim moves the file away, and the run
    # stops at the marker: the file leaves a moment later (in process: already gone).
    wait_for(lambda: not os.path.lexists(abort), 10.0, "the abort file consumed")
    for strategies in (None, ["none"]):  # whatever the strategies: the hook checks first
        with RunPreparer(save_file=save_file, socket=socket, strategies=strategies) as again:
            with pytest.raises(scoutd.Aborted, match="stop for good"):
                again.check()
            with pytest.raises(scoutd.Aborted, match="stop for good"):
                again.prepare(CONVERSATION)
            assert again.aborted == "stop for good" and again.last is None
    clear(save_file)
    with RunPreparer(save_file=save_file, socket=socket) as cleared:
        cleared.check()
        assert cleared.prepare(CONVERSATION).messages == CONVERSATION


def test_a_hook_aborts_whatever_the_strategies(tmp_path: Any) -> None:
    """A waiting abort stops the run even when no ``inbox`` strategy would read it."""
    save_file = str(tmp_path / "none.chat")
    write_abort(save_file, "no inbox strategy")
    with (
        RunPreparer(save_file=save_file, strategies=["none"]) as preparer,
        pytest.raises(scoutd.Aborted, match="no inbox strategy"),
    ):
        preparer.check()
    assert not os.path.lexists(os.path.join(scoutd.inbox_dir(save_file), "abort"))
    assert held(save_file) == "no inbox strategy"


def test_closed_preparer_refuses_rounds(tmp_path: Any) -> None:
    preparer = RunPreparer()
    preparer.close()
    preparer.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        preparer.prepare(CONVERSATION)


def test_daemon_session_is_incremental_and_equals_the_library(daemon: Daemon) -> None:
    save_file = os.path.join(daemon.dir, "inc.chat")
    config = {"max_tool_chars": 100}
    with RunPreparer(save_file=save_file, socket=daemon.socket_path, config=config) as preparer:
        first = preparer.prepare(CONVERSATION[:1])
        grown = preparer.prepare(CONVERSATION)
        engine = preparer._engine
        assert engine is not None and getattr(engine, "session", None) is not None
        status = engine.client.status()  # type: ignore[attr-defined]
        assert status["counts"]["sessions"] == 1
    assert first.messages == CONVERSATION[:1]
    assert grown.messages == scoutd.prepare(CONVERSATION, config=config).messages
    # Closing the preparer ended the daemon session.
    with scoutd.Client(daemon.socket_path) as client:
        wait_for(lambda: client.status()["counts"]["sessions"] == 0, 10, "the session to close")


def test_daemon_without_save_file_and_default_socket(
    daemon: Daemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCOUTD_SOCKET", daemon.socket_path)
    with RunPreparer(socket=True, config={"max_tool_chars": 100}) as preparer:
        assert preparer.socket_path == daemon.socket_path
        got = preparer.prepare(CONVERSATION)
    assert got.messages == scoutd.prepare(CONVERSATION, config={"max_tool_chars": 100}).messages


def test_daemon_abort_pushed_between_rounds(daemon: Daemon) -> None:
    save_file = os.path.join(daemon.dir, "push.chat")
    write_notice(save_file, "hello")  # makes the inbox
    with RunPreparer(save_file=save_file, socket=daemon.socket_path) as preparer:
        assert "hello" in preparer.prepare(CONVERSATION).messages[-1]["content"]
        write_abort(save_file, "pushed abort")
        # The daemon consumes the abort at once; the next round refuses, with its reason.
        wait_for(
            lambda: not os.path.exists(os.path.join(scoutd.inbox_dir(save_file), "abort")),
            10,
            "the daemon to consume the abort",
        )
        for _ in range(2):
            with pytest.raises(scoutd.Aborted, match="pushed abort"):
                preparer.prepare(CONVERSATION)


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": REPOSITORY}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=REPOSITORY,
    )


def test_import_scoutd_never_imports_a_framework() -> None:
    done = run_python(
        """
        import sys
        import scoutd, scoutd.integrations
        loaded = sorted(m for m in ("agents", "langchain", "langchain_core", "langgraph")
                        if m in sys.modules)
        print(loaded)
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("module", "blocked", "extra"),
    [
        ("scoutd.integrations.openai_agents", "agents", "openai-agents"),
        ("scoutd.integrations.langchain", "langchain", "langchain"),
    ],
)
def test_missing_extra_is_one_line_naming_it(module: str, blocked: str, extra: str) -> None:
    done = run_python(
        f"""
        import sys
        sys.modules[{blocked!r}] = None  # as if the framework were not installed
        try:
            import {module}
        except ImportError as exc:
            print(str(exc))
        else:
            raise SystemExit("imported without the framework")
        """
    )
    assert done.returncode == 0, done.stderr + done.stdout
    message = done.stdout.strip()
    assert "\n" not in message
    assert f"pip install 'scoutd[{extra}]'" in message and module in message


def test_frameworks_are_installed_for_ci() -> None:
    """CI installs the test extra, which brings both frameworks: their tests never skip there."""
    if os.environ.get("CI") != "true":
        pytest.skip("checked under CI only (a local checkout may lack the extras)")
    import agents  # noqa: F401
    import langchain.agents  # noqa: F401


def test_daemon_takes_a_relative_save_file(daemon: Daemon, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(daemon.dir)
    write_notice("rel.chat", "relative hello")
    with RunPreparer(save_file="rel.chat", socket=daemon.socket_path) as preparer:
        assert "relative hello" in preparer.prepare(CONVERSATION).messages[-1]["content"]


@pytest.mark.parametrize("strategies", [None, lambda messages: list(messages)])
def test_a_preparer_counts_what_this_process_holds(
    strategies: Any, tmp_path: Any, daemon: Daemon
) -> None:
    """In process: the conversation, counted as the daemon counts its sessions (a
    callable's run keeps its last conversation for recall); through the daemon:
    nothing, the daemon holds it."""
    from tests.engine.test_session_held import oracle

    run = chat_run(6)
    local = RunPreparer(save_file=str(tmp_path / "a.chat"), strategies=strategies)
    assert local.held_bytes() == 0
    local.prepare(run)
    assert local.held_bytes() == oracle(run)
    local.close()
    assert local.held_bytes() == 0
    if strategies is None:
        save_file = os.path.join(daemon.dir, "counted.chat")
        remote = RunPreparer(save_file=save_file, socket=daemon.socket_path)
        with remote:
            remote.prepare(run)
            assert remote.held_bytes() == 0


def test_a_run_through_the_daemon_survives_a_daemon_restart() -> None:
    """Its session ended with its connection: the next round opens a new one and
    sends the whole conversation (before: every later round raised
    DaemonUnavailable, and the agent's run ended). An abort dropped while no daemon
    ran is claimed at that open: the round is aborted, never sent to a model."""
    with Daemon() as own:
        run = chat_run(4)
        going = RunPreparer(save_file=os.path.join(own.dir, "a.chat"), socket=own.socket_path)
        stopped = os.path.join(own.dir, "b.chat")
        halted = RunPreparer(save_file=stopped, socket=own.socket_path)
        with going, halted:
            first = going.prepare(run[:3]).messages
            halted.prepare(run[:3])
            own.stop()
            write_abort(stopped, "stop b while down")
            own.start()
            assert "daemon restarted" in going.recall("#1")  # a text, not DaemonUnavailable
            assert going.prepare(run[:3]).messages == first
            assert going.prepare(run).messages == scoutd.prepare(run).messages
            with pytest.raises(scoutd.Aborted, match="stop b while down"):
                halted.prepare(run)
            assert own.status()["counts"]["sessions"] == 2  # one new session each
