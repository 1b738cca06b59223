"""Recall in process: handles in placeholders, the notice sentence, the lookup and the tool.

Every strategy that shortens writes an output's handle in its marker with
``[prompt] recall`` on; the handle, given to :func:`scoutd.recall.find_output`
or :meth:`scoutd.Session.recall`, must give back the exact original output.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import scoutd
from scoutd.errors import SessionClosed
from scoutd.recall import RECALL_TOOL_NAME, find_output, parse_handle, recall_tool
from scoutd.simulate.texts import strings
from scoutd.strategies.rewrites import handles_text
from scoutd.testing import conversation
from scoutd.testing.derive import to_anthropic, to_responses
from tests.formats.validity import new_problems
from tests.strategies.conversations import conversations

MARKER = re.compile(r"Truncated \((\d+), recall #(\d+)\): ")
REMOVED = re.compile(r"removed here: ([#\d, -]+);")
COMPACTING = [
    "shorten_tools",
    "shorten_tools_epoch",
    "shorten_tools_epoch_increment",
    "shorten_tools_cost_aware",
]
# Small enough that each strategy shortens and drops on an 80-output run.
SMALL = {
    "context_window": 30_000,
    "epoch_tool_call_threshold": 10,
    "epoch_full_tool_calls": 5,
    "epoch_compacted_tool_calls": 20,
    "epoch_size": 5,
    "cost_compacted_tool_calls": 10,
    "max_tool_chars": 20_000,
    # The bands alone: each call reads a file of its own, and the default's retention
    # would keep most of the shortened band whole (tests/strategies/test_retention.py).
    "cost_keep_share": 0,
}
RECALL = {**SMALL, "recall": True}


def output_text(n: int) -> str:
    """Output ``n``: distinct lines, long enough to be shortened."""
    return f"output {n} of the run\n" + "".join(f"line {n}.{k}: value_{n}_{k}\n" for k in range(80))


def chat_run(pairs: int, user_every: int = 10) -> list[dict[str, Any]]:
    """An OpenAI Chat run: ``pairs`` calls of ``read`` and their outputs, with user turns."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "fix the bug"},
    ]
    for n in range(1, pairs + 1):
        ident = f"call_{n}"
        arguments = json.dumps({"path": f"/src/module_{n}.py"})
        function = {"name": "read", "arguments": arguments}
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": ident, "type": "function", "function": function}],
            }
        )
        messages.append({"role": "tool", "tool_call_id": ident, "content": output_text(n)})
        if user_every and n % user_every == 0 and n < pairs:
            messages.append({"role": "user", "content": f"keep going ({n})"})
    return messages


def chat_outputs(messages: list[Any]) -> list[str]:
    """The tool outputs of an OpenAI Chat conversation, oldest first (handle N is [N-1])."""
    return [m["content"] for m in messages if m.get("role") == "tool"]


def marked(prompt: list[Any]) -> dict[int, int]:
    """Handle -> original length, for every marker in ``prompt``."""
    text = json.dumps(prompt, ensure_ascii=False)
    return {int(handle): int(length) for length, handle in MARKER.findall(text)}


def removed(prompt: list[Any]) -> set[int]:
    """The handles the compaction notice names as removed."""
    found: set[int] = set()
    for match in REMOVED.findall(json.dumps(prompt)):
        for part in match.split(", "):
            first, _, last = part.partition("-")
            found.update(range(int(first[1:]), int((last or first)[1:]) + 1))
    return found


def _strings(value: Any) -> Iterator[str]:
    """Every string in a prompt, a scout tool message's JSON body read as its strings."""
    for text in strings(value):
        try:
            body = json.loads(text) if text.startswith("{") else None
        except ValueError:
            body = None
        if isinstance(body, dict):
            yield from _strings(body)
        else:
            yield text


def shown(prompt: list[Any]) -> list[tuple[int, str]]:
    """(handle, the text shown after its marker up to the cut) for every marker.

    An output shortened twice (two strategies in a list) shows two markers, the
    outer one first: both must name the same output; the inner one is read."""
    marks = []
    for text in _strings(prompt):
        for match in MARKER.finditer(text):
            inner = MARKER.match(text, match.end())
            if inner is not None:
                assert inner.group(2) == match.group(2), text[: match.end() + 40]
                continue
            marks.append((int(match.group(2)), text[match.end() :].split("<...", 1)[0]))
    return marks


