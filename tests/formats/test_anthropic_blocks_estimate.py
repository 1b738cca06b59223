"""Anthropic turns with the blocks real agents send: server tools, MCP, thinking, media.

The default's estimate must see what the provider bills: a server tool's result
(a fetched page, a search's results, code output) and an image or document beside
the tool results of a user turn are sent and billed, so a prompt the default
prepares for a window must fit that window by a plain count of what it sends.
And every prepared request must stay one the API accepts (``_problems``, written
from the Messages API's rules, not from the adapter).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from scoutd import Session, prepare

from .validity import anthropic_problems

IMAGE = {
    "type": "image",
    "source": {"type": "base64", "media_type": "image/png", "data": "i" * 3000},
}
MEDIA_CHARS = 6_000  # what the estimate charges an image (strategies/media.py), in characters
THINKING = ("thinking", "redacted_thinking")
SERVER_RESULTS = ("web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result")


def _sent_tokens(messages: list[Any]) -> int:
    """A plain count of a prompt: every string's characters, an image or document at the
    estimate's fixed cost, four characters a token."""
    total = 0
    pending: list[Any] = [m["content"] for m in messages]
    while pending:
        value = pending.pop()
        if isinstance(value, str):
            total += len(value)
        elif isinstance(value, list):
            pending.extend(value)
        elif isinstance(value, dict):
            if value.get("type") in ("image", "document") and "source" in value:
                total += MEDIA_CHARS
            else:
                pending.extend(value.values())
    return total // 4


def _server_pair(n: int, kind: str) -> list[dict[str, Any]]:
    ident = f"srvtoolu_{n}"
    content: Any
    if kind == "web_fetch_tool_result":
        page = {"type": "text", "media_type": "text/plain", "data": "page text " * 600}
        document = {"type": "document", "source": page}
        content = {"type": "web_fetch_result", "url": "https://e.com", "content": document}
    elif kind == "web_search_tool_result":
        found = {"type": "web_search_result", "url": "https://e.com", "title": "t"}
        content = [dict(found, encrypted_content="E" * 6000)]
    else:
        content = {"type": "code_execution_result", "stdout": "out " * 1500, "stderr": ""}
    return [
        {"type": "server_tool_use", "id": ident, "name": kind[:-12], "input": {"q": n}},
        {"type": kind, "tool_use_id": ident, "content": content},
    ]


def _agent(rounds: int, beside: bool = False, text: bool = True) -> list[Any]:
    """An agent with thinking, a server tool (and MCP) in every turn of calls; ``beside``:
    a screenshot beside each tool result in the user turn (and no server tool)."""
    messages: list[Any] = [{"role": "user", "content": "Research and fix."}]
    for n in range(rounds):
        blocks: list[Any] = [{"type": "thinking", "thinking": f"step {n}", "signature": f"s{n}"}]
        if n % 4 == 3:
            blocks = [{"type": "redacted_thinking", "data": f"r{n}"}]
        if text:
            blocks.append({"type": "text", "text": f"Round {n}."})
        if not beside:
            blocks += _server_pair(n, SERVER_RESULTS[n % 3])
        if n % 5 == 4:
            mcp = {"type": "mcp_tool_use", "id": f"mcptoolu_{n}", "name": "get", "input": {}}
            out = {"type": "mcp_tool_result", "tool_use_id": f"mcptoolu_{n}", "is_error": False}
            blocks += [
                dict(mcp, server_name="s"),
                dict(out, content=[{"type": "text", "text": "m"}]),
            ]
        blocks.append({"type": "tool_use", "id": f"toolu_{n}", "name": "save", "input": {"n": n}})
        messages.append({"role": "assistant", "content": blocks})
        result: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": f"toolu_{n}",
            "content": "saved " * 50,
        }
        if beside:
            result["content"] = "line of output\n" * 500
        if n % 6 == 5:
            result["is_error"] = True
        messages.append({"role": "user", "content": [result, *([dict(IMAGE)] if beside else [])]})
    return messages


