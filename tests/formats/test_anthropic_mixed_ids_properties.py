"""Properties of Anthropic conversations mixing block kinds whose ids meet (docs/FORMATS.md).

Client tools pair ``tool_use`` (assistant) with ``tool_result`` (the next user
turn); server tools (``server_tool_use`` and its ``*_tool_result``) and MCP
(``mcp_tool_use`` / ``mcp_tool_result``) live in one assistant turn. Conversations
are drawn mixing text, thinking, client pairs (results as a text or a list with
an image), server and MCP pairs, and hostile turns: ids shared across kinds (a
``tool_use`` and a ``server_tool_use`` with one id, a ``tool_result`` answering a
``server_tool_use``, an ``mcp_tool_result`` answering a ``tool_use``), ids used
twice, results before their use or in the wrong role, ids that are not text,
lone surrogates. For the default strategy, the epoch ones and ``shorten_tools``
with small windows:

(a) nothing raises; (b) the prompt breaks no rule of the API (:func:`problems`,
written from the Messages API's rules) the given turns did not already break;
(c) nothing but what scoutd may rewrite changes (:func:`changes`); (d) the input
is never changed; (e) a session fed the growing conversation answers each round
as ``prepare`` of it does.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

import scoutd
from scoutd.formats.view import blocks_text

from .drawn import MARKER, SETTINGS, STRATEGIES, configuration, output_text, same, session_rounds

IMAGE = {
    "type": "image",
    "source": {"type": "base64", "media_type": "image/png", "data": "i" * 800},
}
THINKING = ("thinking", "redacted_thinking")
SERVER_RESULTS = ("web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result")
USES = ("tool_use", "server_tool_use", "mcp_tool_use")
CLIENT = ["client", "client", "client_image", "server", "mcp"]
HOSTILE = [
    "shared_with_server",  # a tool_use and a server_tool_use with one id
    "result_for_server",  # a tool_result answering a server_tool_use
    "mcp_result_for_client",  # an mcp_tool_result answering a tool_use
    "duplicate_in_turn",
    "duplicate_across_turns",
    "result_before_use",
    "result_in_assistant",
    "use_without_result",
    "id_not_text",
    "surrogate_result",
    "surrogate_input",
    "use_in_user",  # a tool_use beside the results of the user turn
    "server_result_for_client",  # a web_search_tool_result answering a tool_use
]
SHARED = ["shared_with_server", "result_for_server", "mcp_result_for_client"]


def _key(block: Any) -> str:
    return json.dumps(block, sort_keys=True)


def _blocks(message: Any) -> list[Any]:
    content = message.get("content")
    return content if isinstance(content, list) else []


def _typed(block: Any) -> str | None:
    kind = block.get("type") if isinstance(block, dict) else None
    return kind if isinstance(kind, str) else None


def problems(messages: list[Any]) -> Counter[tuple[str, str]]:
    """What the Messages API refuses, by kind and id (plain reading of its rules)."""
    found: Counter[tuple[str, str]] = Counter()
    if messages and messages[0].get("role") != "user":
        found["first turn not user", ""] += 1
    seen_uses: Counter[str] = Counter()
    for n, message in enumerate(messages):
        role = message.get("role")
        if n and messages[n - 1].get("role") == role:
            found["roles do not alternate", str(role)] += 1
        content = message.get("content")
        if content in ([], "") or content is None:
            found["empty content", str(role)] += 1
        blocks = _blocks(message)
        for block in blocks:
            kind = _typed(block)
            if kind is None:
                found["block without type", str(role)] += 1
            elif kind == "text" and not str(block.get("text", "")).strip():
                found["blank text block", str(role)] += 1
        typed = [b for b in blocks if _typed(b)]
        if role == "assistant":
            uses = [b for b in typed if b["type"] == "tool_use"]
            for use in uses:
                seen_uses[str(use.get("id"))] += 1
                if not isinstance(use.get("id"), str):
                    found["id not text", str(use.get("id"))] += 1
                if not isinstance(use.get("input"), dict):
                    found["input not an object", str(use.get("id"))] += 1
            following = messages[n + 1] if n + 1 < len(messages) else None
            answers = Counter(
                str(b.get("tool_use_id"))
                for b in (
                    _blocks(following) if following and following.get("role") == "user" else []
                )
                if _typed(b) == "tool_result"
            )
            for use in uses:
                if answers[str(use.get("id"))] != 1 and following is not None:
                    found["tool_use not answered once", str(use.get("id"))] += 1
            # server and MCP uses: their result later in this turn, one each
            waiting: Counter[str] = Counter()
            for block in typed:
                kind = block["type"]
                if kind in ("server_tool_use", "mcp_tool_use"):
                    waiting[str(block.get("id"))] += 1
                elif kind in (*SERVER_RESULTS, "mcp_tool_result"):
                    ident = str(block.get("tool_use_id"))
                    if waiting[ident] > 0:
                        waiting[ident] -= 1
                    else:
                        found["server result without its use", ident] += 1
                elif kind == "tool_result":
                    found["tool_result in assistant turn", str(block.get("tool_use_id"))] += 1
            for ident, count in waiting.items():
                if count:
                    found["server use without its result", ident] += count
        elif role == "user":
            previous = messages[n - 1] if n and messages[n - 1].get("role") == "assistant" else {}
            asked = Counter(str(b.get("id")) for b in _blocks(previous) if _typed(b) == "tool_use")
            results = [b for b in typed if b["type"] == "tool_result"]
            for result in results:
                if not asked[str(result.get("tool_use_id"))]:
                    found["tool_result without its tool_use", str(result.get("tool_use_id"))] += 1
            leading = 0
            while leading < len(blocks) and _typed(blocks[leading]) == "tool_result":
                leading += 1
            if leading != len(results):
                found["tool_result after other blocks", ""] += 1
            for block in typed:
                if block["type"] in ("server_tool_use", "mcp_tool_use", "mcp_tool_result"):
                    found["server block in user turn", str(block.get("id"))] += 1
    for ident, count in seen_uses.items():
        if count > 1:
            found["tool_use id not unique", ident] += count - 1
    return found


def changes(given_messages: list[Any], prepared: list[Any]) -> Counter[str]:
    """Changes scoutd may not make: a block that is not one of the input's, other than a
    notice's text, a shortened ``tool_use`` input or ``tool_result`` content (same id,
    name and other keys); a thinking block edited; the blocks of a turn out of order."""
    found: Counter[str] = Counter()
    own = Counter(_key(b) for m in given_messages for b in _blocks(m))
    uses = {
        _key([b.get("id"), b.get("name")])
        for m in given_messages
        for b in _blocks(m)
        if _typed(b) == "tool_use"
    }
    results = {
        _key({k: v for k, v in b.items() if k != "content"})
        for m in given_messages
        for b in _blocks(m)
        if _typed(b) == "tool_result"
    }
    given_ids = {id(m) for m in given_messages}
    for message in prepared:
        if id(message) in given_ids:
            continue
        for block in _blocks(message):
            if _key(block) in own:
                continue
            kind = _typed(block)
            if kind == "text" and message.get("role") == "user":
                continue  # a notice
            if kind == "tool_use" and _key([block.get("id"), block.get("name")]) in uses:
                continue
            if (
                kind == "tool_result"
                and _key({k: v for k, v in block.items() if k != "content"}) in results
            ):
                continue
            found["thinking edited" if kind in THINKING else f"block changed: {kind}"] += 1
    return found


class _Drawn:
    """A conversation being drawn, and the hostile kinds put in it."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data
        self.messages: list[Any] = [{"role": "user", "content": "research and fix"}]
        self.serial = 0
        self.hostile: set[str] = set()
        self.used: list[Any] = []  # client tool ids so far
        self.early: list[Any] = []  # results put in the user turn before their use
        self.shared: list[tuple[str, str]] = []  # (hostile kind, the id kinds share)

    def draw(self, strategy: st.SearchStrategy[Any]) -> Any:
        return self.data.draw(strategy)

    def next_id(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}_{self.serial}"

    def result_content(self, image: bool) -> Any:
        text = output_text(self.serial, self.draw(st.sampled_from([0, 40, 120])))
        if not image and self.draw(st.booleans()):
            return text
        parts: list[Any] = [{"type": "text", "text": text}]
        if image:
            parts.append(dict(IMAGE))
        return parts

    def client(
        self, uses: list[Any], results: list[Any], image: bool = False, ident: Any = None
    ) -> None:
        ident = self.next_id("toolu") if ident is None else ident
        self.used.append(ident)
        uses.append(
            {"type": "tool_use", "id": ident, "name": "read", "input": {"path": f"/src/{ident}.py"}}
        )
        results.append(
            {"type": "tool_result", "tool_use_id": ident, "content": self.result_content(image)}
        )

    def server(self, uses: list[Any], ident: Any = None) -> str:
        ident = self.next_id("srvtoolu") if ident is None else ident
        kind = self.draw(st.sampled_from(SERVER_RESULTS))
        uses.append(
            {"type": "server_tool_use", "id": ident, "name": kind[:-12], "input": {"q": ident}}
        )
        content: Any = {
            "type": "code_execution_result",
            "stdout": "out " * 200,
            "stderr": "",
            "return_code": 0,
        }
        if kind == "web_search_tool_result":
            content = [
                {
                    "type": "web_search_result",
                    "url": "https://e.com",
                    "title": "t",
                    "encrypted_content": "E" * 800,
                }
            ]
        elif kind == "web_fetch_tool_result":
            page = {"type": "text", "media_type": "text/plain", "data": "page " * 200}
            content = {
                "type": "web_fetch_result",
                "url": "https://e.com",
                "content": {"type": "document", "source": page},
            }
        uses.append({"type": kind, "tool_use_id": ident, "content": content})
        return str(ident)

    def mcp(self, uses: list[Any], ident: Any = None) -> None:
        ident = self.next_id("mcptoolu") if ident is None else ident
        uses.append(
            {"type": "mcp_tool_use", "id": ident, "name": "get", "server_name": "s", "input": {}}
        )
        uses.append(
            {
                "type": "mcp_tool_result",
                "tool_use_id": ident,
                "is_error": False,
                "content": [{"type": "text", "text": f"m {ident}"}],
            }
        )

    def tool(self, kind: str, uses: list[Any], results: list[Any], extra: list[Any]) -> None:
        if kind in ("client", "client_image"):
            self.client(uses, results, kind == "client_image")
        elif kind == "server":
            self.server(uses)
        elif kind == "mcp":
            self.mcp(uses)
        elif kind == "shared_with_server":
            self.client(uses, results)
            self.shared.append((kind, uses[-1]["id"]))
            self.server(uses, uses[-1]["id"])
        elif kind == "result_for_server":
            ident = self.server(uses)
            self.shared.append((kind, ident))
            results.append(
                {"type": "tool_result", "tool_use_id": ident, "content": self.result_content(False)}
            )
        elif kind == "mcp_result_for_client":
            self.client(uses, results)
            self.shared.append((kind, uses[-1]["id"]))
            answer = {
                "type": "mcp_tool_result",
                "tool_use_id": uses[-1]["id"],
                "is_error": False,
                "content": [{"type": "text", "text": "mcp"}],
            }
            if self.draw(st.booleans()):
                uses.append(answer)
            else:
                extra.append(answer)
        elif kind == "duplicate_in_turn":
            self.client(uses, results)
            self.client(uses, results, ident=uses[-1]["id"])
        elif kind == "duplicate_across_turns":
            earlier = [i for i in self.used if isinstance(i, str)]
            self.client(
                uses, results, ident=self.draw(st.sampled_from(earlier)) if earlier else None
            )
        elif kind == "result_before_use":
            self.client(uses, results)
            self.early.append(results.pop())
        elif kind == "result_in_assistant":
            self.client(uses, results)
            uses.append(results.pop())
        elif kind == "use_without_result":
            self.client(uses, results)
            results.pop()
        elif kind == "id_not_text":
            self.client(uses, results, ident=self.draw(st.sampled_from([7, None, ["x"]])))
        elif kind == "surrogate_result":
            self.client(uses, results)
            results[-1]["content"] = f"{output_text(self.serial, 40)}\udfff"
        elif kind == "use_in_user":
            self.client(uses, results)
            extra.append(
                {"type": "tool_use", "id": self.next_id("toolu"), "name": "x", "input": {}}
            )
        elif kind == "server_result_for_client":
            self.client(uses, results)
            found = {"type": "web_search_tool_result", "tool_use_id": uses[-1]["id"], "content": []}
            (uses if self.draw(st.booleans()) else extra).append(found)
        else:  # surrogate_input
            self.client(uses, results)
            uses[-1]["input"] = {"path": "/src/\ud800"}

    def turn(self, hostile: bool) -> None:
        kinds = [*CLIENT, *HOSTILE, *SHARED, *SHARED] if hostile else CLIENT
        chosen = self.draw(st.lists(st.sampled_from(kinds), min_size=0, max_size=3))
        self.hostile.update(k for k in chosen if k in HOSTILE)
        uses: list[Any] = []
        results: list[Any] = []
        extra: list[Any] = []
        for kind in chosen:
            self.tool(kind, uses, results, extra)
        if self.early:  # results for a use the next turn makes, sent now
            last = self.messages[-1]
            if last["role"] == "user":
                last["content"] = [*self.early, *_blocks(last)] or self.early
                self.early = []
        blocks: list[Any] = []
        thinking = self.draw(st.sampled_from(["none", "thinking", "redacted"]))
        if thinking == "thinking":
            blocks.append(
                {
                    "type": "thinking",
                    "thinking": f"step {self.serial}",
                    "signature": f"s{self.serial}",
                }
            )
        elif thinking == "redacted":
            blocks.append({"type": "redacted_thinking", "data": f"r{self.serial}"})
        if not uses or self.draw(st.booleans()):
            blocks.append({"type": "text", "text": f"Round {self.serial}."})
        blocks += uses
        self.messages.append({"role": "assistant", "content": blocks})
        if self.draw(st.booleans()):
            results.reverse()
        after: list[Any] = [*results, *extra]
        if self.draw(st.integers(0, 3)) == 0 or not after:
            after.append({"type": "text", "text": "go on"})
        if self.draw(st.integers(0, 4)) == 0:
            after.append(dict(IMAGE))
        self.messages.append({"role": "user", "content": after})


