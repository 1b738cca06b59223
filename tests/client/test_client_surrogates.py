"""A message holding a lone surrogate goes over the wire escaped (docs/PROTOCOL.md).

A tool output may hold a file name of bytes that are not UTF-8, decoded by
Python with ``surrogateescape`` (``"caf\\udce9.txt"``); the library in process
takes it. JSON over the wire cannot carry it: the client raised
``UnicodeEncodeError`` from inside the call, and an agent calling through the
daemon (the LangChain and Agents SDK integrations) died on its first such
output. Such a text now goes escaped, as the daemon's own answers escape one:
the undecodable byte as ``\\xe9``.
"""

from __future__ import annotations

import os
from typing import Any

import scoutd

from ..support.daemon import Daemon

NAME = "caf\udce9.txt"  # the byte 0xe9 of a Latin-1 file name, surrogate-escaped
ESCAPED = "caf\\xe9.txt"
EPOCH = "shorten_tools_epoch"  # the shared daemon's epochs: 8 whole, 30 shortened


def _conversation(name: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "list the files"}]
    for turn in range(60):
        ident = f"c{turn}"
        call = {"id": ident, "type": "function", "function": {"name": "ls", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": ident, "content": f"{name}\n" * 400})
    return messages


def test_a_session_round_carries_a_lone_surrogate_escaped(daemon: Daemon) -> None:
    """A session round answers what a prepare of the escaped conversation gives."""
    messages = _conversation(NAME)
    save = os.path.join(daemon.dir, "surrogate.chat")
    with scoutd.Client(daemon.socket_path) as client, client.session(save) as session:
        for end in (21, 61, len(messages)):
            prompt = session.prepare_prompt(messages[:end], EPOCH)
            expected = scoutd.prepare(_conversation(ESCAPED)[:end], EPOCH, config=_prompt(daemon))
            assert prompt == expected.messages
    assert prompt != _conversation(ESCAPED)  # compacted: the escaped text was read


def test_a_prepare_without_a_session_carries_it_too(daemon: Daemon) -> None:
    """Without a session: no error, the messages kept are the caller's own objects."""
    messages = _conversation(NAME)
    with scoutd.Client(daemon.socket_path) as client:
        prompt = client.prepare_prompt(messages, EPOCH)
    expected = scoutd.prepare(_conversation(ESCAPED), EPOCH, config=_prompt(daemon)).messages
    assert expected != _conversation(ESCAPED)  # compacted: the escaped text was read
    assert len(prompt) == len(expected)
    given = {id(message) for message in messages}
    for made, wanted in zip(prompt, expected, strict=True):
        assert id(made) in given or made == wanted
    assert any(id(made) in given and NAME in str(made["content"]) for made in prompt)


def _prompt(daemon: Daemon) -> scoutd.Config:
    """The daemon's own configuration, as the library reads it."""
    return scoutd.load_config(daemon.config_path)
