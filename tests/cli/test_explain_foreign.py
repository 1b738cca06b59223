"""``scoutd explain`` on a conversation in another format than the one named.

The strategies pass the other format's tool traffic through and count it
nowhere, so the default's reason says there is no tool output: the table,
read alone (stdout saved to a file, say), must say why, not only stderr.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scoutd.cli import main


def chat(outputs: int) -> list[dict[str, object]]:
    """An OpenAI Chat conversation of ``outputs`` tool calls, each answered."""
    messages: list[dict[str, object]] = [{"role": "user", "content": "Fix the build."}]
    for number in range(outputs):
        ident = f"call_{number}"
        call = {"id": ident, "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": ident, "content": "ok " * 50})
    return messages


def test_the_table_says_the_traffic_of_another_format_was_passed_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(chat(3)))
    assert main(["explain", str(path), "--format", "scout"]) == 0
    out = capsys.readouterr().out
    assert "why: nothing to compact yet: no tool output so far" in out
    lines = out.splitlines()
    warnings = [line for line in lines if line.startswith("warning: ")]
    assert len(warnings) == 1, out  # once for the call, just above the format it names
    assert "openai-chat" in warnings[0] and "passed through unchanged" in warnings[0]
    assert lines[-2:] == [
        warnings[0],
        "7 messages in, 7 messages out; scout format, stable prefix 1",
    ]
    # in the format of the conversation, no warning
    assert main(["explain", str(path)]) == 0
    assert "warning" not in capsys.readouterr().out
