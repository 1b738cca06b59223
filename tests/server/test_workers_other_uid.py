"""The daemon's path checks for a peer of another uid, seen from that peer.

The agent runs as uid 65534 (``unprivileged_prefix`` of
``tests/reliability/harness.py``, through the agent process of
``test_hidden_abort``): ``scoutd/server/workers.py`` checks each save file it
names, at every call and every round of its session, as that uid could reach
it (docs/OPERATIONS.md, access model).
"""

from __future__ import annotations

import os

import pytest

from scoutd import protocol
from scoutd.inbox import inbox_dir, write_notice

from .test_hidden_abort import agent_session, agents_chat, agents_daemon
from .test_workers import HELLO, chat, open_session


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to uid 65534 needs root")
def test_another_uid_reaches_no_chat_it_could_not_reach_itself_at_any_round() -> None:
    """The agent (uid 65534) names root's private chat, then loses its own chat
    directory to root: each call is refused (``-32003``), its session's rounds too,
    since the save file is checked again at each (docs/OPERATIONS.md, access model).
    Root's session is unknown to it; the daemon's own uid may use the agent's."""
    with agents_daemon() as d:
        save_file = agents_chat(d)
        private = os.path.join(d.dir, "private")
        os.mkdir(private, 0o700)
        theirs = os.path.join(private, "agent.chat")
        write_notice(theirs, "root's notice", name="n.txt")
        with agent_session(d, save_file) as agent:
            call = {"messages": HELLO, "save_file": theirs}
            assert agent.call("prepare_prompt", call)["error"]["code"] == protocol.FORBIDDEN
            in_session = {"messages": HELLO, "session": agent.session}
            assert "result" in agent.call("prepare_prompt", in_session)
            with d.connect() as operator:  # the daemon's own uid may use any session
                assert "result" in operator.call("prepare_prompt", in_session)
                roots = {"messages": HELLO, "session": open_session(operator, chat(d, "root"))}
                assert "result" in operator.call("prepare_prompt", roots)  # open, and its
                refused = agent.call("prepare_prompt", roots)  # own uid's alone
                assert refused["error"]["code"] == protocol.UNKNOWN_SESSION, refused
            chat_dir = os.path.dirname(save_file)
            os.chown(chat_dir, 0, 0)
            os.chmod(chat_dir, 0o700)
            reply = agent.call("prepare_prompt", in_session)
            assert reply["error"]["code"] == protocol.FORBIDDEN, reply
        assert os.listdir(inbox_dir(theirs)) == ["n.txt"]