def check_heads(prompt: list[Any], originals: list[str]) -> int:
    """Each marker shows the start of the very output its handle names; the markers."""
    marks = shown(prompt)
    for handle, head in marks:
        assert originals[handle - 1].startswith(head), (handle, head[:40])
    return len(marks)


@pytest.mark.parametrize("strategy", COMPACTING)
def test_each_shortened_output_carries_the_handle_that_recalls_it(strategy: str) -> None:
    messages = chat_run(80)
    outputs = chat_outputs(messages)
    prompt = scoutd.prepare(messages, strategy, config=RECALL).messages
    handles = marked(prompt)
    assert len(handles) >= 5, f"{strategy} shortened too little to test: {handles}"
    for handle, length in handles.items():
        answer = scoutd.recall_output(messages, f"#{handle}")
        assert answer == outputs[handle - 1]
        assert len(answer) == length
    # Without recall the prompt carries no handle, and the same outputs are shortened.
    plain = scoutd.prepare(messages, strategy, config=SMALL).messages
    assert "recall #" not in json.dumps(plain)
    assert len(plain) == len(prompt)


@pytest.mark.parametrize("strategy", COMPACTING[1:])
def test_the_notice_names_exactly_the_removed_outputs(strategy: str) -> None:
    messages = chat_run(80)
    outputs = chat_outputs(messages)
    prompt = scoutd.prepare(messages, strategy, config=RECALL).messages
    kept = {m["tool_call_id"] for m in prompt if m.get("role") == "tool"}
    gone = {n for n in range(1, 81) if f"call_{n}" not in kept}
    assert gone, f"{strategy} removed nothing"
    assert removed(prompt) == gone
    notice = [m["content"] for m in prompt if "recall tool" in str(m.get("content"))]
    assert len(notice) == 1 and notice[0].startswith("[Context compaction]")
    for handle in gone:
        assert scoutd.recall_output(messages, handle) == outputs[handle - 1]


def test_shorten_tools_adds_no_notice_even_with_recall() -> None:
    prompt = scoutd.prepare(chat_run(80), "shorten_tools", config=RECALL).messages
    assert marked(prompt)
    assert not any("[Context compaction]" in str(m.get("content")) for m in prompt)


def test_handles_text_writes_runs_as_ranges() -> None:
    assert handles_text([1, 2, 3, 5, 7, 8]) == "#1-#3, #5, #7-#8"
    assert handles_text([4]) == "#4"
    assert handles_text([]) == ""


def test_errors_are_texts_never_exceptions() -> None:
    messages = chat_run(12, user_every=0)
    assert find_output(messages, "#999").text == (
        "no output #999: this conversation has 12 tool outputs, #1-#12"
    )
    for bad in ("#x", "-3", "0", "#", "1e3", "٣", "9" * 30):
        answer = find_output(messages, bad)
        assert not answer.found and answer.text.startswith("malformed handle"), bad
    assert not find_output(messages).found  # neither handle nor search
    assert "too short" in find_output(messages, search="ab").text
    missing = find_output(messages, search="no such text anywhere")
    assert not missing.found and "12 tool outputs" in missing.text
    assert find_output([], "#1").text == "no output #1: this conversation has no tool outputs"
    for handle, search in (({"n": 1}, None), (None, ["of the run"]), ([3], "x" * 9)):
        answer = find_output(messages, handle, search)  # as a model may send them
        assert (answer.found, answer.text) == (False, "handle and search must be strings")
    mixed = [*chat_run(1), *to_anthropic(chat_run(1))[1:]]
    assert not find_output(mixed, "#1").found  # a list no format reads: told, not raised


def test_parse_handle() -> None:
    assert [parse_handle(h) for h in ("#37", "37", " # 37 ", 37)] == [37] * 4
    assert [parse_handle(h) for h in ("#-1", 0, -2, None, 3.0, "#3a", True)] == [None] * 7


