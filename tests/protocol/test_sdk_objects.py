"""An SDK's own objects in a conversation are read as the SDK sends them (docs/FORMATS.md).

The oracle is the SDK itself: what its request carries for the conversation
(tests/protocol/sdk_loops.py), never scoutd's conversion.
"""

from __future__ import annotations

import copy
import subprocess
import sys
import textwrap
from typing import Any

import pydantic
import pytest
from anthropic.types import TextBlock

import scoutd
from scoutd.errors import InvalidMessages
from scoutd.protocol.sdk_objects import sent_forms

from .sdk_loops import KINDS, loop, recording, sent

# A window small enough that the loops below compact several times.
SMALL = {"context_window": 6000}
ROUNDS = 24


@pytest.mark.parametrize("kind", KINDS)
def test_the_prompt_is_what_the_sdk_sends(kind: str) -> None:
    """Unchanged by the strategies, the prompt is the JSON the SDK sends for the objects."""
    conversation, _ = loop(kind, 5)
    prompt = scoutd.prepare_prompt(conversation, "none", format=kind)
    assert prompt == sent(kind, conversation)
    assert sent(kind, prompt) == sent(kind, conversation)
    assert _holds_objects(kind, conversation)


def _holds_objects(kind: str, conversation: list[Any]) -> bool:
    """Whether the loop's conversation holds the SDK's objects where its docs put them."""
    turn = conversation[1]
    return isinstance(turn["content"][0] if kind == "anthropic" else turn, pydantic.BaseModel)


@pytest.mark.parametrize("kind", KINDS)
def test_objects_compact_as_their_json(kind: str) -> None:
    """A conversation of objects gets the prompt and report its JSON gets, compacted."""
    conversation, _ = loop(kind, ROUNDS)
    as_sent = sent(kind, conversation)
    with_objects = scoutd.prepare(conversation, config=SMALL, format=kind)
    with_json = scoutd.prepare(as_sent, config=SMALL, format=kind)
    assert with_objects.messages == with_json.messages
    assert with_objects.report == with_json.report
    compacted = with_json.report[0]
    assert compacted.outputs_dropped + compacted.outputs_truncated > 0
    assert with_json.report[-1].malformed == 0


@pytest.mark.parametrize("kind", KINDS)
def test_a_session_in_the_loop(kind: str) -> None:
    """Round by round in the SDK's loop, a session sends what a whole prepare of the
    conversation's JSON gives, and holds the objects' JSON for recall."""
    with scoutd.Session(config=SMALL, format=kind) as session:
        states: list[Any] = []
        prepare = recording(session, states)
        conversation, requests = loop(kind, ROUNDS, prepare)
        # the held conversation was extended round by round, never started over
        assert all(state is states[0] for state in states)
        expected = [
            scoutd.prepare_prompt(sent(kind, conversation[:held]), config=SMALL, format=kind)
            for held in _helds(kind, ROUNDS)
        ]
        assert requests == expected
        assert session.recall("#1").startswith("line 0 of f1.py")


def _helds(kind: str, rounds: int) -> list[int]:
    """How many messages the conversation held at each model call of ``loop``."""
    per_round = 3 if kind == "openai-responses" else 2  # reasoning, call, output
    return [1 + per_round * done for done in range(rounds)]


def test_only_messages_with_objects_are_copied() -> None:
    plain = {"role": "user", "content": "start"}
    inner = {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}
    block = TextBlock(type="text", text="hello")
    messages: list[Any] = [
        plain,
        {"role": "assistant", "content": [block]},
        {"role": "user", "content": [inner]},
    ]
    before = copy.deepcopy(messages)
    converted = sent_forms(messages)
    assert converted is not None
    assert converted[0] is plain and converted[2] is messages[2]
    assert converted[1] == {"role": "assistant", "content": [{"type": "text", "text": "hello"}]}
    assert messages == before and messages[1]["content"][0] is block  # the input as it was


@pytest.mark.parametrize(
    "where",
    [
        lambda model: model,  # a message
        lambda model: {"role": "assistant", "content": model},  # a value of one
        lambda model: {"role": "assistant", "content": [model]},  # an item of a list value
    ],
)
def test_where_the_sdks_put_them(where: Any) -> None:
    class Note(pydantic.BaseModel):
        role: str = "assistant"
        content: str = "x"

    converted = sent_forms([{"role": "user", "content": "u"}, where(Note(content="hi"))])
    assert converted is not None
    assert converted[1] == where({"content": "hi"})


def test_deeper_alone_is_left_as_it_is() -> None:
    """Deeper than an item of a list value, a model alone is not looked for (documented)."""
    block = {
        "type": "tool_result",
        "tool_use_id": "t",
        "content": [TextBlock(type="text", text="x")],
    }
    assert sent_forms([{"role": "user", "content": [block]}]) is None


def test_no_objects_no_copy() -> None:
    assert sent_forms([{"role": "user", "content": [{"type": "text", "text": "x"}]}]) is None


def test_a_model_that_cannot_be_dumped_is_refused_with_its_position() -> None:
    class Broken(pydantic.BaseModel):
        role: str = "assistant"

        def model_dump(self, **kwargs: Any) -> dict[str, Any]:
            raise ValueError("no JSON here")

    with pytest.raises(InvalidMessages) as raised:
        scoutd.prepare_prompt([{"role": "user", "content": "u"}, Broken()])
    assert raised.value.position == 1
    assert "cannot read a Broken as JSON: no JSON here" in str(raised.value)


def test_a_process_without_pydantic_never_loads_it() -> None:
    """The look costs nothing where no model can exist: scoutd itself never imports pydantic."""
    code = textwrap.dedent(
        """
        import sys
        import scoutd, scoutd.client
        messages = [{"role": "user", "content": "u"}]
        scoutd.prepare_prompt(messages)
        with scoutd.Session() as session:
            session.prepare_prompt(messages)
        print("pydantic" in sys.modules)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize("bad", ["a string", None, 42, {"role": "user"}, b"bytes"])
def test_no_list_is_refused_as_before(bad: Any) -> None:
    """With pydantic loaded, what is no list of messages still gets the library's refusal."""
    assert sent_forms(bad) is None
    with pytest.raises(TypeError, match="list of messages"):
        scoutd.prepare_prompt(bad)
