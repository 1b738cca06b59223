"""examples/: the agent loop runs against a real daemon; the sample files are what they claim.

The agent loop is run as a user runs it (``python examples/agent_loop.py``),
against a real daemon on a real socket, with a real notice and a real abort
dropped by ``scoutd notify`` and ``scoutd abort``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import scoutd

from .support.daemon import Daemon

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
RUN_TIMEOUT = 120.0  # seconds for one replay of the recorded run: generous for a slow machine

SAMPLE_CHATS = {
    "scout.json": "scout",
    "openai_chat.json": "openai-chat",
    "openai_responses.json": "openai-responses",
    "anthropic.json": "anthropic",
}
SDK_LOOPS = {
    "OpenAI Chat Completions, in process": "openai_chat.py",
    "OpenAI Chat Completions, through the daemon": "openai_chat_daemon.py",
    "OpenAI Responses, in process": "openai_responses.py",
    "OpenAI Responses, through the daemon (asyncio)": "openai_responses_daemon.py",
    "Anthropic Messages, in process": "anthropic_messages.py",
    "Anthropic Messages, through the daemon": "anthropic_messages_daemon.py",
}


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    started = Daemon(daemon={"shutdown_timeout": 2.0})
    try:
        started.start()
        yield started
    finally:
        started.cleanup()


def run(*args: str, socket_path: str) -> subprocess.CompletedProcess[str]:
    environ = {key: value for key, value in os.environ.items() if key != "SCOUTD_CONFIG"}
    environ["SCOUTD_SOCKET"] = socket_path
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True, text=True, env=environ, timeout=RUN_TIMEOUT, check=False,
    )  # fmt: skip


def scoutd_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scoutd", *args],
        capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False,
    )  # fmt: skip


def recorded() -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = json.loads(
        (EXAMPLES / "recorded_run.json").read_text(encoding="utf-8")
    )["messages"]
    return messages


def test_agent_loop_replays_the_recorded_run_with_a_notice(daemon: Daemon) -> None:
    save_file = Path(daemon.dir) / "agents" / "agent.chat"
    config = ("--config", daemon.config_path)
    assert scoutd_cli("notify", *config, str(save_file), "Please wrap up.").returncode == 0
    result = run(
        str(EXAMPLES / "agent_loop.py"), "--save-file", str(save_file),
        "--strategies", "shorten_tools_epoch,inbox", "--set", "epoch_tool_call_threshold=10",
        "--set", "epoch_full_tool_calls=5", "--set", "epoch_size=5",
        socket_path=daemon.socket_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr + daemon.log()
    lines = result.stdout.splitlines()
    assert lines[0] == "round 1: operator notice: 'Please wrap up.'"
    calls = sum(1 for message in recorded() if message["role"] == "assistant")
    total = lines[-1]
    assert total.startswith(f"done: {calls} model calls; prompts sent ")
    sent, whole = (int(part.split()[0].rstrip(":").replace(",", "")) for part in
                   total.split("sent ")[1:2] + total.split("have been ")[1:2])  # fmt: skip
    assert sent < whole  # the epoch strategy compacted the older tool outputs
    assert re.search(r": \d+% less, compacted in \d+ of \d+ rounds$", total), total
    assert any("; compacted: " in line for line in lines)  # the rounds say what was compacted
    assert os.listdir(scoutd.inbox_dir(str(save_file))) == []


def test_agent_loop_stops_on_an_abort_with_status_3(daemon: Daemon) -> None:
    save_file = Path(daemon.dir) / "agents" / "agent.chat"
    dropped = scoutd_cli("abort", "--config", daemon.config_path, str(save_file), "halt")
    assert dropped.returncode == 0, dropped.stderr
    result = run(
        str(EXAMPLES / "agent_loop.py"), "--save-file", str(save_file),
        socket_path=daemon.socket_path,
    )  # fmt: skip
    assert result.returncode == 3, result.stderr
    lines = result.stdout.splitlines()
    # The abort waits before the session opens: the very first round is refused,
    # whether the watcher or the call's inbox strategy takes it.
    assert lines == ["round 1: aborted by the operator: halt"], lines


def test_agent_loop_says_why_nothing_was_compacted(daemon: Daemon) -> None:
    """A run too short to compact under the default window ends saying so, and what to try."""
    result = run(
        str(EXAMPLES / "agent_loop.py"), "--quiet",
        "--save-file", str(Path(daemon.dir) / "agents" / "agent.chat"),
        socket_path=daemon.socket_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    last = result.stdout.splitlines()[-1]
    assert "nothing compacted" in last and "context_window" in last, last
    assert "try --set context_window=8000" in last


def test_agent_loop_uses_the_readme_chat_by_default() -> None:
    """One story: the loop's chat is the one the README drops notices and aborts into."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    source = (EXAMPLES / "agent_loop.py").read_text(encoding="utf-8")
    assert 'DEFAULT_SAVE_FILE = "~/chats/a1/agent.chat"' in source
    assert "scoutd notify ~/chats/a1/agent.chat" in readme
    assert "scoutd abort ~/chats/a1/agent.chat" in readme


