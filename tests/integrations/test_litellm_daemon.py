"""The LiteLLM proxy hook through a real daemon: its chats share a few connections,
and a daemon restart costs each chat one new session, not its service.

Before: each kept chat held a connection of its own, so past the daemon's
``max_connections_per_uid`` (128 by default, against 256 chats kept) every new
chat's request failed; and a chat whose session ended with its connection (a
daemon restarted) failed every later request until it was evicted.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
if os.environ.get("CI") != "true":  # CI installs the test extra: a missing LiteLLM fails there
    pytest.importorskip("litellm.proxy", reason="needs the extra scoutd[litellm]")

from scoutd.errors import Aborted, DaemonUnavailable
from scoutd.inbox import write_abort
from scoutd.integrations.litellm import DAEMON_CONNECTIONS, ProxySettings, ScoutdProxyHook
from tests.integrations import test_litellm
from tests.support.daemon import Daemon

pytestmark = test_litellm.pytestmark  # LiteLLM's own warnings, as there

CHAT = "openai-chat"
USER = [{"role": "user", "content": "go on"}]


def hook_for(daemon: Daemon) -> ScoutdProxyHook:
    return ScoutdProxyHook(ProxySettings(roots=(daemon.dir,), socket=daemon.socket_path))


def test_more_chats_than_a_uid_may_hold_connections_are_served() -> None:
    with Daemon(daemon={"max_connections_per_uid": DAEMON_CONNECTIONS + 2}) as daemon:
        hook = hook_for(daemon)
        try:
            chats = [os.path.join(daemon.dir, f"{n}.chat") for n in range(3 * DAEMON_CONNECTIONS)]
            for chat in chats:
                assert hook.prepare(chat, CHAT, USER).messages == USER
            counts = daemon.status()["counts"]
            assert counts["sessions"] == len(chats)
            assert counts["connections"] <= DAEMON_CONNECTIONS + 1  # and the status call's
        finally:
            hook.close()
        assert daemon.status()["counts"]["sessions"] == 0


def test_a_daemon_restart_costs_each_chat_a_new_session() -> None:
    with Daemon() as daemon:
        hook = hook_for(daemon)
        try:
            served, aborted = (os.path.join(daemon.dir, f"{name}.chat") for name in "ab")
            hook.prepare(served, CHAT, USER)
            hook.prepare(aborted, CHAT, USER)
            write_abort(aborted, "stop b")
            with pytest.raises(Aborted):
                hook.prepare(aborted, CHAT, USER)
            daemon.stop()
            with pytest.raises(DaemonUnavailable):  # no daemon: the request fails
                hook.prepare(served, CHAT, USER)
            daemon.start()
            assert hook.prepare(served, CHAT, USER).messages == USER
            assert hook.prepare(served, CHAT, USER).messages == USER
            with pytest.raises(Aborted, match="stop b"):  # its marker outlives the daemon
                hook.prepare(aborted, CHAT, USER)
        finally:
            hook.close()
