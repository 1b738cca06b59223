"""What the daemon's worker functions refuse, seen on the wire of a real daemon.

``scoutd/server/workers.py`` checks a save file (again at each round of a
session, and for a peer of another uid as that peer), bounds what a session
holds (``max_session_messages``, ``max_session_bytes``, a wrong ``base``),
answers a request whose params nest deeper than the daemon can walk, and logs
a format's warnings. Each refusal here carries the request's id, the
documented code and data, and leaves the session as it was (docs/PROTOCOL.md).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from scoutd import protocol
from scoutd.inbox import inbox_dir, write_notice
from scoutd.protocol.messages import TOO_DEEP

from ..formats.conversations import chat as chat_run
from ..reliability.harness import FaultDaemon
from ..support.daemon import Daemon, LineClient
from ..support.nesting import decoder_limit

HELLO = [{"role": "user", "content": "hello"}]
DIFFERS = {
    "code": protocol.INVALID_PARAMS,
    "message": "invalid params: save_file differs from the session's save file",
    "data": {"path": "$.params.save_file", "error": "differs from the session's"},
}


def chat(d: Daemon, name: str) -> str:
    os.makedirs(os.path.join(d.dir, name), exist_ok=True)
    return os.path.join(d.dir, name, "agent.chat")


def open_session(client: LineClient, save_file: str) -> str:
    reply = client.call("session.open", {"save_file": save_file})
    session: str = reply["result"]["session"]
    return session


def prepared(reply: dict[str, Any]) -> list[Any]:
    assert "result" in reply, reply
    messages: list[Any] = reply["result"]["messages"]
    return messages


def test_a_round_naming_another_save_file_is_refused_and_delivers_nothing() -> None:
    with Daemon() as d, d.connect() as client:
        mine, theirs = chat(d, "a"), chat(d, "b")
        write_notice(theirs, "the other chat's notice", name="n.txt")
        session = open_session(client, mine)
        params = {"session": session, "messages": HELLO, "save_file": theirs}
        rid = client.request("prepare_prompt", params, id="other")
        reply = client.response(rid)
        assert reply["id"] == "other"
        assert reply["error"] == DIFFERS, reply
        assert os.listdir(inbox_dir(theirs)) == ["n.txt"]
        # the session goes on with its own file (its notice delivered), the same file
        # spelt otherwise too
        write_notice(mine, "my own notice", name="m.txt")
        own = prepared(client.call("prepare_prompt", {"session": session, "messages": HELLO}))
        assert "my own notice" in json.dumps(own)
        spelt = os.path.join(d.dir, "b", "..", "a", ".", "agent.chat")
        again = {"session": session, "messages": HELLO, "save_file": spelt}
        assert prepared(client.call("prepare_prompt", again))
        assert os.listdir(inbox_dir(theirs)) == ["n.txt"]


def test_a_sessions_path_that_resolves_elsewhere_later_is_refused_at_the_next_round() -> None:
    """The save file is resolved again at each round. Here it lies under a link
    (``chats``) that is turned to another tree after ``session.open``: the path
    now names the other tree's chat, whose notices the round must not take. (The
    watcher keeps watching the resolved chat, which did not change: no abort.)"""
    with Daemon() as d, d.connect() as client:
        mine, theirs = chat(d, "one/a"), chat(d, "two/a")
        write_notice(theirs, "the other chat's notice", name="n.txt")
        link = os.path.join(d.dir, "chats")
        os.symlink(os.path.join(d.dir, "one"), link)
        session = open_session(client, os.path.join(link, "a", "agent.chat"))
        assert prepared(client.call("prepare_prompt", {"session": session, "messages": HELLO}))
        os.symlink(os.path.join(d.dir, "two"), link + ".new")
        os.rename(link + ".new", link)
        rid = client.request("prepare_prompt", {"session": session, "messages": HELLO}, id=9)
        reply = client.response(rid)
        assert reply["id"] == 9
        assert reply["error"] == DIFFERS, reply
        assert os.listdir(inbox_dir(theirs)) == ["n.txt"]
        # turned back, the path names the session's chat again
        os.symlink(os.path.join(d.dir, "one"), link + ".new")
        os.rename(link + ".new", link)
        write_notice(mine, "my own notice", name="m.txt")
        own = prepared(client.call("prepare_prompt", {"session": session, "messages": HELLO}))
        assert "my own notice" in json.dumps(own)
        assert os.listdir(inbox_dir(theirs)) == ["n.txt"]


def too_large(limit: int, count: int) -> dict[str, Any]:
    return {
        "code": protocol.TOO_LARGE,
        "message": f"too large: the session would hold {count} messages, more than"
        f" max_session_messages = {limit}",
        "data": {"limit": limit, "key": "max_session_messages"},
    }


def test_max_session_messages_holds_exactly_its_count_whichever_way_they_come() -> None:
    limit = 6
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(9)]
    with Daemon(daemon={"max_session_messages": limit}) as d, d.connect() as client:
        save_file = chat(d, "a")
        # an opening conversation: the limit is taken, one more is refused
        reply = client.call("session.open", {"save_file": save_file, "messages": turns[:7]})
        assert reply["error"] == too_large(limit, 7), reply
        session = open_session(client, save_file)
        # a whole conversation
        rid = client.request("prepare_prompt", {"session": session, "messages": turns[:7]}, id="w")
        assert client.response(rid)["error"] == too_large(limit, 7)
        assert prepared(client.call("prepare_prompt", {"session": session, "messages": turns[:4]}))
        # appended rounds: counted with what the session holds
        first = {"session": session, "append": turns[4:6], "base": 4}
        assert prepared(client.call("prepare_prompt", first))
        over = {"session": session, "append": turns[6:7], "base": 6}
        rid = client.request("prepare_prompt", over, id="a")
        reply = client.response(rid)
        assert reply["id"] == "a" and reply["error"] == too_large(limit, 7), reply
        # refused, the session holds what it held: an empty append at its base works
        empty = {"session": session, "append": [], "base": 6}
        same = prepared(client.call("prepare_prompt", empty))
        assert [m["content"] for m in same] == [f"m{i}" for i in range(6)]
        opened = client.call("session.open", {"save_file": save_file, "messages": turns[:6]})
        assert "result" in opened, opened
        # a wrong base says what the daemon holds, and changes nothing
        wrong = {"session": session, "append": turns[6:7], "base": 5}
        rid = client.request("prepare_prompt", wrong, id="b")
        error = "the session holds 6 messages, not 5: send the whole conversation as `messages`"
        assert client.response(rid) == {
            "jsonrpc": "2.0",
            "id": "b",
            "error": {
                "code": protocol.INVALID_PARAMS,
                "message": f"invalid params: {error} - at `$.params.base`",
                "data": {"path": "$.params.base", "error": error, "messages": 6},
            },
        }
        assert len(prepared(client.call("prepare_prompt", empty))) == 6


def _line(rid: str, params: str) -> bytes:
    head = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "prepare_prompt"})[:-1]
    return f'{head},"params":{params}}}\n'.encode()


def test_params_nested_past_what_the_daemon_walks_get_the_requests_id_and_data() -> None:
    """Near the interpreter's limit a request can be read but not walked (or its answer
    not written): it is refused as invalid params at ``$.params``, with its own id,
    and the connection goes on (docs/PROTOCOL.md, "Nesting"). That band is a few
    levels wide on Python 3.11 (two), below the depth the codec refuses to read,
    and empty on 3.13: every depth around the limit is tried."""
    limit = decoder_limit()
    codes = {protocol.PARSE_ERROR: 0, protocol.INVALID_PARAMS: 0, "answered": 0}
    with Daemon() as d, d.connect() as client:
        session = open_session(client, chat(d, "a"))
        for depth in range(limit - 97, limit + 43):
            deep = "[" * depth + '"deep"' + "]" * depth
            for where, params in (
                ("call", f'{{"messages":[{{"role":"user","content":{deep}}}]}}'),
                ("round", f'{{"session":"{session}","messages":[{{"role":"user","x":{deep}}}]}}'),
            ):
                rid = f"{where}-{depth}"
                client.send_raw(_line(rid, params))
                line = client.read_line()
                # an answer holds the deep message: too deep for this test's json to read
                if line.startswith(b'{"jsonrpc":"2.0","id":"%s","result":{' % rid.encode()):
                    codes["answered"] += 1
                    continue
                reply = json.loads(line)
                assert reply["id"] == rid, reply
                error = reply["error"]
                codes[error["code"]] += 1
                if error["code"] == protocol.INVALID_PARAMS:
                    assert error == {
                        "code": protocol.INVALID_PARAMS,
                        "message": f"invalid params: {TOO_DEEP} - at `$.params`",
                        "data": {"path": "$.params", "error": TOO_DEEP},
                    }, (rid, error)
                else:
                    assert error["code"] == protocol.PARSE_ERROR, (rid, error)
        assert "result" in client.call("status")
    # each way of meeting the limit is reached. The band of requests read but not
    # walked was measured 2 levels wide on Python 3.11 and empty on 3.13 (a C
    # recursion limit of 10,000: the daemon walks whatever it reads)
    assert codes[protocol.PARSE_ERROR] > 0 and codes["answered"] > 0, codes
    assert codes[protocol.INVALID_PARAMS] > 0 or sys.version_info[:2] != (3, 11), codes


def test_a_whole_conversation_replaces_what_the_session_held_in_its_byte_bound() -> None:
    """A round sending the whole conversation is counted alone against
    ``max_session_bytes``, not added to the one it replaces; appended messages are
    added to what the session holds."""

    def turns(size: int) -> list[dict[str, str]]:
        return [{"role": "user", "content": "x" * size}, {"role": "assistant", "content": "ok"}]

    bound = 100_000  # each byte of JSON is held about five times (engine/held.py)
    with Daemon(daemon={"max_session_bytes": bound}) as d, d.connect() as client:
        session = open_session(client, chat(d, "a"))
        for _ in range(3):  # about 77 KB held each, replaced each time
            reply = client.call("prepare_prompt", {"session": session, "messages": turns(15_000)})
            assert prepared(reply)
        refused = client.call("prepare_prompt", {"session": session, "messages": turns(25_000)})
        assert refused["error"]["code"] == protocol.TOO_LARGE, refused
        assert refused["error"]["data"]["key"] == "max_session_bytes", refused
        small = [{"role": "user", "content": "y" * 1_000}]
        reply = client.call("prepare_prompt", {"session": session, "append": small, "base": 2})
        assert len(prepared(reply)) == 3
        large = [{"role": "assistant", "content": "z" * 15_000}]
        refused = client.call("prepare_prompt", {"session": session, "append": large, "base": 3})
        assert refused["error"]["data"]["key"] == "max_session_bytes", refused


def test_foreign_tool_traffic_is_warned_in_the_log_once_per_call_and_round() -> None:
    """docs/FORMATS.md: a format named while the messages carry another's tool
    traffic is warned about in the report and in the daemon log, never silently."""
    with Daemon() as d, d.connect() as client:
        call = {"messages": chat_run(3), "strategies": "none", "format": "scout"}
        [warning] = client.call("prepare_prompt", call)["result"]["report"][-1]["warnings"]
        assert "openai-chat tool traffic" in warning
        opened = client.call("session.open", {"save_file": chat(d, "a"), "format": "scout"})
        in_session = {"messages": chat_run(3), "strategies": "none"}
        in_session["session"] = opened["result"]["session"]
        assert client.call("prepare_prompt", in_session)["result"]["report"][-1]["warnings"]
        # each is logged before its answer is written
        logged = [line for line in d.log().splitlines() if " WARNING " in line]
        assert [line.split(" WARNING ", 1)[1] for line in logged] == [
            f"scoutd.server: prepare_prompt: {warning}"
        ] * 2, logged


# Before a session round prepares (in its worker, after it took its ticket on the
# inbox gate): an abort written into the chat's inbox and claimed by the watcher.
CLAIMED_DURING_ROUND = r"""
import os, time
from scoutd.engine import incremental