def conversation(data: st.DataObject) -> tuple[list[Any], set[str], list[tuple[str, str]]]:
    drawn = _Drawn(data)
    hostile = data.draw(st.booleans())
    for _ in range(data.draw(st.integers(2, 7))):
        drawn.turn(hostile)
    if data.draw(st.integers(0, 3)) == 0:
        drawn.messages.pop()  # ends on calls still waiting
    return drawn.messages, drawn.hostile, drawn.shared


def _facts(
    given_messages: list[Any],
    prepared: list[Any],
    shared: list[tuple[str, str]],
    seen: Counter[str],
) -> None:
    given_ids = {id(m) for m in given_messages}
    own = {_key(b) for m in given_messages for b in _blocks(m)}
    sent_uses = {_key(b) for m in prepared for b in _blocks(m) if _typed(b) == "tool_use"}
    acted: set[str] = set()
    for message in prepared:
        if id(message) in given_ids:
            continue
        for block in _blocks(message):
            if _typed(block) == "tool_result" and _key(block) not in own:
                seen["pair shortened"] += 1
                event("pair shortened")
                acted.add(str(block.get("tool_use_id")))
    for message in given_messages:
        for block in _blocks(message):
            if _typed(block) == "tool_use" and _key(block) not in sent_uses:
                seen["pair dropped"] += 1
                event("pair dropped")
                acted.add(str(block.get("id")))
    for kind, ident in shared:
        seen[f"reached: {kind}"] += 1
        if ident in acted:
            seen[f"acted on: {kind}"] += 1
            event(f"acted on: {kind}")


