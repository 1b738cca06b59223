"""Recall through a real daemon subprocess: hostile arguments, searches again, formats.

What a model sends through an integration's daemon session gets the text it
gets in process, never an exception; the daemon's search passes over an output
its last prompt shows whole inside an earlier search answer; a session reads
its conversation for recall in the format its last prompt was made in.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from scoutd.client import Client
from scoutd.integrations._run import RunPreparer
from tests.support.daemon import Daemon
from tests.test_recall import RECALL, chat_outputs, chat_run, marked
from tests.test_recall_hostile import newest_not_shown_whole


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with Daemon() as d:
        yield d


def test_what_a_model_sends_is_answered_alike_through_the_daemon(
    daemon: Daemon, tmp_path: Path
) -> None:
    """A search holding a lone surrogate (JSON's ``"\\ud800"``) raised
    ``UnicodeEncodeError`` out of the daemon session's recall (the client cannot
    send it) while in process it was a text; an integer handle past 4,300 digits
    raised ``ValueError`` in both."""
    messages = chat_run(5, user_every=0)
    with (
        RunPreparer(save_file=str(tmp_path / "here.chat"), recall=True) as local,
        RunPreparer(
            save_file=os.path.join(daemon.dir, "there.chat"),
            socket=daemon.socket_path,
            recall=True,
        ) as remote,
    ):
        local.prepare(messages)
        remote.prepare(messages)
        for search in ("line\udfff", "\ud800 value_4_7"):
            text = remote.recall(search=search)
            assert text == local.recall(search=search)
            assert text.startswith("search holds a lone surrogate")
        for handle in (10**5000, -(10**5000), 10**30):
            text = remote.recall(handle)
            assert text == local.recall(handle)
            assert text.startswith("malformed handle ")
        assert remote.recall(2) == local.recall(2) == chat_outputs(messages)[1]


def test_the_daemons_search_passes_over_an_earlier_search_answer(daemon: Daemon) -> None:
    """The same search asked again through the daemon returned the output the previous
    search answer already showed whole in the prompt; it now goes on to the next."""
    messages = chat_run(80, user_every=0)
    outputs = chat_outputs(messages)
    with (
        Client(daemon.socket_path, timeout=20) as client,
        client.session(os.path.join(daemon.dir, "again.chat")) as session,
    ):
        prompt = session.prepare_prompt(messages, config=RECALL)
        for n in range(3):
            expected = newest_not_shown_whole(prompt, outputs)
            answer = session.recall(search="of the run")
            assert answer == f"#{expected}\n{outputs[expected - 1]}"
            function = {"name": "recall", "arguments": json.dumps({"search": "of the run"})}
            call = {"id": f"r{n}", "type": "function", "function": function}
            messages += [
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": f"r{n}", "content": answer},
            ]
            prompt = session.prepare_prompt(messages, config=RECALL)


@pytest.mark.parametrize("opened", ["anthropic", "openai-responses"])
def test_recall_reads_the_conversation_in_the_format_its_prompt_was_made_in(
    daemon: Daemon, opened: str
) -> None:
    """A session opened in one format and prepared in another (``format`` per call):
    its prompt showed ``recall #N``, and ``session.recall`` answered "no output #N:
    this conversation has no tool outputs", reading it in the opening format."""
    messages = chat_run(80)
    outputs = chat_outputs(messages)
    save_file = os.path.join(daemon.dir, f"{opened}.chat")
    with daemon.connect(20) as raw:
        opened_as = raw.call("session.open", {"save_file": save_file, "format": opened})
        session = opened_as["result"]["session"]
        params = {"session": session, "messages": messages, "config": RECALL}
        answer = raw.call("prepare_prompt", params | {"format": "openai-chat"})
        handles = marked(answer["result"]["messages"])
        assert handles
        for handle in sorted(handles)[:3]:
            found = raw.call("session.recall", {"session": session, "handle": handle})
            assert found["result"]["text"] == outputs[handle - 1]
