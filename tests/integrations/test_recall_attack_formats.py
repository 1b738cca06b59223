"""Recall of OpenAI Chat freeform (``custom``) tool outputs, in process and by the daemon.

A Chat run mixes function calls and freeform ``custom`` calls (a free-text
``input``), their outputs strings, content-part lists (with an image part) or
empty. Every handle of the prompt, shortened or removed, must give back the
output as docs/STRATEGIES.md ("Recall") says: a string as it is, a part list
as its text parts joined by a newline with an image as ``[image]``; a search
must find a custom call by a text of its free-text input; and the run's hook
and the daemon's session must answer alike.
"""

from __future__ import annotations

import os
from typing import Any

import scoutd
from scoutd.client import Client
from scoutd.integrations._run import RunPreparer
from tests.support.daemon import Daemon
from tests.test_recall import RECALL, marked, output_text, removed

PAIRS = 60
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}


def custom_run() -> tuple[list[dict[str, Any]], list[str]]:
    """The run's messages and, for each output, the text its recall must give."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "patch the files"},
    ]
    expected: list[str] = []
    for n in range(1, PAIRS + 1):
        ident = f"call_{n}"
        if n % 3:
            patch = f"*** Begin Patch {n}\n*** Update File: src/m_{n}.py\n" + "+x = 1\n" * 40
            call = {"id": ident, "type": "custom", "custom": {"name": "apply", "input": patch}}
        else:
            function = {"name": "read", "arguments": f'{{"path": "src/m_{n}.py"}}'}
            call = {"id": ident, "type": "function", "function": function}
        text = output_text(n)
        content: Any = text
        if n % 4 == 0:
            content = [{"type": "text", "text": text[:90]}, IMAGE, {"type": "text", "text": "end"}]
            text = f"{text[:90]}\n[image]\nend"
        elif n % 7 == 0:
            content = text = ""
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": ident, "content": content})
        expected.append(text)
    return messages, expected


def test_every_custom_output_recalls_as_documented_in_process_and_by_the_daemon() -> None:
    messages, expected = custom_run()
    with scoutd.Session(config=RECALL, format="openai-chat") as session:
        prompt = session.prepare_prompt(messages)
        listed = set(marked(prompt)) | removed(prompt)
        assert len(listed) >= 20  # enough outputs shortened or removed to mean something
        here = [session.recall(n) for n in range(1, PAIRS + 1)]
        found = session.recall(search="*** Begin Patch 5\n")
    assert here == expected
    assert found == f"#5\n{expected[4]}"
    with Daemon() as daemon:
        save_file = os.path.join(daemon.dir, "custom.chat")
        with Client(daemon.socket_path, timeout=20) as client, client.session(save_file) as remote:
            assert remote.prepare_prompt(messages, config=RECALL) == prompt
            assert [remote.recall(f"#{n}") for n in range(1, PAIRS + 1)] == expected
            assert remote.recall(None, "*** Begin Patch 5\n") == found
        with RunPreparer(save_file=save_file, socket=daemon.socket_path, config=RECALL) as hook:
            hook.prepare(messages)
            assert [hook.recall(f"#{n}") for n in range(1, PAIRS + 1)] == expected