def _check_recall(
    session: scoutd.Session, part: list[Any], prompt: list[Any], seen: Counter[str]
) -> None:
    """Each ``recall #N`` a shortened result shows gives back the exact text of a result
    with its ``tool_use_id`` (of the one it stands for: the same position among them)."""
    originals: dict[str, list[Any]] = {}
    for message in part:
        for block in _blocks(message):
            if _typed(block) == "tool_result":
                originals.setdefault(str(block.get("tool_use_id")), []).append(block)
    own = {_key(b) for m in part for b in _blocks(m)}
    for message in prompt:
        for block in _blocks(message):
            if _typed(block) != "tool_result" or _key(block) in own:
                continue
            for length, handle in MARKER.findall(blocks_text(block.get("content")) or ""):
                answer = session.recall(int(handle))
                texts = [
                    blocks_text(b.get("content")) for b in originals[str(block["tool_use_id"])]
                ]
                assert answer in texts, (handle, block["tool_use_id"])
                assert int(length) == len(answer), handle
                seen["recall by marker"] += 1


def test_mixed_kinds_sharing_ids_are_compacted_validly() -> None:
    """(a) to (d) over prepare, (e) over a session of the same conversation."""
    seen: Counter[str] = Counter()

    @SETTINGS
    @given(data=st.data(), strategy=st.sampled_from(STRATEGIES))
    def check(data: st.DataObject, strategy: str | None) -> None:
        messages, hostile, shared = conversation(data)
        config = configuration(data, strategy)
        snapshot = copy.deepcopy(messages)
        prepared = scoutd.prepare(
            messages, strategy, format="anthropic", config=config
        ).messages  # (a)
        assert same(messages, snapshot)  # (d)
        if not hostile:
            assert problems(messages) == Counter(), messages  # the drawing is valid
        assert problems(prepared) - problems(messages) == Counter(), json.dumps(
            [messages, prepared, config]
        )  # (b)
        assert changes(messages, prepared) == Counter()  # (c)
        _facts(messages, prepared, shared, seen)
        seen["hostile" if hostile else "plain"] += 1
        for s, part, prompt in session_rounds(messages, "anthropic", strategy, config):  # (e)
            if config["recall"]:
                _check_recall(s, part, prompt, seen)
        assert same(messages, snapshot)

    check()
    floors = {
        "pair shortened": 10,
        "pair dropped": 10,
        "hostile": 20,
        "acted on: shared_with_server": 1,
        "reached: result_for_server": 5,  # its turn passes through: nothing to act on
        "recall by marker": 10,
        "reached: mcp_result_for_client": 5,
    }
    assert all(seen[name] >= floor for name, floor in floors.items()), seen


def test_the_notice_never_follows_calls_still_waiting() -> None:
    """A dropped pair, then a last turn of calls waiting for their results: the notice
    goes before that turn (joining the user turn before it), never after it as a user
    turn without the results. Found by the property above (1,500 random examples)."""
    messages: list[Any] = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "r", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
                {"type": "text", "text": "y" * 6000},
            ],
        },
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t2", "name": "r", "input": {}}],
        },
    ]
    prepared = scoutd.prepare(messages, format="anthropic", config={"context_window": 1500})
    assert "Context compaction" in json.dumps(prepared.messages)
    assert prepared.messages[-1] is messages[-1]
    assert problems(prepared.messages) == Counter()