def test_search_finds_the_newest_not_shown_whole_by_output_or_arguments() -> None:
    messages = chat_run(80, user_every=0)
    outputs = chat_outputs(messages)
    prompt = scoutd.prepare(messages, config=RECALL).messages
    # "of the run" is in every output: the newest one not shown whole is returned
    whole = {m["content"] for m in prompt if m.get("role") == "tool"}
    newest_hidden = max(n for n in range(1, 81) if outputs[n - 1] not in whole)
    assert newest_hidden < 70
    answer = find_output(messages, search="of the run", visible=prompt)
    assert answer.handle == newest_hidden
    assert answer.text == f"#{newest_hidden}\n{outputs[newest_hidden - 1]}"
    # without the prompt, the newest output of all
    assert find_output(messages, search="of the run").handle == 80
    # by a text of the call's arguments
    assert find_output(messages, search="/src/module_7.py").handle == 7
    assert find_output(messages, search="value_9_33").handle == 9


def test_an_earlier_recall_answer_is_not_found_by_search() -> None:
    messages = chat_run(5, user_every=0)
    ident = "call_recall"
    arguments = json.dumps({"search": "value_2_5"})
    function = {"name": RECALL_TOOL_NAME, "arguments": arguments}
    messages.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": ident, "type": "function", "function": function}],
        }
    )
    messages.append({"role": "tool", "tool_call_id": ident, "content": "#2\n" + output_text(2)})
    assert find_output(messages, search="value_2_5").handle == 2


def test_block_contents_recall_their_text() -> None:
    """An Anthropic tool_result whose content is blocks recalls its text blocks joined."""
    messages = to_anthropic(chat_run(3, user_every=0))
    result = messages[-1]["content"][0]
    result["content"] = [
        {"type": "text", "text": "first part\n"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}},
        {"type": "text", "text": "second part"},
    ]
    answer = find_output(messages, "#3")
    assert answer.found and "first part" in answer.text and "second part" in answer.text
    assert find_output(messages, "#1").text == output_text(1)  # a string content: exact


def test_tool_definitions_have_the_provider_shapes() -> None:
    chat = recall_tool("openai-chat")
    responses = recall_tool("openai-responses")
    anthropic = recall_tool("anthropic")
    pydantic = pytest.importorskip("pydantic")
    from openai.types.chat import ChatCompletionToolParam
    from openai.types.responses import FunctionToolParam

    pydantic.TypeAdapter(ChatCompletionToolParam).validate_python(chat)
    pydantic.TypeAdapter(FunctionToolParam).validate_python(responses)
    assert set(chat) == {"type", "function"} and chat["function"]["name"] == "recall"
    assert set(responses) == {"type", "name", "description", "parameters", "strict"}
    # Anthropic Messages: name (^[a-zA-Z0-9_-]{1,64}$), description, input_schema (an object)
    assert set(anthropic) == {"name", "description", "input_schema"}
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", anthropic["name"])
    schema = anthropic["input_schema"]
    assert schema["type"] == "object" and set(schema["properties"]) == {"handle", "search"}
    chat["function"]["parameters"]["properties"].clear()  # each call makes a new definition
    assert recall_tool("openai-chat")["function"]["parameters"]["properties"]
    with pytest.raises(ValueError, match="no recall tool definition"):
        recall_tool("scout")


def test_recall_off_keeps_prompts_as_they_were() -> None:
    messages = chat_run(80)
    for strategy in COMPACTING:
        off = scoutd.prepare(messages, strategy, config={**SMALL, "recall": False})
        unset = scoutd.prepare(messages, strategy, config=SMALL)
        assert msgspec.json.encode(off.messages) == msgspec.json.encode(unset.messages)


# --- in a session -----------------------------------------------------------------------------


def test_session_recall_answers_from_its_own_conversation_only() -> None:
    """Two sessions: a handle reaches only the asking session's outputs."""
    mine, theirs = chat_run(60), chat_run(8, user_every=0)
    for message in theirs:
        if message.get("role") == "tool":
            message["content"] = "SECRET of the other session " + message["content"]
    with scoutd.Session(config=RECALL) as a, scoutd.Session(config=RECALL) as b:
        prompt = a.prepare_prompt(mine)
        b.prepare_prompt(theirs)
        handle = max(marked(prompt))
        assert handle > 8
        assert a.recall(f"#{handle}") == chat_outputs(mine)[handle - 1]
        assert (
            b.recall(f"#{handle}")
            == f"no output #{handle}: this conversation has 8 tool outputs, #1-#8"
        )
        assert a.recall(search="SECRET of the other").startswith("no tool output")
        assert b.recall("#3").startswith("SECRET")
    with pytest.raises(SessionClosed):
        a.recall("#1")


