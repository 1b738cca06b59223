"""Anthropic Messages <-> the scout view (docs/FORMATS.md).

An assistant turn's ``tool_use`` blocks become view calls (its text blocks, joined,
its narration); the ``tool_result`` blocks of the user turn right after it become
view outputs, their text blocks joined and images shown as ``[image]``. A
shortened output becomes text. When every call of a turn is dropped the whole
turn goes, ``thinking`` blocks and narration with it, and so do the results; the
blocks of a turn that stays are never edited. New text (the compaction notice,
inbox notices) joins the user turn before it, after its ``tool_result`` blocks,
so that roles keep alternating.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..strategies.media import MEDIA_KEY, media_blocks
from .adapter import Adapter
from .detect import ANTHROPIC
from .texts import ConversationTexts, Texts
from .view import (
    KEPT,
    PASSTHROUGH,
    TEXT_PART,
    Malformed,
    Outcome,
    Rebuilt,
    View,
    blocks_text,
    encode_arguments,
    rewritten_arguments,
    rewritten_output,
    with_body_fields,
)

__all__ = ["ADAPTER", "opens_turn", "rebuild", "view", "continues"]


def _blocks(message: Any, role: str) -> list[Any] | None:
    if type(message) is not dict and not isinstance(message, Mapping):
        return None
    if message.get("role") != role:
        return None
    content = message.get("content")
    return content if type(content) is list else None


def _of_type(blocks: list[Any], wanted: str) -> tuple[list[Any], bool, bool]:
    """The well-formed blocks of type ``wanted``; whether any block, malformed
    ones included, has that type; whether every block is a mapping with a
    string ``type``. One pass: it runs over every message of every prepare."""
    found: list[Any] = []
    seen = False
    well_formed = True
    for block in blocks:
        if type(block) is dict or isinstance(block, Mapping):
            kind = block.get("type")
            if type(kind) is str:
                if kind == wanted:
                    found.append(block)
                continue
            seen = seen or kind == wanted
        well_formed = False
    return found, seen or bool(found), well_formed


def _uses(message: Any) -> list[Any] | None:
    """The ``tool_use`` blocks of an assistant turn; None without; [] if malformed."""
    blocks = _blocks(message, "assistant")
    if blocks is None:
        return None
    uses, seen, well_formed = _of_type(blocks, "tool_use")
    if not seen:
        return None
    if not well_formed:
        return []
    for use in uses:
        if type(use.get("id")) is not str:
            return []
        arguments = use.get("input")
        if type(arguments) is not dict and not isinstance(arguments, Mapping):
            return []
    return uses


def _results(message: Any) -> list[Any] | None:
    """The ``tool_result`` blocks of a user turn; None without; [] if malformed."""
    blocks = _blocks(message, "user")
    if blocks is None:
        return None
    results, seen, well_formed = _of_type(blocks, "tool_result")
    if not well_formed:
        return [] if seen else None
    if not results:
        return None
    if any(type(b.get("tool_use_id")) is not str for b in results):
        return []
    return results


def opens_turn(message: Any) -> bool:
    """Whether :func:`view` always starts a new group at ``message``: it is not a
    user turn with ``tool_result`` blocks, the only message a group takes after
    its first (see :mod:`scoutd.engine.view_tracker`)."""
    return _results(message) is None


def _output_text(block: Mapping[str, Any]) -> str:
    content = block.get("content", "")
    text = blocks_text(content)
    if text is None:
        text = encode_arguments(content)
    return text


def view(messages: Sequence[Any], mark: bool = True, kept: ConversationTexts | None = None) -> View:
    """The scout view of an Anthropic Messages conversation."""
    result = View(mark=mark)
    texts = Texts.after(kept)
    count = len(messages)
    i = 0
    while i < count:
        message = messages[i]
        uses = _uses(message)
        if uses is None:
            result.malformed += _results(message) is not None
            result.passthrough(message)
            i += 1
            continue
        answer = messages[i + 1] if i + 1 < count else None
        results = _results(answer)
        ids = [use["id"] for use in uses] if uses else []
        answered = [r["tool_use_id"] for r in results] if results else []
        if (
            answer is None
            or not uses
            or not results
            or len(set(ids)) != len(ids)
            or sorted(ids) != sorted(answered)
        ):
            pending = bool(uses) and answer is None
            result.malformed += 0 if pending else 1 + (results is not None)
            # its calls go, or stay, with their results (calls still waiting: after every result)
            result.passthrough(message, not pending)
            if results is not None:
                result.passthrough(answer)
            i += 1 + (results is not None)
            continue
        saved = len(result.messages), len(result.starts)
        try:
            _add_turns(result, message, answer, texts)
        except Malformed:
            result.rollback(*saved)
            result.malformed += 2
            result.passthrough(message, True)
            result.passthrough(answer)
        i += 2
    texts.keep(kept)
    result.bodies, result.parsed = texts.known_parsed, texts.parsed
    return result


# Blocks of a turn of calls the view shows otherwise (text, calls, results) or apart:
# thinking, sent back with its turn (:func:`_text_part`)
_THINKING = frozenset(("thinking", "redacted_thinking"))
_NOT_SHOWN = frozenset(("text", "tool_use", "tool_result", *_THINKING))
# What the view shows of a text block (its text), and its cache mark, which bills nothing
_TEXT_KEYS = frozenset(("type", "text", "cache_control"))


# What the view shows of a ``tool_use`` block (its call), and its cache mark
_USE_KEYS = frozenset(("type", "id", "name", "input", "cache_control"))
# The caller of a call the model made itself: the default, as if there were none
_DIRECT = {"type": "direct"}


def _sent_beside(use: Mapping[str, Any]) -> dict[str, Any]:
    """What a ``tool_use`` block sends beside its call: a ``caller`` (the code execution
    that made the call, with its tool id), any field a client adds. A direct caller,
    the default, is left out: the recorded runs carry it on 799 calls, and counting it
    changed their prompts (the estimate they were recorded with)."""
    return {
        key: value
        for key, value in use.items()
        if key not in _USE_KEYS and not (key == "caller" and value == _DIRECT)
    }


def _beside(text: str, blocks: list[Any]) -> Any:
    """The content of the view message that stands for a turn's text: the text, and,
    when the turn holds other blocks the provider bills (a server tool's use and
    result, an MCP result, an image or document beside the results) or a text block
    sends more than its text (``citations``), those blocks too (such a text block
    without its text), so that the estimate counts them (an image at its fixed
    cost, strategies/media.py) and frees them when the turn goes."""
    others = [b for b in blocks if b["type"] not in _NOT_SHOWN]
    for block in blocks:  # a text block's citations: sent, and billed, beside its text
        if block["type"] == "text" and block.keys() - _TEXT_KEYS:
            others.append({key: value for key, value in block.items() if key != "text"})
    if not others:
        return text
    return [{"type": "text", "text": text}, *others] if text else others


def _text_part(blocks: list[Any], mark: bool) -> dict[str, Any] | None:
    """The view message that stands for an assistant turn's text (:func:`_beside`), and,
    in a view that is counted (``mark``), for its thinking: the provider takes the
    thinking of the tool loop in progress back as input, and a model that preserves
    thinking every turn's. Which turns' it bills depends on the model and the request,
    which the view does not see, so it counts every turn's with its turn, under
    :data:`~scoutd.strategies.media.MEDIA_KEY` (its content stays a text, read as
    fast as any); it is freed when the turn goes. None when there is neither."""
    shown = _beside(_narration(blocks), blocks)
    thinking = [b for b in blocks if b["type"] in _THINKING] if mark else []
    if not thinking:
        return {"role": "assistant", "content": shown} if shown else None
    return {"role": "assistant", "content": shown, MEDIA_KEY: thinking}


def _narration(blocks: list[Any]) -> str:
    """An assistant turn's text blocks, joined: what the view shows of its text."""
    return "\n".join(
        b["text"] for b in blocks if b["type"] == "text" and type(b.get("text")) is str
    )


