"""Workloads for the simulator: a seeded synthetic agent run, or a recorded chat.

The synthetic run imitates a coding agent: a long system prompt, a task, then
tool calls (``read_file``, ``grep``, ``run_tests``, ``list_dir``, ``web_fetch``,
``edit_file``, ``shell``) each answered by its output, a few assistant remarks
and a few user turns. Output sizes follow a lognormal law with a heavy tail
(median about 1,500 characters, a few of 20,000-60,000), and a share of calls
repeat an earlier call's name and arguments exactly, as agents do. Everything
is drawn from ``random.Random(seed)``: the same seed gives the same messages.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from .files import ChatError, read_bounded

__all__ = [
    "ChatError",
    "Workload",
    "load_chat",
    "round_ends",
    "synthetic_run",
]

OUTPUT = "function_call_output"

# Output sizes in characters: lognormal around a 1.5k median; sigma 1.1 puts
# about 1% of outputs above 20k (a log file, a fetched page), clipped at 60k.
MEDIAN_OUTPUT_CHARS = 1500
OUTPUT_SIGMA = 1.1
MIN_OUTPUT_CHARS = 40
MAX_OUTPUT_CHARS = 60_000
ASSISTANT_TEXT_RATE = 0.12  # share of calls preceded by a short assistant remark
MAX_DRAWS = 20  # fresh arguments drawn before a colliding call is made unique

_WORD_TEXT = """
self return value result config prompt message index count error path data items
None True False import from def class async await with open read write list dict
str int float bool raise except try finally yield lambda assert session socket
request response handler strategy epoch window cache token output input call
name arguments content role user system assistant tool test passed failed
skipped module file line column warning info debug the a of to and in is for on
that this by be are as it at an or if not
"""
_WORDS = tuple(_WORD_TEXT.split())
_DIRS = ("src", "lib", "tests", "docs", "pkg", "app", "core", "utils", "server", "client")
_STEMS = (
    "config",
    "handler",
    "session",
    "cache",
    "models",
    "views",
    "parser",
    "prompt",
    "epoch",
    "inbox",
    "socket",
    "report",
    "main",
    "util",
    "store",
    "auth",
    "router",
)
_EXTS = (".py", ".py", ".py", ".ts", ".md", ".toml", ".json", ".rs")
_PATTERNS = (
    "TODO",
    "def prepare",
    "class Config",
    "import msgspec",
    "raise ",
    "await ",
    "cache_key",
    "timeout",
    "socket_path",
    "max_tool_chars",
)
_HOSTS = ("docs.python.org", "peps.python.org", "anyio.readthedocs.io", "jcristharif.com")

_SYSTEM_RULES = (
    "You are a careful software engineering agent working in a repository.",
    "Use the tools to read files, search, edit and run the tests; never guess file contents.",
    "Prefer small, reviewable changes; explain what you changed and why.",
    "When a command fails, read its output before trying again.",
    "Keep the test suite green; add a test for every behaviour you change.",
)
_TOOLS_DOC = {
    "read_file": "Read a file. Arguments: path (string), start (int, optional), end (int).",
    "grep": "Search the repository. Arguments: pattern (regex), path (directory), glob.",
    "run_tests": "Run the test suite or a selection. Arguments: selector (string), flags.",
    "list_dir": "List a directory. Arguments: path (string), depth (int).",
    "web_fetch": "Fetch a documentation page. Arguments: url (string).",
    "edit_file": "Replace text in a file. Arguments: path, old (string), new (string).",
    "shell": "Run a shell command in the repository. Arguments: command (string).",
}
_TOOL_WEIGHTS = {
    "read_file": 34,
    "grep": 18,
    "run_tests": 10,
    "list_dir": 9,
    "web_fetch": 5,
    "edit_file": 16,
    "shell": 8,
}


@dataclass(frozen=True, slots=True)
class Workload:
    """A conversation to replay and where it came from."""

    messages: list[dict[str, Any]]
    source: str  # "synthetic" or the chat file's name
    parameters: dict[str, Any]


def _encode(value: Any) -> str:
    return msgspec.json.encode(value).decode("utf-8")


class _Generator:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def words(self, chars: int, per_line: int = 12) -> str:
        """About ``chars`` characters of word salad broken into lines."""
        count = max(1, chars // 6 + 1)
        words = self.rng.choices(_WORDS, k=count)
        lines = [" ".join(words[i : i + per_line]) for i in range(0, count, per_line)]
        return "\n".join(lines)[:chars]

    def path(self) -> str:
        rng = self.rng
        return f"{rng.choice(_DIRS)}/{rng.choice(_STEMS)}{rng.choice(_EXTS)}"

    def arguments(self, tool: str) -> dict[str, Any]:
        rng = self.rng
        if tool == "read_file":
            start = rng.randrange(1, 400)
            return {"path": self.path(), "start": start, "end": start + rng.randrange(40, 400)}
        if tool == "grep":
            return {
                "pattern": rng.choice(_PATTERNS),
                "path": self.path(),
                "context": rng.randrange(9),
            }
        if tool == "run_tests":
            test = f"test_{rng.choice(_WORDS)}_{rng.choice(_WORDS)}"
            return {"selector": f"tests/test_{rng.choice(_STEMS)}.py::{test}", "flags": "-x -q"}
        if tool == "list_dir":
            return {
                "path": f"{rng.choice(_DIRS)}/{rng.choice(_STEMS)}",
                "depth": rng.randrange(1, 4),
            }
        if tool == "web_fetch":
            page = f"{rng.choice(_STEMS)}/{rng.choice(_WORDS)}-{rng.choice(_WORDS)}"
            return {"url": f"https://{rng.choice(_HOSTS)}/en/latest/{page}.html"}
        if tool == "edit_file":
            # Edits carry code in their arguments: the long ones get shortened.
            old = self.words(int(rng.lognormvariate(math.log(300), 0.9)) + 20)
            new = self.words(int(rng.lognormvariate(math.log(400), 0.9)) + 20)
            return {"path": self.path(), "old": old, "new": new}
        command = rng.choice(
            (
                "git log -n {n} --oneline",
                "git diff HEAD~{n} --stat",
                "wc -l $(git ls-files | head -n {n})",
                "make -j{n} check",
            )
        )
        return {"command": command.format(n=rng.randrange(1, 100))}

    def output_text(self, tool: str, arguments: dict[str, Any]) -> str:
        size = int(self.rng.lognormvariate(math.log(MEDIAN_OUTPUT_CHARS), OUTPUT_SIGMA))
        size = min(max(size, MIN_OUTPUT_CHARS), MAX_OUTPUT_CHARS)
        if tool == "edit_file":
            return f"Edited {arguments['path']}: 1 replacement."
        if tool == "list_dir":
            names = [self.path() for _ in range(size // 24 + 1)]
            return "\n".join(names)[:size]
        if tool == "grep":
            lines, total = [], 0
            while total < size:
                line = f"{self.path()}:{self.rng.randrange(1, 900)}: {self.words(60)}"
                lines.append(line)
                total += len(line) + 1
            return "\n".join(lines)[:size]
        return self.words(size)


def synthetic_run(
    calls: int = 400,
    *,
    seed: int = 0,
    repeat_rate: float = 0.05,
    user_turns: int = 3,
) -> Workload:
    """A deterministic synthetic agent run with ``calls`` tool calls.

    ``repeat_rate`` is the probability that a call repeats an earlier call's
    name and arguments exactly (it then gets the same output text, with its own
    id); ``user_turns`` user messages are spread evenly through the run.
    """
    if calls < 0:
        raise ValueError("calls must be >= 0")
    if not 0.0 <= repeat_rate <= 1.0:
        raise ValueError("repeat_rate must be between 0 and 1")
    if user_turns < 0:
        raise ValueError("user_turns must be >= 0")
    gen = _Generator(seed)
    rng = gen.rng
    tools_doc = "\n".join(f"- {name}: {doc}" for name, doc in _TOOLS_DOC.items())
    system = "\n".join(_SYSTEM_RULES) + "\n\nTools:\n" + tools_doc + "\n\n" + gen.words(6000, 14)
    task = "Task: " + gen.words(600)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": task},
    ]
    turn_at = {calls * (k + 1) // (user_turns + 1) for k in range(user_turns)} - {0}
    history: list[tuple[str, dict[str, Any], str]] = []
    keys: set[str] = set()
    names, weights = list(_TOOL_WEIGHTS), list(_TOOL_WEIGHTS.values())
    for number in range(calls):
        if number in turn_at:
            messages.append({"role": "user", "content": "Follow-up: " + gen.words(300)})
        if rng.random() < ASSISTANT_TEXT_RATE:
            messages.append({"role": "assistant", "content": gen.words(rng.randrange(80, 600))})
        if history and rng.random() < repeat_rate:
            tool, arguments, text = rng.choice(history)
        else:
            tool = rng.choices(names, weights)[0]
            arguments = gen.arguments(tool)
            # A fresh call is never an accidental repeat: the rate stays the one asked.
            draws = 1
            while _encode([tool, arguments]) in keys and draws < MAX_DRAWS:
                arguments = gen.arguments(tool)
                draws += 1
            if _encode([tool, arguments]) in keys:  # unlucky draws: make it unique
                arguments["note"] = f"call {number}"
            keys.add(_encode([tool, arguments]))
            text = gen.output_text(tool, arguments)
            history.append((tool, arguments, text))
        ident = f"call_{number:05d}_{rng.getrandbits(32):08x}"
        call = {"name": tool, "arguments": arguments, "id": ident}
        output = {"name": tool, "content": text, "id": ident}
        messages.append({"role": "function_call", "content": _encode(call)})
        messages.append({"role": OUTPUT, "content": _encode(output)})
    parameters = {
        "calls": calls,
        "seed": seed,
        "repeat_rate": repeat_rate,
        "user_turns": user_turns,
    }
    return Workload(messages, "synthetic", parameters)


def load_chat(path: str) -> Workload:
    """Read a recorded conversation: a JSON list of messages (docs/STRATEGIES.md).

    ``{"messages": [...]}`` is accepted too; ``-`` reads standard input. It is
    read as the CLI reads a FILE (:func:`.files.read_bounded`): at most 256 MiB,
    a FIFO with no writer and a directory refused.
    """
    raw = read_bounded(path)
    try:
        data = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise ChatError(f"chat {path} is not valid JSON: {exc}") from exc
    except RecursionError:
        raise ChatError(f"chat {path} is JSON nested too deeply") from None
    if isinstance(data, dict) and "messages" in data:
        data = data["messages"]
    if not isinstance(data, list) or not all(isinstance(m, dict) for m in data):
        raise ChatError(f"chat {path} must be a JSON list of message objects")
    name = "stdin" if path == "-" else os.path.basename(path)
    return Workload(data, name, {"chat": name, "messages": len(data)})


def round_ends(messages: Sequence[Any]) -> list[int]:
    """Prefix lengths at which a prompt is prepared: just after each tool output.

    A round ends after each ``function_call_output`` message (the model is
    called with everything so far). A conversation without tool outputs gives
    one round over the whole conversation, so that it is still measured.
    """
    ends = [
        i + 1
        for i, message in enumerate(messages)
        if isinstance(message, dict) and message.get("role") == OUTPUT
    ]
    if not ends and messages:
        ends = [len(messages)]
    return ends