def test_agent_loop_outside_the_allowed_roots_says_where_to_look(
    daemon: Daemon, tmp_path: Path
) -> None:
    result = run(
        str(EXAMPLES / "agent_loop.py"), "--save-file", str(tmp_path / "agent.chat"),
        socket_path=daemon.socket_path,
    )  # fmt: skip
    assert result.returncode == 1
    assert "allowed_roots" in result.stderr and "scoutd config show" in result.stderr
    assert "Traceback" not in result.stderr


def test_agent_loop_without_a_daemon_exits_1(tmp_path: Path) -> None:
    result = run(
        str(EXAMPLES / "agent_loop.py"), "--save-file", str(tmp_path / "agent.chat"),
        socket_path=str(tmp_path / "absent.sock"),
    )  # fmt: skip
    assert result.returncode == 1
    assert "absent.sock" in result.stderr and "Traceback" not in result.stderr


def test_the_recorded_run_is_a_valid_openai_chat_run() -> None:
    messages = recorded()
    assert [m["role"] for m in messages[:2]] == ["system", "user"]
    assert sum(1 for m in messages if m["role"] == "tool") == 30
    prepared = scoutd.prepare(messages, "shorten_tools_epoch", format="openai-chat")
    assert prepared.format == "openai-chat"
    assert prepared.report[0].outputs_kept == 30  # valid pairs, all recognised


@pytest.mark.parametrize(("name", "format"), sorted(SAMPLE_CHATS.items()))
def test_sample_chats_are_in_their_format(name: str, format: str) -> None:
    messages = json.loads((EXAMPLES / "chats" / name).read_text(encoding="utf-8"))
    prepared = scoutd.prepare(messages, "shorten_tools")
    assert prepared.format == format  # detected, not only accepted
    report = prepared.report[0]
    assert report.outputs_kept + report.outputs_protected == 8  # every pair recognised
    assert report.calls_kept + report.calls_protected == 8


def _python_blocks(markdown: str) -> dict[str, str]:
    """The first ```python block under each ### heading."""
    blocks: dict[str, str] = {}
    for section in markdown.split("\n### ")[1:]:
        title, _, body = section.partition("\n")
        start = body.find("```python\n")
        next_heading = body.find("\n## ")
        if start < 0 or (0 <= next_heading < start):
            continue
        code = body[start + len("```python\n") :]
        blocks[title] = code[: code.index("```")]
    return blocks


def test_sdk_loops_are_the_ones_in_the_docs() -> None:
    blocks = _python_blocks((ROOT / "docs" / "FORMATS.md").read_text(encoding="utf-8"))
    for title, name in SDK_LOOPS.items():
        source = (EXAMPLES / "sdk" / name).read_text(encoding="utf-8")
        assert blocks[title] == source, f"examples/sdk/{name} differs from docs/FORMATS.md"
        compile(source, name, "exec")
