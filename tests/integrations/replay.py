"""A recorded real agent run, replayed by the scripted models of the integration tests.

The run comes from ``runs.jsonl.gz`` of the recorded runs (the full set, else
the subset the repository ships: tests/support/real_runs.py), the same run in
both: a coding agent's OpenAI Chat conversation with one ``bash`` call per assistant
turn. :class:`Replay` gives the scripted model its turns in order and the
``bash`` tool the recorded output of each call, by call id. :class:`Events`
drops an inbox notice or an ``abort`` into the chat's inbox, as ``scoutd notify``
and ``scoutd abort`` do, when the model answers a given call.
"""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass, field
from typing import Any

from scoutd.strategies.inbox import write_abort, write_notice
from tests.support.daemon import wait_for
from tests.support.real_runs import FILES, real_dir

# Small enough for compaction to pay long before the run ends (docs/ECONOMY.md).
CONFIG = {"context_window": 20_000}
# What the hooks that register the recall tool prepare with: recall is on by default there.
RECALL_CONFIG = {**CONFIG, "recall": True}
NOTICE = "operator notice 7f3a: the staging database is read-only until 18:00"
ABORT_REASON = "operator abort 91c2: budget exceeded"


@dataclass
class Turn:
    """One model answer: its text and its calls (call id, tool name, arguments text)."""

    text: str
    calls: list[tuple[str, str, str]]


@dataclass
class Replay:
    system: str
    task: str
    turns: list[Turn]
    outputs: dict[str, str]

    def turn(self, index: int) -> Turn:
        """The model's answer at call ``index`` (0-based); the last one has no calls."""
        return self.turns[index]

    @property
    def final(self) -> str:
        """The text of the final answer, which ends the run."""
        return self.turns[-1].text


def load_replay(min_outputs: int = 45, max_outputs: int = 60) -> Replay:
    """The first recorded run with one call per turn and ``min..max`` tool outputs."""
    path = real_dir() / FILES["openai"]
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            messages = json.loads(line)["messages"]
            tools = [m for m in messages if m["role"] == "tool"]
            assistants = [m for m in messages if m["role"] == "assistant"]
            if not min_outputs <= len(tools) <= max_outputs:
                continue
            if any(len(m.get("tool_calls") or []) != 1 for m in assistants):
                continue
            outputs = {m["tool_call_id"]: m["content"] for m in tools}
            turns = []
            for message in assistants:
                calls = [
                    (c["id"], c["function"]["name"], c["function"]["arguments"])
                    for c in message["tool_calls"]
                    if c["id"] in outputs  # the last call of a run was never answered
                ]
                turns.append(Turn(text=message["content"] or "", calls=calls))
            if turns[-1].calls:
                turns.append(Turn(text="done", calls=[]))
            return Replay(
                system=messages[0]["content"],
                task=messages[1]["content"],
                turns=turns,
                outputs=outputs,
            )
    raise LookupError(f"no recorded run with {min_outputs}..{max_outputs} tool outputs in {path}")


@dataclass
class Events:
    """What the operator does while the model answers a given call (0-based)."""

    save_file: str
    notice_at: int | None = None
    abort_at: int | None = None
    calls: int = 0
    log: list[str] = field(default_factory=list)

    def model_called(self) -> int:
        """Count a model call, drop the files due at it; return its index."""
        index = self.calls
        self.calls += 1
        if index == self.notice_at:
            write_notice(self.save_file, NOTICE, name="note.txt")
            self.log.append(f"notice at {index}")
        if index == self.abort_at:
            write_abort(self.save_file, ABORT_REASON)
            self.log.append(f"abort at {index}")
        return index


def contains(items: Any, text: str) -> bool:
    """Whether ``text`` occurs anywhere in ``items`` (as JSON)."""
    return text in json.dumps(items, default=str)


def check_rounds(
    full: list[list[Any]],
    seen: list[list[Any]],
    expected: list[list[Any]],
    notice_at: int | None,
) -> None:
    """The model saw the prepared prompt at every call; the framework's history stayed whole.

    ``full[k]`` is the history the framework handed the hook at call ``k``,
    ``seen[k]`` what the model received, ``expected[k]`` the prepared prompt of
    ``full[k]`` computed on the side (without the inbox). The notice dropped
    while the model answered call ``notice_at`` must reach call ``notice_at + 1``
    only, as one added message.
    """
    assert len(full) == len(seen) == len(expected) > 0
    compacted = 0
    for k, (history, prompt, reference) in enumerate(zip(full, seen, expected, strict=True)):
        if k:
            # The history grows by appending: nothing of it was edited or dropped.
            assert history[: len(full[k - 1])] == full[k - 1], f"history changed at call {k}"
            assert len(history) > len(full[k - 1])
        assert not contains(history, NOTICE), f"the notice entered the history at call {k}"
        if notice_at is not None and k == notice_at + 1:
            carrying = [m for m in prompt if contains(m, NOTICE)]
            assert len(carrying) == 1, f"call {k}: the notice is in {len(carrying)} messages"
            prompt = [m for m in prompt if not contains(m, NOTICE)]
        else:
            assert not contains(prompt, NOTICE), f"call {k} saw the notice"
        assert prompt == reference, f"call {k}: the model did not see the prepared prompt"
        if len(json.dumps(prompt, default=str)) < len(json.dumps(history, default=str)):
            compacted += 1
    # The replay is long enough for compaction to kick in, again and again.
    assert compacted >= 10, f"only {compacted} of {len(full)} calls were compacted"
    assert contains(seen[-1], "[Context compaction]")


def daemon_sessions(directory: str) -> tuple[int, int]:
    """Sessions opened and closed so far, from the log of the test daemon in ``directory``."""
    with open(os.path.join(directory, "daemon.log"), encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    opened = sum(" session " in line and " opened for " in line for line in lines)
    closed = sum(" session " in line and line.endswith(" closed") for line in lines)
    return opened, closed


def check_one_daemon_session(socket_path: str | None, directory: str) -> None:
    """In daemon mode: the run used one session, and it is closed now."""
    if socket_path is not None:
        wait_for(lambda: daemon_sessions(directory) == (1, 1), 10, "one session, closed")


def langchain_answer(decided: tuple[str, Any] | None, ident: str) -> Any:
    """A scripted LangChain chat model's ``ChatResult``: one call ``decided`` (its name
    and arguments) with the id ``ident``, or the final answer "done" when None."""
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    if decided is None:
        message = AIMessage(content="done")
    else:
        name, arguments = decided
        call = {"name": name, "args": arguments, "id": ident, "type": "tool_call"}
        message = AIMessage(content="", tool_calls=[call])
    return ChatResult(generations=[ChatGeneration(message=message)])