def _add_turns(result: View, message: Any, answer: Any, texts: Texts) -> None:
    """Add an assistant turn's narration and calls, and the results after it, to the view."""
    blocks = message["content"]
    said = _text_part(blocks, result.mark)
    # In a counted view, before the turn's last call: a remark belongs to the pair after
    # it (strategies/cost_aware.py), and the turn's text and thinking are sent while any
    # of its calls is, so they count with its last pair, the newest. Shown (``scout_view``),
    # the text comes first, as the model said it.
    last = -1  # the slot of the call the text part goes before
    if said is not None and result.mark:
        last = max(slot for slot, block in enumerate(blocks) if block["type"] == "tool_use")
    elif said is not None:
        result.add(said, TEXT_PART)
    for slot, block in enumerate(blocks):
        if block["type"] == "tool_use":
            if slot == last and said is not None:
                result.add(said, TEXT_PART)
            arguments = block["input"]
            if type(arguments) is not dict:
                arguments = dict(arguments)
            text = texts.encoded_call(block.get("name"), block["id"], arguments)
            if block.keys() - _USE_KEYS:  # a ``caller``, any field a client adds: sent
                extra = _sent_beside(block)
                if extra:
                    text = with_body_fields(text, extra)
            result.add({"role": "function_call", "content": text}, slot)
    result.close()
    others = []
    for slot, block in enumerate(answer["content"]):
        if block["type"] == "tool_result":
            text = texts.output(block["tool_use_id"], _output_text(block))
            output: dict[str, Any] = {"role": "function_call_output", "content": text}
            media = media_blocks(block.get("content")) if result.mark else []
            if media:  # shown as placeholders: counted by what they hold while whole
                output[MEDIA_KEY] = media
            result.add(output, slot)
        elif type(block.get("text")) is str:
            others.append(block["text"])
    shown = _beside("\n".join(others), answer["content"])
    if shown:
        result.add({"role": "user", "content": shown}, TEXT_PART)
    result.close()


