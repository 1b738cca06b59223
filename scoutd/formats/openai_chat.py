"""OpenAI Chat Completions messages <-> the scout view (docs/FORMATS.md).

An assistant message with ``tool_calls`` becomes its text (when it has any)
and one view call per entry; the ``tool`` messages right after it become view
outputs. A group is used only when it is well formed: every call answered by
exactly one ``tool`` message directly after the assistant message, ``arguments``
a string. Anything else passes through untouched and is counted as malformed
(an assistant message still waiting for its answers at the end is not).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import repeat
from typing import Any

import msgspec

from ..strategies.media import MEDIA_KEY, media_blocks
from .adapter import Adapter
from .detect import OPENAI_CHAT
from .openai_chat_fields import pass_through as _pass
from .openai_chat_fields import said as _said
from .openai_chat_fields import unshown as _unshown
from .openai_chat_rebuild import is_tool as _is_tool
from .openai_chat_rebuild import new_message, rebuild
from .texts import ConversationTexts, Known, Texts
from .view import (
    DECODE_ERRORS,
    ENCODE_ERRORS,
    PASSTHROUGH,
    SCOUT_TOOL_ROLES,
    TEXT_PART,
    VIEW_KEY,
    Malformed,
    View,
    blocks_text,
    call_message,
    output_message,
    with_body_fields,
)

__all__ = ["ADAPTER", "new_message", "rebuild", "view", "continues", "opens_group"]

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode

_ONE_CALL = (0, 0)  # the refs of a call (slot 0) and its output
_OUTPUT = "function_call_output"
_CUSTOM, _INPUT = "custom", "input"  # a custom call's entry type and its free text


def _calls(message: Any) -> list[tuple[Any, Any, str | dict[str, str]]] | None:
    """The (name, id, arguments) of each call; None without calls.

    A ``custom`` call's free-text ``input`` is shown as the argument ``input``
    (as in the Responses format), so its pair is compacted as a function one.

    Raises:
        Malformed: ``tool_calls`` that is no list (nor null), or an entry without a
            string ``id`` or ``arguments`` (``input``).
    """
    if type(message) is not dict and not isinstance(message, Mapping):
        return None
    if message.get("role") != "assistant":
        return None
    entries = message.get("tool_calls")
    if not entries and (entries is None or type(entries) is list):
        return None  # no calls
    if type(entries) is not list:
        raise Malformed
    calls: list[tuple[Any, Any, str | dict[str, str]]] = []
    for entry in entries:
        if type(entry) is not dict:
            raise Malformed
        ident = entry.get("id")
        if entry.get("type") == _CUSTOM:
            custom = entry.get(_CUSTOM)
            if type(custom) is not dict or type(ident) is not str:
                raise Malformed
            text = custom.get(_INPUT)
            if type(text) is not str:
                raise Malformed
            calls.append((custom.get("name"), ident, {_INPUT: text}))
            continue
        function = entry.get("function")
        if type(function) is not dict or type(ident) is not str:
            raise Malformed
        arguments = function.get("arguments")
        if type(arguments) is not str:
            raise Malformed
        calls.append((function.get("name"), ident, arguments))
    return calls


def _holds_calls(message: Any) -> bool:
    """Whether an assistant message holds tool calls, of any shape: ``tool_calls``
    (custom ones too) or a legacy ``function_call`` (``null`` is none)."""
    if type(message) is not dict and not isinstance(message, Mapping):
        return False
    if message.get("role") != "assistant":
        return False
    entries = message.get("tool_calls")
    if entries is not None and (type(entries) is not list or len(entries) > 0):
        return True
    return message.get("function_call") is not None


def _same_group(message: dict[str, Any], entry: dict[str, Any], answer: Any, found: Known) -> bool:
    """Whether a one-call group without text holds the very strings of ``found``."""
    function = entry.get("function")
    return (
        type(function) is dict
        and found[1] is entry.get("id")
        and found[2] is function.get("name")
        and found[3] is function.get("arguments")
        and answer.get("role") == "tool"
        and answer.get("tool_call_id") == found[1]
        and not message.get("content")
        and not _unshown(message)
        and (len(answer) == 3 or not _unshown(answer))
    )


def _tool_at(messages: Sequence[Any], i: int, count: int) -> bool:
    """Whether ``messages[i]`` exists and is a ``tool`` message."""
    if i >= count:
        return False
    message = messages[i]
    if type(message) is dict:
        return message.get("role") == "tool"
    return _is_tool(message)


def view(messages: Sequence[Any], mark: bool = True, kept: ConversationTexts | None = None) -> View:
    """The scout view of an OpenAI Chat conversation.

    Written for speed (docs/PERFORMANCE.md): it runs over every message of
    every prepare call, so the common case (dict messages, string contents, a
    well-formed group) is handled in one pass, by :func:`_add_one_call` for a
    single call and :func:`_add_plain_group` for parallel calls; any other
    group takes the general way, which gives the same view.
    """
    result = View(mark=mark)
    out, refs, starts = result.messages, result.refs, result.starts
    count = len(messages)
    texts = Texts.after(kept)
    known, made = texts.known.get, texts.made
    i = 0
    while i < count:
        message = messages[i]
        role = message.get("role") if type(message) is dict else None
        if role == "assistant":
            # A one-call group whose strings are those of the previous view: its
            # texts are known, only the checks and the view messages remain.
            entries = message.get("tool_calls")
            if type(entries) is list and len(entries) == 1 and i + 1 < count:
                entry, answer = entries[0], messages[i + 1]
                key = id(answer.get("content")) if type(answer) is dict else 0
                found = known(key) if type(entry) is dict else None
                if (
                    found is not None
                    and _same_group(message, entry, answer, found)
                    and not _tool_at(messages, i + 2, count)
                ):
                    made[key] = found
                    at = len(out)
                    out.append({"role": "function_call", "content": found[4], VIEW_KEY: at})
                    out.append({"role": _OUTPUT, "content": found[5], VIEW_KEY: at + 1})
                    refs += _ONE_CALL
                    starts.append(at + 1)
                    starts.append(at + 2)
                    i += 2
                    continue
            if _add_one_call(result, messages, i, message, texts):
                i += 2
                continue
            end = _add_plain_group(result, messages, i, message, texts)
            if end:
                i = end
                continue
        elif role is not None and role not in SCOUT_TOOL_ROLES:
            if role == "tool":
                result.malformed += 1
            if _unshown(message, True):
                _pass(result, message)
            else:
                out.append(message)
                refs.append(PASSTHROUGH)
                starts.append(len(out))
            i += 1
            continue
        i = _add_any_group(result, messages, i, message)
    if not mark:  # the common way always marks what it makes
        for part, ref in zip(out, refs, strict=True):
            if ref != PASSTHROUGH:
                part.pop(VIEW_KEY, None)
    texts.keep(kept)
    result.bodies, result.parsed = texts.known_parsed, texts.parsed
    return result


def _add_one_call(
    result: View, messages: Sequence[Any], i: int, message: dict[str, Any], texts: Texts
) -> bool:
    """Add an assistant message with one call and its answer right after, when plain.

    The most common group by far, read without the bookkeeping of parallel
    calls; the view is the one :func:`_add_plain_group` would make. Returns
    whether it was added (nothing is added otherwise).
    """
    entries = message.get("tool_calls")
    count = len(messages)
    if type(entries) is not list or len(entries) != 1 or i + 1 >= count:
        return False
    entry, answer = entries[0], messages[i + 1]
    if type(entry) is not dict or type(answer) is not dict or answer.get("role") != "tool":
        return False
    if i + 2 < count:
        following = messages[i + 2]
        if following.get("role") == "tool" if type(following) is dict else _is_tool(following):
            return False  # an extra answer: the general way counts it
    function, ident, output = entry.get("function"), entry.get("id"), answer.get("content")
    if type(function) is not dict or type(ident) is not str or type(output) is not str:
        return False
    arguments = function.get("arguments")
    if type(arguments) is not str or answer.get("tool_call_id") != ident:
        return False
    if len(answer) != 3 and _unshown(answer):  # (3: its role, call id and content)
        return False  # it sends more than its content: the general way counts it
    text = _said(message)
    name = function.get("name")
    key = id(output)  # a kept entry holds its output: the key is that very string
    known = texts.known.get(key)
    if known is not None and known[1] is ident and known[2] is name and known[3] is arguments:
        call, reply = known[4], known[5]  # the very same strings: the same texts
        texts.made[key] = known
    else:
        named = texts.names.get(name) if type(name) is str else None
        try:
            if named is None:
                named = _encode(name).decode("utf-8")
                if type(name) is str:
                    texts.names[name] = named
            if type(_decode(arguments)) is not dict:
                return False  # arguments kept as a string: the general way
            ident_text = _encode(ident).decode("utf-8")
            reply = _encode({"id": ident, "content": output}).decode("utf-8")
        except (*DECODE_ERRORS, *ENCODE_ERRORS):
            return False
        call = f'{{"name":{named},"id":{ident_text},"arguments":{arguments}}}'
        if type(name) is str:
            texts.made[key] = (output, ident, name, arguments, call, reply)
    out, refs, starts = result.messages, result.refs, result.starts
    at = len(out)
    if text:
        out.append({"role": "assistant", "content": text, VIEW_KEY: at})
        refs.append(TEXT_PART)
        at += 1
    out.append({"role": "function_call", "content": call, VIEW_KEY: at})
    out.append({"role": "function_call_output", "content": reply, VIEW_KEY: at + 1})
    refs += _ONE_CALL
    starts.append(at + 1)
    starts.append(at + 2)
    return True


def _add_plain_group(
    result: View, messages: Sequence[Any], i: int, message: dict[str, Any], texts: Texts
) -> int:
    """Add an assistant message and its answers when all are of the common shape.

    The common shape: no calls at all, or ``tool_calls`` entries with a string
    ``id`` and ``arguments``, each answered once by the dict ``tool`` messages
    right after (string contents and ids, no other ``tool`` message following).
    Returns the index after the group, or 0 (nothing added) for any other
    shape, which :func:`_add_any_group` then reads (and counts when malformed).
    """
    out = result.messages
    entries = message.get("tool_calls")
    if type(entries) is not list or not entries:
        if entries and type(entries) is not list:
            return 0  # calls it cannot read: the general way counts them
        # an assistant message without calls: as it is
        _pass(result, message, _holds_calls(message))
        return i + 1
    end = i + 1 + len(entries)
    if end >= len(messages):
        if end > len(messages):
            return 0
    else:
        following = messages[end]
        if following.get("role") == "tool" if type(following) is dict else _is_tool(following):
            return 0
    text = _said(message)
    base = len(out)
    said_at = _text_slot(result, len(entries)) if text else -1
    waiting = set()  # the ids of the calls not answered yet
    try:
        for slot, entry in enumerate(entries):
            if slot == said_at:
                out.append({"role": "assistant", "content": text, VIEW_KEY: len(out)})
            function = entry.get("function") if type(entry) is dict else None
            if type(function) is not dict:
                break
            ident, arguments = entry.get("id"), function.get("arguments")
            if type(ident) is not str or type(arguments) is not str:
                break
            body = texts.call(function.get("name"), ident, arguments)
            out.append({"role": "function_call", "content": body, VIEW_KEY: len(out)})
            waiting.add(ident)
        else:
            for answer in messages[i + 1 : end] if len(waiting) == len(entries) else ():
                if type(answer) is not dict or answer.get("role") != "tool":
                    break
                output, ident = answer.get("content"), answer.get("tool_call_id")
                if type(output) is not str or type(ident) is not str or ident not in waiting:
                    break
                if len(answer) != 3 and _unshown(answer):  # 3: its role, call id, content
                    break  # it sends more than its content: the general way counts it
                waiting.discard(ident)
                body = texts.output(ident, output)
                out.append({"role": "function_call_output", "content": body, VIEW_KEY: len(out)})
    except Malformed:
        pass
    if waiting or len(out) != base + bool(text) + 2 * len(entries):
        del out[base:]  # not of the common shape: nothing added
        return 0
    refs, starts = result.refs, result.starts
    if end == i + 2:  # one call, the most common group
        if text:
            refs.append(TEXT_PART)
        refs += _ONE_CALL
        starts.append(len(out) - 1)
        starts.append(len(out))
        return end
    calls = len(entries)
    refs.extend(range(calls))
    if text:
        refs.insert(len(refs) - calls + said_at, TEXT_PART)
    refs.extend(repeat(0, calls))
    starts.extend(range(len(out) - calls, len(out) + 1))
    return end


def _text_slot(result: View, calls: int) -> int:
    """Before which of a group's ``calls`` its assistant's text goes in the view.

    A remark belongs to the pair after it (strategies/cost_aware.py). The rebuild
    sends an assistant message, its text and what it sends beside it, while any of
    its calls stays, so in a counted view the text counts with the last call, the
    newest pair, the last one dropped; shown (``scout_view``), it comes first, as
    the model said it."""
    return calls - 1 if result.mark else 0


def _commit(result: View, parts: list[dict[str, Any]], calls: int) -> None:
    """Add a group's view messages: the assistant's text (if any) and its ``calls``
    (the text before the one :func:`_text_slot` says), then their outputs."""
    out, refs = result.messages, result.refs
    base = len(out)
    head = len(parts) - calls  # the view messages of the assistant message itself
    said = head > calls
    if said:
        at = _text_slot(result, calls)
        parts = [*parts[1 : 1 + at], parts[0], *parts[1 + at :]]
    if result.mark:
        for offset, part in enumerate(parts, base):
            part[VIEW_KEY] = offset
    out.extend(parts)
    refs.extend(range(calls))
    if said:
        refs.insert(len(refs) - calls + at, TEXT_PART)
    refs.extend([0] * calls)
    result.starts.extend(range(base + head, base + head + calls + 1))


def _add_any_group(result: View, messages: Sequence[Any], i: int, message: Any) -> int:
    """Add the message at ``i`` (and its answers, if it has calls) in any shape.

    Returns the index after what was added.
    """
    try:
        calls = _calls(message)
    except Malformed:
        calls = []
    if calls is None:
        result.malformed += _is_tool(message)
        _pass(result, message, _holds_calls(message))
        return i + 1
    count = len(messages)
    end = i + 1
    texts: list[str | None] = []
    ids: list[Any] = []
    media: list[list[Any]] = []  # each output's media blocks, shown as placeholders
    fields: list[dict[Any, Any]] = []  # what each answer sends beside its content
    while end < count:
        answer = messages[end]
        # a tool message of any mapping type answers as a dict does
        if not (answer.get("role") == "tool" if type(answer) is dict else _is_tool(answer)):
            break
        content = answer.get("content")
        texts.append(content if type(content) is str else blocks_text(content))
        ids.append(answer.get("tool_call_id"))
        media.append(media_blocks(content) if result.mark else [])
        fields.append(_unshown(answer))
        end += 1
    if not _answered(calls, ids, texts):
        pending = bool(calls) and end == i + 1 and end == count
        result.malformed += 0 if pending else end - i
        # its calls go, or stay, with their answers (calls still waiting: after every answer)
        _pass(result, message, not pending)
        for passed in messages[i + 1 : end]:
            _pass(result, passed)
        return end
    saved = len(result.messages), len(result.starts)
    try:
        _add_group(result, message, calls, ids, texts, media, fields)  # type: ignore[arg-type]
    except Malformed:
        result.rollback(*saved)
        result.malformed += end - i
        _pass(result, message, True)
        for passed in messages[i + 1 : end]:
            _pass(result, passed)
    return end


def _answered(calls: list[tuple[Any, Any, Any]], ids: list[Any], texts: list[Any]) -> bool:
    """Whether the ``tool`` messages (``ids``, ``texts``) answer ``calls`` exactly once each."""
    if not calls or len(texts) != len(calls) or len(ids) != len(calls) or None in texts:
        return False
    if len(calls) == 1:
        return bool(ids[0] == calls[0][1])
    if any(type(ident) is not str for ident in ids):
        return False  # call ids are strings; an unhashable one must not reach set()
    return len(set(ids)) == len(ids) and set(ids) == {ident for _, ident, _ in calls}


def _add_group(
    result: View,
    message: Any,
    calls: list[tuple[Any, Any, str | dict[str, str]]],
    ids: list[Any],
    texts: list[str],
    media: list[list[Any]],
    fields: list[dict[Any, Any]],
) -> None:
    """Add an assistant message's text and calls, and their answers, to the view; an
    output's media blocks go under :data:`MEDIA_KEY`, counted while it is whole.

    What an answer sends beside its content (a ``name``) is in its call's body, under
    ``fields``: a shortened call is counted as its rewrite sends it, which keeps them,
    where a shortened output is counted at its bound whatever its body holds."""
    text = _said(message)
    parts = [{"role": "assistant", "content": text}] if text else []
    beside = {ident: extra for ident, extra in zip(ids, fields, strict=True) if extra}
    for name, ident, arguments in calls:
        call = call_message(name, ident, arguments)
        if ident in beside:
            call["content"] = with_body_fields(call["content"], beside[ident])
        parts.append(call)
    for ident, output, blocks in zip(ids, texts, media, strict=True):
        part: dict[str, Any] = output_message(ident, output)
        if blocks:
            part[MEDIA_KEY] = blocks
        parts.append(part)
    _commit(result, parts, len(calls))


def opens_group(message: Any) -> bool:
    """Whether :func:`view` always starts a new group at ``message``: it is not a
    ``tool`` message, the only message a group takes after its first."""
    return not _is_tool(message)


def continues(messages: Sequence[Any], start: int, prompt: Sequence[Any]) -> bool:
    """A message appended after a rebuilt prompt always comes back as itself."""
    return True


ADAPTER = Adapter(OPENAI_CHAT, view, rebuild, opens_group, continues)
