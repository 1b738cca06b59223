"""The frame generator of ``scripts/fuzz-rpc``: one method per category of hostile line.

A category is drawn by its weight (``WEIGHTS``); each builds its :class:`Frame`
from the blocks of :class:`FrameBuilder` (``fuzz_rpc_frames.py``): random bytes,
truncated JSON, deep nesting, a wrong type in every field, non-UTF-8, refused
escapes, lines over the limit, batches, notifications, odd JSON, valid requests,
the costliest conversation of each provider format, overrides at and past the
[prompt] bounds and odd Anthropic content blocks.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from typing import Any

from fuzz_rpc_frames import (
    EDGES,
    GROWING,
    INVALID_PARAMS,
    PROMPT_KEYS,
    SCALARS,
    WEIGHTS,
    Frame,
    FrameBuilder,
)

from scoutd.config import OPERATOR_ONLY
from scoutd.testing.worst import WORST


class Generator(FrameBuilder):
    def __init__(self, rng: random.Random, root: str, limit: int) -> None:
        super().__init__(rng, root, limit)
        self.makers: dict[str, Callable[[], Frame]] = {
            name: getattr(self, "_" + name) for name in WEIGHTS
        }
        self.names = list(WEIGHTS)
        self.weights = [WEIGHTS[name] for name in self.names]

    def frame(self) -> Frame:
        name = self.rng.choices(self.names, self.weights)[0]
        frame = self.makers[name]()
        try:  # the id the daemon can read, whatever the maker meant (escapes, -0, ...)
            decoded = json.loads(frame.data)
        except (ValueError, RecursionError):
            return frame
        if isinstance(decoded, dict) and "id" in decoded:
            frame.id = decoded["id"]
        return frame

    # --- categories -------------------------------------------------------------------------

    def _valid(self) -> Frame:
        method = "config.reload" if self.rng.random() < 0.02 else None
        request = self.request(method)
        return Frame("valid", self.dumps(request), id=request["id"])

    def _wrong_type(self) -> Frame:
        request = self.request()
        paths: list[tuple[Any, Any]] = []

        def walk(node: Any) -> None:
            if isinstance(node, dict):
                for key, child in node.items():
                    paths.append((node, key))
                    walk(child)
            elif isinstance(node, list):
                for index, child in enumerate(node):
                    paths.append((node, index))
                    walk(child)

        walk(request)
        container, key = self.rng.choice(paths)
        old = container[key]
        choices = [v for v in [*SCALARS, [], [1], {}, {"a": 1}] if type(v) is not type(old)]
        container[key] = self.rng.choice(choices)
        rid = request.get("id")
        return Frame("wrong_type", self.dumps(request), id=rid)

    def _truncated(self) -> Frame:
        request = self.request()
        data = self.dumps(request)
        return Frame("truncated", data[: self.rng.randrange(1, len(data))], id=request["id"])

    def _random_bytes(self) -> Frame:
        size = int(math.exp(self.rng.uniform(0, math.log(65536))))
        data = self.rng.randbytes(size).replace(b"\n", b" ")
        return Frame("random_bytes", data, silent=self.is_blank(data))

    def _non_utf8(self) -> Frame:
        request = self.request("prepare_prompt")
        request["params"]["messages"].append({"role": "user", "content": "MARKER"})
        bad = self.rng.choice(
            [b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80", b"\xe2\x82"]
        )
        data = json.dumps(request).encode().replace(b"MARKER", b"ab" + bad + b"cd")
        if self.rng.random() < 0.3:
            data = data.replace(b'"prepare_prompt"', b'"prepare' + bad + b'"')
        return Frame("non_utf8", data, id=request["id"])

    def _deep(self) -> Frame:
        depth = int(math.exp(self.rng.uniform(math.log(10), math.log(200_000))))
        opener, closer = self.rng.choice([("[", "]"), ('{"a":', "}")])
        nested = opener * depth + "1" + closer * depth
        rid = self.rng.randrange(1, 2**31)
        where = self.rng.choice(["top", "params", "content", "id", "messages"])
        if where == "top":
            text = nested
        elif where == "params":
            text = f'{{"jsonrpc":"2.0","id":{rid},"method":"status","params":{nested}}}'
        elif where == "content":
            text = (
                f'{{"jsonrpc":"2.0","id":{rid},"method":"prepare_prompt","params":'
                f'{{"messages":[{{"role":"user","content":{nested}}}]}}}}'
            )
        elif where == "id":
            text = f'{{"jsonrpc":"2.0","id":{nested},"method":"status"}}'
        else:
            text = (
                f'{{"jsonrpc":"2.0","id":{rid},"method":"prepare_prompt",'
                f'"params":{{"messages":{nested}}}}}'
            )
        return Frame("deep", text.encode(), id=rid if where != "top" else None)

    def _batch(self) -> Frame:
        items = [
            self.request() if self.rng.random() < 0.7 else self.value()
            for _ in range(self.rng.randrange(0, 6))
        ]
        return Frame("batch", self.dumps(items))

    def _missing_id(self) -> Frame:
        request = self.request()
        del request["id"]
        if self.rng.random() < 0.3:
            request["method"] = self.rng.choice(["nope", "session.close", "prepare_prompt"])
        return Frame("missing_id", self.dumps(request), silent=True)

    def _json_value(self) -> Frame:
        return Frame("json_value", self.dumps(self.value()))

    def is_blank(self, data: bytes) -> bool:
        """What the daemon skips: nothing but whitespace (after one trailing CR)."""
        line = data[:-1] if data.endswith(b"\r") else data
        return len(line) <= self.limit and not line.strip()

    def _blank(self) -> Frame:
        data = self.rng.choice([b"", b" ", b"\t \t", b"\r", b" \r", b"\x0b\x0c"])
        return Frame("blank", data, silent=True)

    def _escapes(self) -> Frame:
        rid: int | None = self.rng.randrange(1, 2**31)
        escape = self.rng.choice(
            ["\\ud800", "\\udc00\\ud800", "\\u0000", "\\uZZZZ", "\\x41", "\\", "\\ud83d\\ude42"]
        )
        field = self.rng.choice(["method", "content", "save_file", "id"])
        if field == "method":
            text = f'{{"jsonrpc":"2.0","id":{rid},"method":"sta{escape}tus"}}'
        elif field == "content":
            text = (
                f'{{"jsonrpc":"2.0","id":{rid},"method":"prepare_prompt","params":'
                f'{{"messages":[{{"role":"user","content":"a{escape}b"}}]}}}}'
            )
        elif field == "save_file":
            text = (
                f'{{"jsonrpc":"2.0","id":{rid},"method":"session.open","params":'
                f'{{"save_file":"{self.root}/a{escape}b.chat"}}}}'
            )
        else:
            text = f'{{"jsonrpc":"2.0","id":"i{escape}d","method":"status"}}'
            rid = None
        return Frame("escapes", text.encode(), id=rid)

    def _odd_json(self) -> Frame:
        rid = self.rng.randrange(1, 2**31)
        base = f'{{"jsonrpc":"2.0","id":{rid},"method":"status"}}'
        text = self.rng.choice(
            [
                base.replace('"status"', '"status","params":{},"params":{"x":1}'),
                base + " trailing",
                base + base,
                "\ufeff" + base,
                base.replace(f"{rid}", "NaN"),
                base.replace(f"{rid}", "Infinity"),
                base.replace(f"{rid}", "1e999"),
                base.replace(f"{rid}", "-0"),
                base.replace("}", ",}"),
                base.replace('"', "'"),
                "// comment " + base,
                base.replace(f"{rid}", "0x10"),
                base.replace(f"{rid}", f"{rid}.0"),
                base.replace(":", " : ").replace(",", " , "),
            ]
        )
        return Frame("odd_json", text.encode(), id=rid)

    def _bad_envelope(self) -> Frame:
        request = self.request()
        change = self.rng.choice(["no_method", "jsonrpc", "no_jsonrpc", "params", "extra"])
        if change == "no_method":
            del request["method"]
        elif change == "jsonrpc":
            request["jsonrpc"] = self.rng.choice(["1.0", 2.0, "2.00", "", None])
        elif change == "no_jsonrpc":
            del request["jsonrpc"]
        elif change == "params":
            request["params"] = self.rng.choice([[1, 2], "x", 3, True])
        else:
            request["unknown_member"] = self.value()
        return Frame("bad_envelope", self.dumps(request), id=request["id"])

    def _huge(self) -> Frame:
        size = int(self.limit * self.rng.uniform(0.5, 0.95))
        request = self.request("prepare_prompt")
        request["params"] = {
            "messages": [{"role": "user", "content": "h" * size}],
            "strategies": "none",
        }
        return Frame("huge", json.dumps(request).encode(), id=request["id"])

    def _costly(self) -> Frame:
        """A prepare of a conversation built to cost the most in its format
        (tests/formats/worst.py), named or detected, sometimes with hostile values."""
        rng = self.rng
        fmt = rng.choice(sorted(WORST))
        messages = rng.choice(WORST[fmt])(int(math.exp(rng.uniform(0, math.log(400)))))
        for _ in range(rng.choice([0, 0, 1, 3])):
            _spoil(rng, messages, self.value())
        params: dict[str, Any] = {"messages": messages}
        params["format"] = rng.choice(["auto", fmt, fmt, rng.choice(sorted(WORST))])
        strategies = rng.choice(COSTLY_STRATEGIES)
        if strategies is not None:
            params["strategies"] = strategies
        config = rng.choice(COSTLY_CONFIGS)
        if config is not None:
            params["config"] = config
        request = {"jsonrpc": "2.0", "id": self.rid(), "method": "prepare_prompt"}
        request["params"] = params
        return Frame("costly", self.dumps(request), id=request["id"])

    def _over_limit(self) -> Frame:
        size = int(self.limit * self.rng.uniform(1.05, 2.5))
        if self.rng.random() < 0.5:
            request = self.request("prepare_prompt")
            request["params"] = {"messages": [{"role": "user", "content": "o" * size}]}
            return Frame("over_limit", json.dumps(request).encode())
        return Frame("over_limit", b"z" * size)

    def _override(self) -> Frame:
        """A conversation long enough to be compacted, with one to three keys at or past
        their bounds; one naming code must be refused (-32602), never run."""
        rng = self.rng
        pairs = rng.randrange(4, 40)
        messages: list[Any] = [{"role": "user", "content": "fix it"}]
        for n in range(pairs):
            call = {"name": "grep", "arguments": {"q": self.text(30)}, "id": f"c{n}"}
            output = {"name": "grep", "content": self.text(300), "id": f"c{n}"}
            messages.append({"role": "function_call", "content": json.dumps(call)})
            messages.append({"role": "function_call_output", "content": json.dumps(output)})
        config = dict(GROWING) if rng.random() < 0.8 else {}
        for key in rng.sample(PROMPT_KEYS, rng.randrange(1, 4)):
            config[key] = rng.choice(EDGES)
        if rng.random() < 0.15:  # code named outright, as an agent would try
            config["tokenizer"] = rng.choice(["builtins:len", "json:dumps", "os.path:join"])
        params: dict[str, Any] = {"messages": messages, "config": config}
        params["strategies"] = rng.choice(
            [
                "shorten_tools_epoch_increment",
                "shorten_tools_epoch",
                "shorten_tools",
                "shorten_tools_cost_aware",
                ["none"],
            ]
        )
        if rng.random() < 0.3:
            del params["strategies"]  # the default chain
        request = {"jsonrpc": "2.0", "id": self.rid(), "method": "prepare_prompt"}
        request["params"] = params
        expect = INVALID_PARAMS if OPERATOR_ONLY.intersection(config) else None
        return Frame("override", self.dumps(request), id=request["id"], expect=expect)

    def _odd_blocks(self) -> Frame:
        """Anthropic turns whose content blocks have a ``type`` of any JSON shape, with
        the cache hint asked for: malformed blocks pass through, never an error."""
        rng = self.rng
        messages: list[Any] = [{"role": "user", "content": "fix it"}]
        for n in range(rng.randrange(1, 6)):
            blocks: list[Any] = [{"type": "text", "text": self.text(20)}]
            blocks.append({"type": "tool_use", "id": f"t{n}", "name": "bash", "input": {}})
            for _ in range(rng.randrange(0, 3)):
                kind = rng.choice([["text"], {"type": "text"}, None, 7, [], {}, "thinking"])
                blocks.insert(rng.randrange(len(blocks) + 1), {"type": kind, "text": "x"})
            messages.append({"role": "assistant", "content": blocks})
            result = {"type": "tool_result", "tool_use_id": f"t{n}", "content": self.text(200)}
            messages.append({"role": "user", "content": [result]})
        if rng.random() < 0.5:
            odd = {"type": rng.choice([["text"], {"a": 1}]), "text": "end"}
            messages.append({"role": "assistant", "content": [odd]})
        request = {"jsonrpc": "2.0", "id": self.rid(), "method": "prepare_prompt"}
        request["params"] = {
            "messages": messages,
            "format": rng.choice(["anthropic", "auto"]),
            "cache_control": True,
            "strategies": rng.choice(["none", "shorten_tools_epoch", "inbox"]),
            "config": rng.choice([{}, GROWING]),
        }
        return Frame("odd_blocks", self.dumps(request), id=request["id"])


COSTLY_STRATEGIES: list[Any] = [
    None,
    "shorten_tools_epoch",
    "shorten_tools",
    "shorten_tools_epoch_increment",
    ["shorten_tools_cost_aware", "inbox"],
]
# Per-call overrides that make the strategies drop and shorten most pairs.
COSTLY_CONFIGS: list[Any] = [
    None,
    {"context_window": 2000},
    {
        "epoch_tool_call_threshold": 2,
        "epoch_full_tool_calls": 1,
        "epoch_compacted_tool_calls": 1,
        "epoch_size": 1,
    },
]


def _spoil(rng: random.Random, messages: list[Any], value: Any) -> None:
    """Put ``value`` at one place drawn in ``messages`` (a key of an object or an item)."""
    containers: list[Any] = []
    stack: list[Any] = [messages]
    while stack:
        node = stack.pop()
        containers.append(node)
        children = node.values() if isinstance(node, dict) else node
        stack.extend(c for c in children if isinstance(c, (dict, list)))
    target = rng.choice(containers)
    if isinstance(target, dict):
        keys = [*target, "type", "content", "id", "tool_use_id", "call_id", "role"]
        target[rng.choice(keys)] = value
    elif target:
        target[rng.randrange(len(target))] = value