def _blocks(message: Any) -> list[Any]:
    content = message["content"]
    return content if isinstance(content, list) else []


def _problems(given: list[Any], sent: list[Any]) -> Counter[str]:
    """What the API refuses beyond ``anthropic_problems``: a server or MCP tool's use
    without its result in the same assistant turn, a thinking block that is not one
    of the input's, an assistant turn of thinking only, the last turn of calls sent
    without its thinking first, more than four cache marks."""
    problems: Counter[str] = Counter(kind for kind, _ in anthropic_problems(sent))
    own = {
        json.dumps(b, sort_keys=True) for m in given for b in _blocks(m) if b["type"] in THINKING
    }
    marks = 0
    for message in sent:
        blocks = _blocks(message)
        uses = sorted(b["id"] for b in blocks if b["type"] in ("server_tool_use", "mcp_tool_use"))
        answers = sorted(b["tool_use_id"] for b in blocks if b["type"].endswith("tool_result"))
        if message["role"] == "assistant" and uses != answers:
            problems["server tool use without its result"] += 1
        if message["role"] == "assistant" and all(b["type"] in THINKING for b in blocks):
            problems["assistant turn of thinking only"] += 1
        marks += sum("cache_control" in b for b in blocks)
        for block in blocks:
            if block["type"] in THINKING and json.dumps(block, sort_keys=True) not in own:
                problems["thinking edited"] += 1
    problems["more than four cache marks"] += marks > 4
    last = [m for m in sent if m["role"] == "assistant"]
    if last and sent[-1] is given[-1] and last[-1]["content"][0] != given[-2]["content"][0]:
        problems["last turn of calls without its thinking first"] += 1
    return +problems


def test_server_tool_results_count_in_the_estimate() -> None:
    """A fetched page or search results in a turn of calls are billed: the prompt fits."""
    messages = _agent(40)
    window = 20_000
    assert _sent_tokens(messages) > 2 * window  # the input does not fit
    prepared = prepare(messages, format="anthropic", config={"context_window": window})
    assert _sent_tokens(prepared.messages) <= window
    assert not _problems(messages, prepared.messages)


def test_images_beside_tool_results_count_in_the_estimate() -> None:
    """An image in a user turn of tool results is billed like one in any user turn."""
    messages = _agent(10, beside=True)
    window = 24_000
    assert _sent_tokens(messages) > window
    prepared = prepare(messages, format="anthropic", config={"context_window": window})
    assert _sent_tokens(prepared.messages) <= window
    assert not _problems(messages, prepared.messages)


def test_a_turn_without_text_drops_no_narration() -> None:
    """A dropped turn of calls whose only other blocks are a server tool's counts no narration."""
    messages = _agent(40, text=False)
    prepared = prepare(messages, format="anthropic", config={"context_window": 20_000})
    assert prepared.report[0].calls_dropped > 0
    assert prepared.report[-1].narration_dropped == 0
    assert not _problems(messages, prepared.messages)


def test_every_round_of_a_session_is_a_valid_request(tmp_path: Path) -> None:
    """Round by round, with the cache hint and an operator notice: each prompt is one the API
    accepts and the one ``prepare`` gives for the whole conversation."""
    full = _agent(24, beside=True)
    config = {"context_window": 30_000}
    save = tmp_path / "run.chat"
    inbox = tmp_path / "run.inbox"
    with Session(str(save), format="anthropic", config=config, cache_control=True) as session:
        for end in range(3, len(full) + 1, 2):
            if end == 21:
                inbox.mkdir()
                (inbox / "note.txt").write_text("Operator: wrap up.")
            messages = full[:end]
            prompt = session.prepare_prompt(messages)
            assert not _problems(messages, prompt), end
            if end != 21:  # the notice is delivered once, by the session
                whole = prepare(messages, format="anthropic", config=config, cache_control=True)
                assert prompt == whole.messages, end
            if end == 21:
                assert "Operator: wrap up." in json.dumps(prompt[-1])
