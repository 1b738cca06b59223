"""The LiteLLM proxy hook keeps its chats within a memory bound, not only a count.

Each kept chat holds its conversation in the proxy's process; the bound
counts what they hold as the daemon counts its sessions (checked here against
a plain oracle), and the least recently used chat goes first.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

# LiteLLM fetches its model price map from the network at import unless told not to.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
if os.environ.get("CI") != "true":  # CI installs the test extra: a missing LiteLLM fails there
    pytest.importorskip("litellm.proxy", reason="needs the extra scoutd[litellm]")

from scoutd.integrations.litellm import ProxySettings, ScoutdProxyHook
from tests.engine.test_session_held import oracle

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::PendingDeprecationWarning"),
]

MIB = 1 << 20
CHAT = "openai-chat"


def conversation(tag: str, outputs: int) -> list[dict[str, Any]]:
    """An OpenAI Chat conversation of ``outputs`` tool outputs of 2,000 characters."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"task {tag}"}]
    for n in range(outputs):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": f"{tag}{n} " * 400})
    return messages


def test_the_memory_bound_comes_from_the_environment() -> None:
    assert ProxySettings.from_env({"SCOUTD_LITELLM_MAX_BYTES": "5242880"}).max_bytes == 5 * MIB
    assert ProxySettings().max_bytes == 1 << 30
    for bad in ("0", "1048575", "x", str(1 << 50)):
        with pytest.raises(ValueError):
            ProxySettings.from_env({"SCOUTD_LITELLM_MAX_BYTES": bad})


def test_the_least_recently_used_chats_go_when_the_kept_ones_hold_too_much(
    tmp_path: Path,
) -> None:
    a, b, c, d = (str(tmp_path / f"{name}.chat") for name in "abcd")
    chats = {name: conversation(name, 60) for name in (a, b, c)}
    one = oracle(chats[a])
    assert one > MIB  # each chat alone fits the bound below, two do, three do not
    bound = int(2.5 * one)
    hook = ScoutdProxyHook(ProxySettings(roots=(str(tmp_path),), max_bytes=bound))
    try:
        hook.prepare(a, CHAT, chats[a])
        hook.prepare(b, CHAT, chats[b])
        assert hook.chats == [(a, CHAT), (b, CHAT)]
        assert hook.held == oracle(chats[a]) + oracle(chats[b])
        hook.prepare(c, CHAT, chats[c])  # three would pass the bound: a, the oldest, goes
        assert hook.chats == [(b, CHAT), (c, CHAT)]
        assert hook.held == oracle(chats[b]) + oracle(chats[c]) <= bound
        grown = chats[b] + conversation(b, 40)[1:]  # b grows: now c is the oldest
        hook.prepare(b, CHAT, grown)
        assert oracle(grown) + oracle(chats[c]) > bound
        assert hook.chats == [(b, CHAT)] and hook.held == oracle(grown)
        huge = conversation(d, 200)  # alone over the bound: served, never kept
        assert oracle(huge) > bound
        prepared = hook.prepare(d, CHAT, huge)
        assert prepared.messages
        assert hook.chats == [(b, CHAT)] and hook.held == oracle(grown)
        again = hook.prepare(a, CHAT, chats[a])  # an evicted chat starts a new session
        assert again.messages and (a, CHAT) in hook.chats
    finally:
        hook.close()
    assert hook.chats == [] and hook.held == 0
