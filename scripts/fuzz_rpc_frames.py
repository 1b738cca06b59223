"""The frames of ``scripts/fuzz-rpc``: what one generated line is, and the blocks lines are made of.

:class:`Frame` is one line with the id it carries and the answer it is owed;
:class:`FrameBuilder` draws the parts of a line (ids, texts, JSON values, save
files, conversations, well-formed requests) from a seeded ``random.Random``.
The categories of hostile lines built from them are in ``fuzz_rpc_generator.py``.
"""

from __future__ import annotations

import json
import os
import random
from typing import Any

from scoutd.config import PromptConfig

WEIGHTS: dict[str, float] = {
    "valid": 14,
    "wrong_type": 22,
    "truncated": 10,
    "random_bytes": 9,
    "non_utf8": 6,
    "deep": 4,
    "batch": 5,
    "missing_id": 8,
    "json_value": 4,
    "blank": 2,
    "escapes": 5,
    "odd_json": 6,
    "bad_envelope": 6,
    "huge": 0.25,
    "over_limit": 0.15,
    "override": 6,
    "odd_blocks": 3,
    "costly": 6,
}

SCALARS: list[Any] = [None, True, False, 0, -1, 7, 2**63 - 1, 2**64, -(2**70), 1.5, -0.0, 1e308]
SCALARS += ["", "x", "status", "é" * 3, "\u0000", "../../etc/passwd", "a" * 300]
# Values at and past the bounds of the [prompt] keys (docs/RELIABILITY.md, "What a
# client may configure"); module names are harmless ones: a daemon that served
# them as a tokenizer would import and run them.
EDGES: list[Any] = [0, 1, -1, 0.0, -0.0, 0.01, 0.5, 0.999999, 1.0, 1e6, 1e7, 1e308, -1e308]
EDGES += [5e-324, 2**63 - 1, 2**63, 10**400, -(10**400), "builtins:len", "json:dumps", "x" * 70_000]
PROMPT_KEYS = sorted(PromptConfig.__struct_fields__)
# A conversation under these is compacted by every strategy, and its epochs grow.
GROWING: dict[str, Any] = {
    "epoch_tool_call_threshold": 3,
    "epoch_full_tool_calls": 1,
    "epoch_compacted_tool_calls": 2,
    "epoch_size": 2,
    "epoch_increment_epochs_per_increase": 1,
    "max_tool_calls": 3,
    "context_window": 2000,
    "cost_full_tool_outputs": 1,
    "cost_compacted_tool_calls": 1,
}
INVALID_PARAMS = -32602


class Frame:
    """One generated line: its bytes, the id it carries, whether the daemon must answer."""

    __slots__ = ("category", "data", "expect", "id", "silent")

    def __init__(
        self,
        category: str,
        data: bytes,
        *,
        id: Any = None,
        silent: bool = False,
        expect: int | None = None,
    ) -> None:
        self.category = category
        self.data = data
        self.id = id
        self.silent = silent
        self.expect = expect  # the one error code the frame must get, if any


class FrameBuilder:
    """The building blocks of every frame category (:class:`fuzz_rpc_generator.Generator`)."""

    def __init__(self, rng: random.Random, root: str, limit: int) -> None:
        self.rng = rng
        self.root = root
        self.limit = limit

    def rid(self) -> Any:
        r = self.rng.random()
        if r < 0.6:
            return self.rng.randrange(-(2**31), 2**53)
        if r < 0.9:
            return self.rng.choice(["a", "id-é", "🙂", "x" * self.rng.randrange(1, 200)])
        return None

    def text(self, n: int | None = None) -> str:
        n = self.rng.randrange(0, 80) if n is None else n
        alphabet = 'abc xyz/é🙂\n\t"\\{}[]:,'
        return "".join(self.rng.choice(alphabet) for _ in range(n))

    def value(self, depth: int = 0) -> Any:
        r = self.rng.random()
        if depth > 2 or r < 0.6:
            return self.rng.choice(SCALARS)
        if r < 0.8:
            return [self.value(depth + 1) for _ in range(self.rng.randrange(0, 4))]
        return {self.text(5): self.value(depth + 1) for _ in range(self.rng.randrange(0, 4))}

    def save_file(self) -> str:
        r = self.rng.random()
        if r < 0.5:
            return os.path.join(self.root, f"c{self.rng.randrange(50)}.chat")
        return self.rng.choice(
            [
                "/etc/passwd",
                "relative.chat",
                os.path.join(self.root, "..", "escape.chat"),
                os.path.join(self.root, "sub", "..", "..", "x.chat"),
                "/" + "a" * 5000 + ".chat",
                os.path.join(self.root, "nul\u0000.chat"),
                "",
                os.path.join(self.root, "dir") + "/",
            ]
        )

    def messages(self) -> list[Any]:
        out: list[Any] = []
        for n in range(self.rng.randrange(0, 12)):
            r = self.rng.random()
            if r < 0.4:
                out.append({"role": self.rng.choice(["user", "system"]), "content": self.text()})
            elif r < 0.8:
                call = {"name": "grep", "arguments": {"q": self.text()}, "id": f"c{n}"}
                out.append({"role": "function_call", "content": json.dumps(call)})
                output = {"name": "grep", "content": self.text(400), "id": f"c{n}"}
                out.append({"role": "function_call_output", "content": json.dumps(output)})
            else:
                out.append({"role": "function_call_output", "content": self.text(), "k": 1})
        return out

    def request(self, method: str | None = None) -> dict[str, Any]:
        """A well-formed request of a random (or the given) method."""
        rng = self.rng
        method = method or rng.choice(
            ["prepare_prompt"] * 6 + ["session.open"] * 2 + ["session.close", "status"]
        )
        params: dict[str, Any] | None
        if method == "prepare_prompt":
            params = {"messages": self.messages()}
            if rng.random() < 0.5:
                params["strategies"] = rng.choice(
                    ["none", "shorten_tools", ["inbox", "shorten_tools_epoch"], "nope", [], ""]
                )
            if rng.random() < 0.3:
                params["save_file"] = self.save_file()
            if rng.random() < 0.1:
                params["session"] = os.urandom(16).hex()
            if rng.random() < 0.2:
                params["config"] = rng.choice(
                    [{"epoch_size": 5}, {"epoch_size": -1}, {"nope": 1}, {"full_tool_calls": "x"}]
                )
        elif method == "session.open":
            params = {"save_file": self.save_file()}
            if rng.random() < 0.3:
                params["pid"] = rng.choice([1, os.getpid(), 2**31 - 1])
        elif method == "session.close":
            params = {"session": os.urandom(16).hex()}
        elif method == "config.reload":
            params = None
        else:
            params = rng.choice([None, {}])
        request: dict[str, Any] = {"jsonrpc": "2.0", "id": self.rid(), "method": method}
        if params is not None:
            request["params"] = params
        return request

    def dumps(self, obj: Any) -> bytes:
        return json.dumps(obj, ensure_ascii=self.rng.random() < 0.5).encode()