def _as_blocks(content: Any) -> list[Any]:
    if type(content) is list:
        return list(content)
    if type(content) is str:
        return [{"type": "text", "text": content}] if content else []
    return []


def new_message(message: Any) -> dict[str, Any]:
    """A message a strategy added (a notice), as an Anthropic user turn."""
    content = message.get("content") if isinstance(message, Mapping) else None
    if type(content) is not list:
        text = content if type(content) is str and content.strip() else "(notice)"
        content = [{"type": "text", "text": text}]
    role = message.get("role") if isinstance(message, Mapping) else None
    return {"role": role if role in ("user", "assistant") else "user", "content": content}


def _rewritten_use(block: Mapping[str, Any], fate: Any) -> Any:
    arguments = rewritten_arguments(fate)
    if type(arguments) is not dict:
        return block
    changed = dict(block)
    changed["input"] = arguments
    return changed


def _rewritten_result(block: Mapping[str, Any], fate: Any) -> Any:
    text = rewritten_output(fate)
    if not text:
        return block
    changed = dict(block)
    changed["content"] = (
        text if type(block.get("content")) is str else [{"type": "text", "text": text}]
    )
    return changed


class _Joined:
    """Turns of one role joined into one, built once at the end: ``tool_result``
    blocks first, then the rest, each in its order.

    Joining a turn copies only that turn's blocks, so a run of ``k`` turns
    costs their blocks once (joining each into a finished copy of the run so
    far took quadratic time: docs/RELIABILITY.md, CPU and memory).
    """

    __slots__ = ("first", "rest", "results")

    def __init__(self, first: Mapping[str, Any]) -> None:
        self.first = first
        self.results: list[Any] = []
        self.rest: list[Any] = []
        self.add(first)

    def add(self, turn: Mapping[str, Any]) -> None:
        """Join ``turn``'s blocks (its content as a list)."""
        for block in _as_blocks(turn.get("content")):
            if isinstance(block, Mapping) and block.get("type") == "tool_result":
                self.results.append(block)
            else:
                self.rest.append(block)

    def get(self, key: str) -> Any:
        """A key of the joined turn: the first turn's (its role)."""
        return self.first.get(key)

    def message(self) -> dict[str, Any]:
        """The joined turn: the first turn's keys, every block of the run."""
        merged = dict(self.first)
        merged["content"] = self.results + self.rest
        return merged


