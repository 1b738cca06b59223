"""Teams that share a LiteLLM proxy reach only their own chats (``SCOUTD_LITELLM_TEAM_ROOTS``).

The hook is called as LiteLLM's proxy calls it, with the authenticated key
(LiteLLM's own ``UserAPIKeyAuth``) whose team decides the roots: a key of
team A naming team B's chat gets 400 and never reads B's inbox (its notices,
its abort's reason). Only the team LiteLLM gave the key counts, never one the
request body names.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
if os.environ.get("CI") != "true":  # CI installs the test extra: a missing LiteLLM fails there
    pytest.importorskip("litellm.proxy", reason="needs the extra scoutd[litellm]")

from fastapi import HTTPException
from litellm.proxy._types import UserAPIKeyAuth

from scoutd.inbox import write_abort, write_notice
from scoutd.integrations.litellm import CHAT_HEADER, PASSTHROUGH, ProxySettings, ScoutdProxyHook
from tests.integrations import test_litellm

pytestmark = test_litellm.pytestmark  # LiteLLM's own warnings, as there

USER = {"role": "user", "content": "go on"}


def call(hook: ScoutdProxyHook, team: str | None, save_file: str | None, **body: Any) -> Any:
    """One request of a key of ``team`` through the pre-call hook; its body as sent on."""
    headers = {} if save_file is None else {CHAT_HEADER: save_file}
    data = {"messages": [USER], "proxy_server_request": {"headers": headers}, **body}

    async def hook_call() -> Any:
        return await hook.async_pre_call_hook(
            UserAPIKeyAuth(team_id=team), None, data, "acompletion"
        )

    return anyio.run(hook_call)


def test_team_roots_come_from_the_environment() -> None:
    found = ProxySettings.from_env({"SCOUTD_LITELLM_TEAM_ROOTS": '{"a": ["/srv/a", ""], "b": []}'})
    assert found.team_roots == {"a": ("/srv/a",), "b": ()} and found.supervised
    assert found.roots_of("a") == ("/srv/a",) and found.roots_of("c") == () == found.roots_of(None)
    for bad in ('["/srv"]', '{"a": "/srv/a"}', '{"a": [1]}', "{"):
        with pytest.raises(ValueError, match="SCOUTD_LITELLM_TEAM_ROOTS"):
            ProxySettings.from_env({"SCOUTD_LITELLM_TEAM_ROOTS": bad})


def test_a_key_reaches_only_its_teams_chats(tmp_path: Path) -> None:
    a_dir, b_dir, shared = tmp_path / "a", tmp_path / "b", tmp_path / "shared"
    for directory in (a_dir, b_dir, shared):
        directory.mkdir()
    a_chat, b_chat, s_chat = str(a_dir / "x.chat"), str(b_dir / "x.chat"), str(shared / "x.chat")
    write_notice(b_chat, "team B's secret plan")
    hook = ScoutdProxyHook(
        ProxySettings(roots=(str(shared),), team_roots={"a": (str(a_dir),), "b": (str(b_dir),)})
    )
    try:
        served = call(hook, "a", a_chat)
        assert served["messages"][-1] == USER
        for team, chat in (("a", b_chat), ("a", s_chat), ("b", a_chat), (None, a_chat)):
            with pytest.raises(HTTPException) as refused:
                # what the body says of its team is not asked
                call(hook, team, chat, metadata={"user_api_key_team_id": "b"})
            assert refused.value.status_code == 400, (team, chat)
            assert "SCOUTD_LITELLM_TEAM_ROOTS" in str(refused.value.detail)
        assert os.listdir(b_dir / "x.inbox"), "a refused request took team B's notice"
        delivered = call(hook, "b", b_chat)
        assert "team B's secret plan" in str(delivered["messages"])
        assert call(hook, None, s_chat)["messages"][-1] == USER  # no team: SCOUTD_LITELLM_ROOTS
        assert call(hook, "c", s_chat)["messages"][-1] == USER  # a team not listed: the same
        write_abort(a_chat, "stop A")
        with pytest.raises(HTTPException) as aborted:
            call(hook, "a", a_chat)
        assert aborted.value.status_code == 403
    finally:
        hook.close()


def test_team_roots_alone_supervise_the_passthrough_routes(tmp_path: Path) -> None:
    """With team roots only, LiteLLM's passthrough routes (which reach the hook
    without headers) are refused as with SCOUTD_LITELLM_ROOTS."""
    hook = ScoutdProxyHook(ProxySettings(team_roots={"a": (str(tmp_path),)}))

    async def passthrough() -> Any:
        data = {"messages": [USER]}
        return await hook.async_pre_call_hook(UserAPIKeyAuth(team_id="a"), None, data, PASSTHROUGH)

    with pytest.raises(HTTPException) as refused:
        anyio.run(passthrough)
    assert refused.value.status_code == 403
