"""``--format`` on the CLI verbs that read messages: prepare, explain, simulate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scoutd.cli import main

from .conversations import anthropic, chat

TIGHT = [
    "--set",
    "epoch_tool_call_threshold=2",
    "--set",
    "epoch_full_tool_calls=1",
    "--set",
    "epoch_compacted_tool_calls=1",
    "--set",
    "epoch_size=1",
]


def _file(tmp_path: Path, messages: list[Any], name: str = "chat.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(messages))
    return str(path)


def test_prepare_local_answers_in_the_input_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _file(tmp_path, anthropic(6))
    code = main(
        ["prepare", path, "--local", "--report", "--strategies", "shorten_tools_epoch", *TIGHT]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["report"][-1]["format"] == "anthropic"
    assert all(isinstance(m["content"], (str, list)) for m in out["messages"])
    assert out["report"][-1]["outputs_dropped"] > 0


def test_explain_warns_on_stderr_about_foreign_traffic(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _file(tmp_path, chat(3))
    assert main(["explain", path, "--format", "scout"]) == 0
    captured = capsys.readouterr()
    assert "warning" in captured.err and "openai-chat" in captured.err
    assert main(["explain", path]) == 0
    captured = capsys.readouterr()
    assert "openai-chat format" in captured.out and not captured.err


def test_a_mixed_list_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _file(tmp_path, [*chat(1), *anthropic(1)[1:]])
    assert main(["explain", path]) == 1
    err = capsys.readouterr().err
    assert err.startswith("scoutd: messages mix formats") and err.count("\n") == 1


@pytest.mark.parametrize("build", [chat, anthropic])
def test_simulate_replays_a_provider_chat_round_by_round(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], build: Any
) -> None:
    path = _file(tmp_path, build(12))
    assert main(["simulate", "--chat", path, "--strategies", "none", "--json"]) == 0
    workload = json.loads(capsys.readouterr().out)["workload"]
    assert workload["rounds"] == 12 and workload["tool_outputs"] == 12
