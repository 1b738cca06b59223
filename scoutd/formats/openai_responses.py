"""OpenAI Responses input items <-> the scout view (docs/FORMATS.md).

A ``function_call`` item becomes a view call and the ``function_call_output``
item with its ``call_id`` a view output; so do a ``custom_tool_call`` (its
free-text ``input`` shown as the argument ``input``), a ``local_shell_call``,
``shell_call``, ``apply_patch_call`` and ``computer_call`` with the output items
that answer them (what each shows and how it is written back:
:mod:`.openai_responses_items`). A ``call_id`` names one pair whatever its kind:
two calls sharing one pair with none, nor does a call with an output of a kind
that does not answer it. Other items stay as they are. A call and its output are
used only as a well-formed pair (one of each, the output later); the rest passes
through and is counted as malformed (a call still waiting at the end is not).
The items of one model turn, a ``reasoning`` item and what follows it up to the
next ``reasoning`` item or non-assistant item, go together: when all their calls
are dropped the reasoning and the assistant text go too, and a notice goes
before the turn. Calls of other kinds (MCP, the provider's own tools) pass
through, keep their turn and its reasoning, and are counted for their size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..strategies.media import MEDIA_KEY, media_blocks
from .adapter import Adapter
from .detect import OPENAI_RESPONSES
from .openai_responses_items import (
    CALL_KINDS,
    COMPUTER_OUTPUT,
    OUTPUT_KINDS,
    answers,
    call_arguments,
    call_name,
    output_id,
    output_text,
    rewritten_call,
    rewritten_output_item,
)
from .texts import ConversationTexts, Texts
from .view import (
    KEPT,
    PASSTHROUGH,
    TEXT_PART,
    VIEW_KEY,
    Malformed,
    Outcome,
    Rebuilt,
    View,
)

__all__ = ["ADAPTER", "call_ids", "continues", "rebuild", "starts_turn", "turn_starts", "view"]

_CALL, _REASONING = "function_call", "reasoning"
_SHELL_OUTPUT = "shell_call_output"  # a hosted shell's output stands inside its response
# The other items a model turn holds (openai.types.responses.ResponseOutputItem): calls
# answered by an output item of their own (shell, computer, apply_patch: paired when
# well formed), tool calls run by the provider, MCP items. Those not paired pass
# through; a ``reasoning`` item stays with them, and added text never goes between
# them and the rest of their turn.
_OTHER_CALLS = frozenset(
    (
        "local_shell_call",
        "shell_call",
        "apply_patch_call",
        "computer_call",
        "web_search_call",
        "file_search_call",
        "image_generation_call",
        "code_interpreter_call",
        "tool_search_call",
        "program",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
    )
)
# The only items passed through as they are: a message counts by its ``content``, and
# a reasoning item by its fields where the view is counted (:func:`_thought`). Any
# other item passed through carries what is sent outside ``content`` (a tool's traffic,
# an output of no call, a type this adapter does not know): the strategies see a
# stand-in whose content stands for its size (:func:`_stand_in`).
_SHOWN_TYPES = frozenset(("message", _REASONING))
_IMAGE = {"type": "input_image"}  # what an image counts for: the estimate's fixed cost


def _kind(item: Any) -> Any:
    if type(item) is dict:
        return item.get("type")
    return item.get("type") if isinstance(item, Mapping) else None


def _is_call(kind: Any) -> bool:
    """Whether an item of type ``kind`` is a call that pairs (function, custom, shell,
    apply_patch, computer)."""
    return type(kind) is str and kind in CALL_KINDS  # a list as a type is none


def _is_output(kind: Any) -> bool:
    return type(kind) is str and kind in OUTPUT_KINDS


def _call_part(item: Mapping[str, Any], texts: Texts) -> dict[str, Any]:
    arguments = call_arguments(item)
    if type(arguments) is str:  # a function call's arguments text
        content = texts.call(item.get("name"), item["call_id"], arguments)
    else:
        content = texts.encoded_call(call_name(item), item["call_id"], arguments)
    return {"role": _CALL, "content": content}


def _output_part(item: Mapping[str, Any], texts: Texts, mark: bool) -> dict[str, Any]:
    text = output_text(item) or ""
    content = texts.output(output_id(item), text)
    part: dict[str, Any] = {"role": "function_call_output", "content": content}
    if mark:  # media shown as placeholders: counted by what they hold while whole
        output = item.get("output")
        media = [_IMAGE] if item.get("type") == COMPUTER_OUTPUT else media_blocks(output)
        if media:
            part[MEDIA_KEY] = media
    return part


def _partners(call: Any, output: Any) -> bool:
    """Whether ``output`` is of a kind that answers ``call`` (custom with custom)."""
    return answers(_kind(call), _kind(output))


def _pairs(
    items: Sequence[Any], parts: dict[int, dict[str, Any]], texts: Texts, mark: bool
) -> tuple[int, bool]:
    """Find the well-formed pairs; return the count of malformed items, and whether
    any item is a ``reasoning`` item.

    ``parts`` receives the view message of each item of a pair, by index. A
    ``call_id`` is one pair's whatever its kind: a function call and a custom
    call with the same id pair with none (the strategies pair by id alone, and
    would take the one's output for the other's).
    """
    calls: dict[str, list[int]] = {}  # call_id -> positions
    outputs: dict[str, list[int]] = {}
    malformed = 0
    thinks = False
    for i, item in enumerate(items):
        kind = _kind(item)
        if _is_call(kind):
            ident = item.get("call_id")
            if type(ident) is str and call_arguments(item) is not None:
                calls.setdefault(ident, []).append(i)
            else:  # passes through, as malformed (shown as a stand-in of its size)
                malformed += 1
        elif _is_output(kind):
            ident = output_id(item)
            if type(ident) is str and output_text(item) is not None:
                outputs.setdefault(ident, []).append(i)
            else:
                malformed += 1
        elif kind == _REASONING:
            thinks = True
    for ident, found in calls.items():
        answers = outputs.pop(ident, [])
        if (
            len(found) == 1
            and len(answers) == 1
            and found[0] < answers[0]
            and _partners(items[found[0]], items[answers[0]])
        ):
            try:
                call = _call_part(items[found[0]], texts)
                output = _output_part(items[answers[0]], texts, mark)
            except Malformed:
                malformed += 2
                continue
            parts[found[0]], parts[answers[0]] = call, output
        elif answers or len(found) > 1:
            malformed += len(found) + len(answers)
    malformed += sum(map(len, outputs.values()))  # outputs of no call, of either kind
    return malformed, thinks


def _is_image(value: Any) -> bool:
    kind = value.get("type") if isinstance(value, Mapping) else None
    return type(kind) is str and ("image" in kind or "screenshot" in kind)


def _stand_in(item: Mapping[str, Any]) -> dict[str, Any]:
    """What the strategies see of an item passed through that is no message
    (:func:`_unshown`): its fields as content parts, an image (a screenshot, a
    generated image) as an ``input_image`` part.

    The estimate counts a message by its ``content`` (an image part at a fixed cost):
    read as it is, a 40 KB shell output or a huge ``mcp_list_tools`` counted for
    nothing, and the prompt grew past the window uncompacted.
    """
    parts: list[Any] = []
    rest: dict[Any, Any] = {}
    for key, value in item.items():
        if type(value) is list:
            parts.extend(value)
        elif _is_image(value) or (key == "result" and _kind(item) == "image_generation_call"):
            parts.append(_IMAGE)
        else:
            rest[key] = value
    parts.append(rest)
    return {"role": "passthrough", "content": parts}


def _thought(item: Mapping[str, Any]) -> dict[str, Any]:
    """What the strategies see of a ``reasoning`` item: an assistant remark that sends
    the item (its summary, reasoning text and ``encrypted_content``), counted apart
    under :data:`MEDIA_KEY` as its JSON text.

    The provider takes the reasoning of the tool loop in progress back as input, and,
    with a model that keeps reasoning across turns, every turn's: counted for what it
    sends, it belongs to the pair after it, or, in a turn of parallel calls, to the
    newest (:func:`_moved_thoughts`), and is freed with it."""
    return {"role": "assistant", "content": "", MEDIA_KEY: [item]}


def _unshown(item: Any, kind: Any) -> bool:
    """Whether ``item``, passed through, would hide what is sent outside ``content``:
    any item but a message (a ``role``, its text in ``content``) and a ``reasoning``
    item (not counted: docs/FORMATS.md). A call or output that pairs with none, an
    item of a type this adapter does not know, an ``item_reference``: read as it is,
    a 100 KB output of no call counted for nothing and the prompt passed its window.
    """
    if type(kind) is str:
        return kind not in _SHOWN_TYPES
    return isinstance(item, Mapping) and "role" not in item


def _moved_thoughts(items: Sequence[Any], parts: dict[int, dict[str, Any]]) -> dict[int, int]:
    """The ``reasoning`` items whose turn has two paired calls or more, by the position
    of its last one, before which the view counts it: a remark of the turn's newest
    pair, the last the default drops, as the rebuild sends it while any item of its
    turn stays (:func:`_reasoning_kept`)."""
    last: dict[int, int] = {}  # a turn's reasoning item -> its last paired call
    calls: dict[int, int] = {}  # -> how many
    turns = _turns(items)
    for position in parts:
        turn = turns[position]
        if (
            turn != position
            and _is_call(_kind(items[position]))
            and _kind(items[turn]) == _REASONING
        ):
            last[turn] = max(last.get(turn, position), position)
            calls[turn] = calls.get(turn, 0) + 1
    return {at: turn for turn, at in last.items() if calls[turn] > 1}


def view(messages: Sequence[Any], mark: bool = True, kept: ConversationTexts | None = None) -> View:
    """The scout view of a Responses input item list: one view message an item, and,
    in a counted view, a turn's reasoning counted before its last call
    (:func:`_moved_thoughts`)."""
    result = View(mark=mark)
    parts: dict[int, dict[str, Any]] = {}
    texts = Texts.after(kept)
    result.malformed, thinks = _pairs(messages, parts, texts, result.mark)
    moved = _moved_thoughts(messages, parts) if result.mark and parts and thinks else {}
    away = set(moved.values())
    for i, item in enumerate(messages):
        part = parts.get(i)
        if part is None:
            kind = _kind(item)
            if _unshown(item, kind):
                result.passthrough(_stand_in(item))
            elif kind == _REASONING and result.mark:
                # counted before its turn's last call instead: a remark of no size here
                seen = {"role": "assistant", "content": ""} if i in away else _thought(item)
                result.passthrough(seen)
            else:
                result.passthrough(item)
        else:
            if i in moved:
                result.add(_thought(messages[moved[i]]), TEXT_PART)
            result.add(part, 0)
            result.close()
    texts.keep(kept)
    result.bodies, result.parsed = texts.known_parsed, texts.parsed
    return result


def _in_turn(item: Any, kind: Any) -> bool:
    """Whether ``item``, of type ``kind``, belongs to a model turn (reasoning, a
    call of any kind, assistant text)."""
    if _is_call(kind) or kind == _REASONING or (type(kind) is str and kind in _OTHER_CALLS):
        return True
    if type(item) is dict:
        return item.get("role") == "assistant"
    return isinstance(item, Mapping) and item.get("role") == "assistant"


def starts_turn(items: Sequence[Any], position: int) -> bool:
    """Whether ``items[position]`` joins no model turn of the items before it; False
    when unsure (after a hosted shell's output, which may stand inside its response:
    :func:`_in_response`), as the caller then reads the whole again."""
    item, last = items[position], items[position - 1]
    kind, last_kind = _kind(item), _kind(last)
    if last_kind == _SHELL_OUTPUT and type(last.get("id")) is str:
        return False
    return not (_in_turn(item, kind) and kind != _REASONING and _in_turn(last, last_kind))


def _in_response(items: Sequence[Any], position: int, start: int) -> bool:
    """Whether the output item at ``position`` stands inside the model response whose
    turn opened at ``start``: a hosted shell's output, which the provider wrote into
    its response (with an ``id`` of its own, as every item of a response has; a
    client's answer has none), the response going on after it. So it is when the
    turn opened with a ``reasoning`` item, a call of the turn is the one answered,
    and a call or assistant text, not a new ``reasoning`` item, follows: the API
    takes that response's later items back only with its reasoning item."""
    item = items[position]
    if _kind(item) != _SHELL_OUTPUT or type(item.get("id")) is not str:
        return False
    if start < 0 or _kind(items[start]) != _REASONING or position + 1 >= len(items):
        return False
    following = items[position + 1]
    kind = _kind(following)
    if kind == _REASONING or not _in_turn(following, kind):
        return False
    ident = output_id(item)
    return type(ident) is str and any(
        _is_call(_kind(earlier)) and earlier.get("call_id") == ident
        for earlier in items[start:position]
    )


def turn_starts(items: Sequence[Any]) -> list[int]:
    """The first item of the model turn each item belongs to (its own index if none):
    the turns a rebuild keeps or drops whole, for a reader of the same items (the
    simulator's model calls)."""
    return _turns(items)


def _turns(items: Sequence[Any]) -> list[int]:
    """The first item of the model turn each item belongs to (its own index if none)."""
    starts = []
    start = -1
    for i, item in enumerate(items):
        kind = _kind(item)
        if not _in_turn(item, kind):
            if _is_output(kind) and _in_response(items, i, start):
                starts.append(start)
                continue
            start = -1
        elif kind == _REASONING or start < 0:
            start = i
        starts.append(start if start >= 0 else i)
    return starts


def new_message(message: Any) -> Any:
    """A message a strategy added (a notice), as a Responses input item."""
    if type(message) is dict and "role" in message and "type" not in message:
        return {"type": "message", **{k: v for k, v in message.items() if k != VIEW_KEY}}
    return message


def _rewritten(item: Mapping[str, Any], fate: Any) -> Any:
    if _is_call(item.get("type")):
        return rewritten_call(item, fate)
    return rewritten_output_item(item, fate)


def _reasoning_kept(
    messages: Sequence[Any], turns: list[int], fates: list[Any]
) -> tuple[set[int], set[int]]:
    """The ``reasoning`` items whose turn had other items: those that keep none of
    them (bare), and those that keep some.

    A reasoning item must be followed by an item of its turn: when the
    strategies dropped them all (an assistant's answer without calls, dropped
    as a remark), the reasoning goes with them, as the turn goes as a whole; while
    one stays, so does the reasoning, whatever its own fate (the strategies see it
    as a remark of the turn's first pair, or newest, :func:`_thought`).
    """
    others: dict[int, bool] = {}  # a turn's reasoning item -> whether an item after it stays
    for position, turn in enumerate(turns):
        if turn != position and _kind(messages[turn]) == _REASONING:
            others[turn] = others.get(turn, False) or fates[position] is not None
    bare = {turn for turn, stays in others.items() if not stays}
    return bare, others.keys() - bare


def rebuild(messages: Sequence[Any], shape: View, result: Outcome) -> Rebuilt:
    """Responses input items from the strategies' result over ``shape``."""
    # One view message per item, but for a call with its turn's reasoning counted
    # before it (:func:`_moved_thoughts`): an item's own is the last of its view messages.
    fates, refs = result.fates, shape.refs
    if len(refs) != len(messages):
        ends = shape.starts[1:]
        fates, refs = [fates[end - 1] for end in ends], [refs[end - 1] for end in ends]
    turns = _turns(messages)
    # The turns (by their first item) with a call, and with a call still there; a call
    # passed through (malformed, or of another kind) counts, or the turn would take it, and
    # its output, along
    called: set[int] = set()
    kept: set[int] = set()
    for position, item in enumerate(messages):
        kind = _kind(item)
        if _is_call(kind) or (type(kind) is str and kind in _OTHER_CALLS):
            called.add(turns[position])
            if fates[position] is not None:
                kept.add(turns[position])
    gone = called - kept
    bare: set[int] = set()
    carried: set[int] = set()  # reasoning kept for its turn, whatever its own fate
    if any(f is None for f in fates):
        bare, carried = _reasoning_kept(messages, turns, fates)
    before: dict[int, list[Any]] = {}
    for position, added in result.before.items():
        before.setdefault(turns[position], []).extend(added)
    out: list[Any] = []
    narration = 0
    for position, item in enumerate(messages):
        if before and position in before:
            out.extend(map(new_message, before[position]))
        fate = fates[position]
        if gone and turns[position] in gone:  # its calls all dropped: the rest goes too
            narration += isinstance(item, Mapping) and item.get("role") == "assistant"
            continue
        if position in carried:
            out.append(item)  # seen as a remark (:func:`_thought`): never rewritten
            continue
        if fate is None or position in bare:
            continue
        if fate is KEPT:
            out.append(item)
        elif refs[position] != PASSTHROUGH:
            out.append(_rewritten(item, fate))
        else:  # a stand-in rewritten: what it stands for, if a reasoning item (a remark)
            out.append(item if _kind(item) == _REASONING else fate)
    end = _open_end(out) if result.after else len(out)
    out[end:end] = map(new_message, result.after)
    return Rebuilt(out, narration)


def _open_end(out: list[Any]) -> int:
    """Where an item put after every other one goes: before a last model turn whose
    calls are not all answered yet (and the outputs it has so far), as the outputs
    still to come must follow their calls with nothing added in between."""
    start = len(out)
    answered = set()
    while start and type(kind := _kind(out[start - 1])) is str and kind.endswith("_output"):
        start -= 1
        if type(ident := output_id(out[start])) is str:
            answered.add(ident)
    if not start or not _in_turn(out[start - 1], _kind(out[start - 1])):
        return len(out)
    turn = _turns(out[:start])[-1]
    for item in out[turn:start]:
        kind = _kind(item)
        if _is_call(kind) or (type(kind) is str and kind in _OTHER_CALLS):
            ident = item.get("call_id")  # a provider's own call has none: it waits for nothing
            if type(ident) is str and ident not in answered:
                return turn
    return len(out)


def continues(items: Sequence[Any], start: int, prompt: Sequence[Any]) -> bool:
    """Whether ``items[start]`` comes back as itself after a rebuilt prompt: it joins
    no model turn of the items before it (:func:`starts_turn`)."""
    return starts_turn(items, start)


# What two pieces of a model turn with reasoning share, as if a call id: its reasoning
# is counted before its last paired call (:func:`_moved_thoughts`), which a piece viewed
# apart from the reasoning would not know
_OPEN_TURN = "\x00a turn with reasoning"


def call_ids(items: Sequence[Any]) -> set[str]:
    """The string ``call_id`` of every call and output item (the ids pairing reads),
    and :data:`_OPEN_TURN` when ``items`` may continue a model turn before them (their
    first is an item of a turn, not its reasoning) or end inside one with reasoning."""
    found = set()
    if items:
        first = items[0]
        kind = _kind(first)
        if (kind != _REASONING and _in_turn(first, kind)) or (
            _kind(items[_turns(items)[-1]]) == _REASONING
        ):
            found.add(_OPEN_TURN)
    for item in items:
        kind = _kind(item)
        if _is_call(kind):
            ident = item.get("call_id")
        elif _is_output(kind):
            ident = output_id(item)
        else:
            continue
        if type(ident) is str:
            found.add(ident)
    return found


# Calls pair by call id wherever they stand: no message always opens a group
ADAPTER = Adapter(OPENAI_RESPONSES, view, rebuild, None, continues, call_ids=call_ids)