@pytest.mark.parametrize("strategy", COMPACTING[1:])
def test_handles_stay_put_round_after_round(strategy: str) -> None:
    """A session's rounds give the same handles as ``prepare`` of the same conversation,
    and an output keeps its handle as the conversation grows."""
    messages = chat_run(90)
    seen: dict[int, str] = {}
    with scoutd.Session(strategies=strategy, config=RECALL) as session:
        for end in range(120, len(messages) + 1, 7):
            prompt = session.prepare_prompt(messages[:end])
            assert prompt == scoutd.prepare(messages[:end], strategy, config=RECALL).messages
            for handle in marked(prompt):
                answer = session.recall(handle)
                assert seen.setdefault(handle, answer) == answer
    assert len(seen) > 10


@pytest.mark.parametrize("strategy", COMPACTING[1:3])
def test_session_rounds_with_moving_protection_match_prepare(strategy: str) -> None:
    """Repeated calls move the epoch strategies' protection within an epoch (the
    patched round, ``epoch_rounds``): with recall on, its prompt is still ``prepare``'s."""
    messages = conversation(150, output_size=700, user_every=0, repeat_every=9)
    config = {
        **RECALL,
        "epoch_tool_call_threshold": 20,
        "epoch_size": 10,
        "epoch_full_tool_calls": 1,
        "epoch_compacted_tool_calls": 30,
        "epoch_increment_max_compacted_tool_calls": 40,
    }
    with scoutd.Session(strategies=strategy, config=config, format="scout") as session:
        for end in range(60, len(messages) + 1, 2):
            prompt = session.prepare_prompt(messages[:end])
            expected = scoutd.prepare(messages[:end], strategy, config=config, format="scout")
            assert prompt == expected.messages
    assert marked(prompt) and removed(prompt)


def test_a_recalled_output_stays_whole_for_the_verbatim_band() -> None:
    """The answer enters the conversation as the newest output: the next prompts carry it
    verbatim while it is among the newest ``cost_full_tool_outputs``."""
    band = 6
    config = {**RECALL, "cost_full_tool_outputs": band, "context_window": 20_000}
    messages = chat_run(60, user_every=0)
    with scoutd.Session(config=config) as session:
        prompt = session.prepare_prompt(messages)
        handle = min(marked(prompt))
        answer = session.recall(f"#{handle}")
        assert answer == output_text(handle)
        function = {"name": "recall", "arguments": json.dumps({"handle": f"#{handle}"})}
        call = {"id": "recall_1", "type": "function", "function": function}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "recall_1", "content": answer},
        ]
        for later in range(band):
            prompt = session.prepare_prompt(messages)
            [carried] = [m for m in prompt if m.get("tool_call_id") == "recall_1"]
            assert carried["content"] == answer, f"shortened {later} outputs after the recall"
            messages += chat_run(61 + later, user_every=0)[-2:]  # one more output
            messages[-2]["tool_calls"][0]["id"] = messages[-1]["tool_call_id"] = f"more_{later}"


# --- properties -------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["openai-chat", "scout"])
def test_a_strategy_after_one_that_removed_outputs_writes_no_handles(fmt: str) -> None:
    """Its numbers would count what the first left and name other outputs: it writes
    none, and every handle in the prompt recalls the output it marks, in ``prepare``
    and round by round in a session (in the scout format, the session's own rounds
    for the first strategy, then the second over what it left)."""
    chat = chat_run(80)
    messages = chat if fmt == "openai-chat" else scoutd.formats.scout_view(chat)
    outputs = chat_outputs(chat)
    chain = "shorten_tools_cost_aware,shorten_tools_epoch"
    # the epoch strategy's band long enough to keep what the default shortened
    config = {**RECALL, "epoch_compacted_tool_calls": 40}
    prepared = scoutd.prepare(messages, chain, config=config, format=fmt)
    first, second = prepared.report
    assert first.outputs_dropped > 0 and second.outputs_truncated > first.outputs_truncated > 0
    assert check_heads(prepared.messages, outputs) == first.outputs_truncated
    with scoutd.Session(strategies=chain, config=config, format=fmt) as session:
        for end in range(140, len(messages) + 1, 9):
            prompt = session.prepare_prompt(messages[:end])
            expected = scoutd.prepare(messages[:end], chain, config=config, format=fmt)
            assert prompt == expected.messages
            check_heads(prompt, outputs)
            for handle, _ in shown(prompt):
                assert session.recall(handle) == outputs[handle - 1]