_prepare = incremental.SessionPrompt.prepare
TOGGLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "faults.on")


def prepare(self, *args, **kwargs):
    if os.path.exists(TOGGLE):
        with open(TOGGLE, encoding="utf-8") as handle:
            inbox = handle.read()
        os.unlink(TOGGLE)
        with open(os.path.join(inbox, ".abort.tmp"), "w", encoding="utf-8") as handle:
            handle.write("stop during the round")
        os.rename(os.path.join(inbox, ".abort.tmp"), os.path.join(inbox, "abort"))
        deadline = time.monotonic() + 10
        while os.path.exists(os.path.join(inbox, "abort")) and time.monotonic() < deadline:
            time.sleep(0.01)
        if not os.path.exists(os.path.join(inbox, "abort")):  # the watcher took it
            open(TOGGLE + ".claimed", "w").close()
    return _prepare(self, *args, **kwargs)


incremental.SessionPrompt.prepare = prepare
"""


def test_an_abort_claimed_while_a_round_waits_fails_that_round() -> None:
    """The watcher takes an abort after a round began and before it picks up the
    inbox: the round fails with that abort and delivers nothing (the claim marked
    the chat aborted; the round's ticket on the inbox gate, ``inbox/gate.py``, is
    the other guard, which ``tests/formats/test_daemon.py`` catches missing)."""
    with FaultDaemon(CLAIMED_DURING_ROUND) as d, d.connect() as client:
        save_file = chat(d, "a")
        write_notice(save_file, "a notice the round must not take", name="n.txt")
        session = open_session(client, save_file)
        with open(d.toggle, "w", encoding="utf-8") as handle:
            handle.write(inbox_dir(save_file))
        reply = client.call("prepare_prompt", {"session": session, "messages": HELLO})
        assert os.path.exists(d.toggle + ".claimed")  # the watcher took it mid-round
        assert reply["error"]["code"] == protocol.ABORTED, reply
        assert reply["error"]["data"]["reason"] == "stop during the round", reply
        assert os.listdir(inbox_dir(save_file)) == ["n.txt"]


def test_a_failed_round_is_refused_for_its_reason_whatever_it_sent() -> None:
    """A round that fails in its prepare (here an unknown strategy) is refused with
    that error and leaves the session as it was: with new messages appended, with an
    empty ``append``, and with neither (the session's own conversation again)."""
    with Daemon() as d, d.connect() as client:
        opening = {"save_file": chat(d, "a"), "messages": HELLO}
        session = client.call("session.open", opening)["result"]["session"]
        more = [{"role": "assistant", "content": "hi"}]
        rounds: list[dict[str, Any]] = [{"append": more, "base": 1}, {"append": []}, {}]
        for sent in rounds:
            reply = client.call(
                "prepare_prompt", {"session": session, "strategies": "nope", **sent}
            )
            assert reply["error"]["code"] == protocol.UNKNOWN_STRATEGY, (sent, reply)
            assert reply["error"]["data"]["name"] == "nope"
            assert prepared(client.call("prepare_prompt", {"session": session})) == HELLO


def test_a_redelivered_notice_is_counted_once() -> None:
    """``redeliver`` shows the previous answer's notices again; the daemon's count of
    notices delivered (``status``, ``metrics``) counts each notice once, also when
    the round that carries it runs no ``inbox`` strategy (docs/PROTOCOL.md)."""
    with Daemon() as d, d.connect() as client:
        save_file = chat(d, "a")
        session = open_session(client, save_file)

        def delivered() -> int:
            count: int = client.call("status")["result"]["counts"]["notices_delivered"]
            return count

        write_notice(save_file, "first notice", name="n1.txt")
        first = prepared(client.call("prepare_prompt", {"session": session, "messages": HELLO}))
        assert "first notice" in json.dumps(first) and delivered() == 1
        again = {"session": session, "messages": HELLO, "redeliver": True}
        assert "first notice" in json.dumps(prepared(client.call("prepare_prompt", again)))
        assert delivered() == 1
        write_notice(save_file, "second notice", name="n2.txt")
        both = json.dumps(prepared(client.call("prepare_prompt", again)))
        assert "first notice" in both and "second notice" in both and delivered() == 2
        plain = {**again, "strategies": "none"}  # carried, not shown: nothing delivered
        assert "notice" not in json.dumps(prepared(client.call("prepare_prompt", plain)))
        assert delivered() == 2


def test_a_conversation_set_at_open_belongs_to_the_opening_connection() -> None:
    """docs/PROTOCOL.md: a call without ``messages`` from another connection is
    refused at ``$.params.base`` (the daemon holds a conversation that client never
    sent), from the open on, until that client sends its conversation whole."""
    more = [{"role": "assistant", "content": "hi"}]
    with Daemon() as d, d.connect() as opener, d.connect() as other:
        opening = {"save_file": chat(d, "a"), "messages": HELLO}
        session = opener.call("session.open", opening)["result"]["session"]
        append = {"session": session, "append": more, "base": 1}
        refused = other.call("prepare_prompt", append)["error"]
        assert refused["code"] == protocol.INVALID_PARAMS, refused
        assert refused["data"]["path"] == "$.params.base" and refused["data"]["messages"] == 1
        assert prepared(opener.call("prepare_prompt", append)) == HELLO + more
        whole = {"session": session, "messages": HELLO}
        assert prepared(other.call("prepare_prompt", whole)) == HELLO
        refused = opener.call("prepare_prompt", append)["error"]
        assert refused["data"]["path"] == "$.params.base", refused