def _waiting(message: Any) -> bool:
    """Whether ``message`` is an assistant turn with ``tool_use`` blocks (the last one
    of a prompt: its calls wait for results the client sends next, in the user turn
    right after it, so nothing may come between)."""
    return (
        isinstance(message, Mapping)
        and message.get("role") == "assistant"
        and any(
            isinstance(b, Mapping) and b.get("type") == "tool_use"
            for b in _as_blocks(message.get("content"))
        )
    )


def rebuild(messages: Sequence[Any], shape: View, result: Outcome) -> Rebuilt:
    """Anthropic messages from the strategies' result over ``shape``."""
    out: list[Any] = []
    origins: list[int] = []
    narration = 0
    fates, refs, starts, before = result.fates, shape.refs, shape.starts, result.before

    def emit(message: Any, origin: int) -> None:
        last = out[-1] if out else None
        if isinstance(message, Mapping) and (type(last) is _Joined or isinstance(last, Mapping)):
            last_origin = origins[-1]
            joined = origin < 0 or last_origin < 0 or origin != last_origin + 1
            if joined and last.get("role") == message.get("role"):
                if type(last) is not _Joined:
                    last = out[-1] = _Joined(out[-1])
                last.add(message)
                origins[-1] = -1
                return
        out.append(message)
        origins.append(origin)

    for position, message in enumerate(messages):
        if before and position in before:
            for added in before[position]:
                emit(new_message(added), -1)
        start, end = starts[position], starts[position + 1]
        if end - start == 1 and refs[start] >= 0:  # the common turn: one call or one result
            fate = fates[start]
            if fate is KEPT:
                emit(message, position)
                continue
            if fate is None and len(message["content"]) == 1:
                continue  # its one block dropped: nothing of the turn is left
        if refs[start] == PASSTHROUGH:
            fate = fates[start]
            if fate is not None:
                emit(message if fate is KEPT else fate, position if fate is KEPT else -1)
            continue
        slots = [v for v in range(start, end) if refs[v] >= 0]
        if all(fates[v] is KEPT for v in slots):
            emit(message, position)
            continue
        blocks = list(message["content"])
        is_assistant = message.get("role") == "assistant"
        for v in slots:
            fate, slot = fates[v], refs[v]
            if fate is None:
                blocks[slot] = None
            elif fate is not KEPT:
                rewrite = _rewritten_use if is_assistant else _rewritten_result
                blocks[slot] = rewrite(blocks[slot], fate)
        if is_assistant and all(fates[v] is None for v in slots):
            # its text went with it (the view's text part may stand for other blocks only)
            narration += TEXT_PART in refs[start:end] and bool(_narration(message["content"]))
            continue
        kept = [b for b in blocks if b is not None]
        if not kept or all(
            b.get("type") == "text" and not str(b.get("text", "")).strip() for b in kept
        ):
            continue
        changed = dict(message)
        changed["content"] = kept
        emit(changed, position)
    pending = None  # a turn of calls still waiting, last: notices go before it, not after
    if result.after and out and _waiting(out[-1]):
        pending = out.pop(), origins.pop()
    for added in result.after:
        emit(new_message(added), -1)
    if pending is not None:
        emit(*pending)
    return Rebuilt([m.message() if type(m) is _Joined else m for m in out], narration)


def continues(messages: Sequence[Any], start: int, prompt: Sequence[Any]) -> bool:
    """Whether ``messages[start]`` comes back as itself after ``prompt``: only when the
    prompt ends with the very message before it, merged with nothing."""
    return bool(prompt) and prompt[-1] is messages[start - 1]


# Notices join the last user turn; the stable prefix carries the cache breakpoint
ADAPTER = Adapter(
    ANTHROPIC, view, rebuild, opens_turn, continues, notices_join_turn=True, cache_hint=True
)