def test_a_strategy_after_one_that_removed_nothing_writes_its_handles() -> None:
    messages = chat_run(80)
    outputs = chat_outputs(messages)
    # a window so large that the default never compacts: the epoch strategy after it
    # gets the conversation's outputs and numbers them as recall does
    config = {**RECALL, "context_window": 10_000_000}
    prepared = scoutd.prepare(
        messages, "shorten_tools_cost_aware,shorten_tools_epoch", config=config
    )
    first, second = prepared.report
    assert first.outputs_dropped == first.outputs_truncated == 0
    assert second.outputs_truncated > 0
    assert check_heads(prepared.messages, outputs) == second.outputs_truncated
    assert removed(prepared.messages)


PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def scout_outputs(messages: list[Any]) -> list[str]:
    """The original text of each usable scout output, oldest first (an independent reading)."""
    texts = []
    for message in messages:
        if not isinstance(message, dict) or message.get("role") != "function_call_output":
            continue
        try:
            body = json.loads(message["content"])
        except (TypeError, ValueError):
            continue
        if isinstance(body, dict):
            value = body.get("content")
            if isinstance(value, str):
                texts.append(value)
            else:
                texts.append("" if value is None else msgspec.json.encode(value).decode())
    return texts


# Two compacting strategies in one list: the second sees what the first left.
CHAINS = [f"{first},{second}" for first in COMPACTING for second in COMPACTING[1:]]


@PROPERTY
@given(conversations(max_pairs=60), st.sampled_from(COMPACTING + CHAINS))
def test_property_every_handle_recalls_its_original(messages: list[Any], strategy: str) -> None:
    config = {
        **RECALL,
        "context_window": 2_000,
        "full_tool_outputs": 2,
        "max_tool_calls": 6,
        "epoch_tool_call_threshold": 3,
        "epoch_full_tool_calls": 1,
        "epoch_compacted_tool_calls": 3,
        "epoch_size": 1,
        "cost_full_tool_outputs": 2,
        "cost_compacted_tool_calls": 3,
    }
    before = copy.deepcopy(messages)
    prompt = scoutd.prepare(messages, strategy, config=config, format="scout").messages
    originals = scout_outputs(messages)
    check_heads(prompt, originals)
    for handle, length in marked(prompt).items():
        answer = find_output(messages, handle, format="scout")
        assert answer.found and answer.text == originals[handle - 1]
        assert len(answer.text) == length
    for handle in removed(prompt):
        assert find_output(messages, handle, format="scout").text == originals[handle - 1]
    find_output(messages, search="zzz", format="scout", visible=prompt)
    assert messages == before  # neither prepare nor recall changed the input


@PROPERTY
@given(
    st.lists(st.integers(min_value=0, max_value=2500), min_size=1, max_size=50),
    st.sampled_from(["openai-chat", "anthropic", "openai-responses"]),
    st.sampled_from(COMPACTING),
)
def test_property_prompts_with_recall_are_valid_requests(
    sizes: list[int], fmt: str, strategy: str
) -> None:
    chat = chat_run(len(sizes), user_every=7)
    outputs = [m for m in chat if m.get("role") == "tool"]
    for message, size in zip(outputs, sizes, strict=True):
        message["content"] = message["content"][:size]
    messages = {
        "openai-chat": chat,
        "anthropic": to_anthropic(chat),
        "openai-responses": to_responses(chat),
    }[fmt]
    before = copy.deepcopy(messages)
    config = {**RECALL, "context_window": 8_000, "epoch_tool_call_threshold": 4}
    prompt = scoutd.prepare(messages, strategy, config=config, format=fmt).messages
    assert not new_problems(fmt, messages, prompt)
    originals = [m["content"] for m in outputs]
    for handle in marked(prompt):
        assert find_output(messages, handle, format=fmt).text == originals[handle - 1]
    assert messages == before
