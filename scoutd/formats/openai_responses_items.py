"""The Responses tool items that pair by ``call_id``, kind by kind (docs/FORMATS.md).

Each call kind is answered by output items of given kinds
(openai.types.responses.response_input_item_param): a ``function_call`` by a
``function_call_output``, a ``custom_tool_call`` by a
``custom_tool_call_output``, a ``shell_call`` by a ``shell_call_output``, an
``apply_patch_call`` by an ``apply_patch_call_output``, a ``computer_call`` by a
``computer_call_output``, and a ``local_shell_call`` by a
``local_shell_call_output`` or, as Codex CLI answers it, a
``function_call_output``. What each shows the strategies and how a shortened one
is written back keeps the item's shape: only a text the API takes as free text
is ever shortened (an output's text, an apply_patch call's ``diff``); a
screenshot is never changed, so a computer pair is kept whole or dropped whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .view import blocks_text, encode_arguments, rewritten_arguments, rewritten_output

__all__ = [
    "CALL_KINDS",
    "OUTPUT_KINDS",
    "answers",
    "call_arguments",
    "call_name",
    "output_id",
    "output_text",
    "rewritten_call",
    "rewritten_output_item",
]

FUNCTION, FUNCTION_OUTPUT = "function_call", "function_call_output"
CUSTOM, CUSTOM_OUTPUT = "custom_tool_call", "custom_tool_call_output"
LOCAL_SHELL, LOCAL_SHELL_OUTPUT = "local_shell_call", "local_shell_call_output"
SHELL, SHELL_OUTPUT = "shell_call", "shell_call_output"
PATCH, PATCH_OUTPUT = "apply_patch_call", "apply_patch_call_output"
COMPUTER, COMPUTER_OUTPUT = "computer_call", "computer_call_output"

# call kind -> the output kinds that answer it
_ANSWERED_BY: dict[str, tuple[str, ...]] = {
    FUNCTION: (FUNCTION_OUTPUT,),
    CUSTOM: (CUSTOM_OUTPUT,),
    LOCAL_SHELL: (LOCAL_SHELL_OUTPUT, FUNCTION_OUTPUT),
    SHELL: (SHELL_OUTPUT,),
    PATCH: (PATCH_OUTPUT,),
    COMPUTER: (COMPUTER_OUTPUT,),
}
CALL_KINDS = frozenset(_ANSWERED_BY)
OUTPUT_KINDS = frozenset(kind for kinds in _ANSWERED_BY.values() for kind in kinds)
# The tool name a call of each built-in kind shows the strategies: the names their
# classification of calls knows (a shell command, an edit of a path)
_NAMES = {LOCAL_SHELL: "shell", SHELL: "shell", PATCH: "apply_patch", COMPUTER: "computer"}
IMAGE_TEXT = "[image]"  # a screenshot's text: what a recall of it gives


def answers(call_kind: Any, output_kind: Any) -> bool:
    """Whether an output item of ``output_kind`` answers a call of ``call_kind``."""
    return type(call_kind) is str and output_kind in _ANSWERED_BY.get(call_kind, ())


def output_id(item: Mapping[str, Any]) -> Any:
    """The id that pairs an output item with its call.

    A ``local_shell_call_output`` is typed with ``id`` alone, documented as the
    call's ``call_id``; agents send ``call_id`` (with ``id`` the output's own id):
    ``call_id`` when it has one, else ``id``.
    """
    ident = item.get("call_id")
    if ident is None and item.get("type") == LOCAL_SHELL_OUTPUT:
        return item.get("id")
    return ident


def call_name(item: Mapping[str, Any]) -> Any:
    """The tool name a call shows the strategies: its own, or its kind's."""
    kind = item.get("type")
    return _NAMES[kind] if type(kind) is str and kind in _NAMES else item.get("name")


def call_arguments(item: Mapping[str, Any]) -> Any:
    """What a call shows the strategies as its arguments: a function call's arguments
    text, an object otherwise; None when the call breaks its kind's shape."""
    kind = item.get("type")
    if kind == FUNCTION:
        arguments = item.get("arguments")
        return arguments if type(arguments) is str else None
    if kind == CUSTOM:
        given = item.get("input")
        return {"input": given} if type(given) is str else None
    if kind == COMPUTER:  # one action or, in later versions, a list of them
        return {key: item[key] for key in ("action", "actions") if key in item}
    payload = item.get("operation" if kind == PATCH else "action")
    return dict(payload) if isinstance(payload, Mapping) else None


def _shell_text(output: Any) -> str | None:
    """A shell call's captured output: each chunk's stdout, then its stderr, on lines of
    their own (the empty ones left out); None unless a list of such chunks."""
    if type(output) is not list:
        return None
    parts = []
    for chunk in output:
        if not isinstance(chunk, Mapping):
            return None
        stdout, stderr = chunk.get("stdout"), chunk.get("stderr")
        if type(stdout) is not str or type(stderr) is not str:
            return None
        parts += [text for text in (stdout, stderr) if text]
    return "\n".join(parts)


def output_text(item: Mapping[str, Any]) -> str | None:
    """The text an output item shows the strategies (and a recall gives back); None
    when the item breaks its kind's shape."""
    kind = item.get("type")
    output = item.get("output")
    if kind == SHELL_OUTPUT:
        return _shell_text(output)
    if kind == COMPUTER_OUTPUT:
        return IMAGE_TEXT if isinstance(output, Mapping) else None
    if kind == PATCH_OUTPUT:  # its log text is optional: none reads as an empty one
        return "" if output is None else output if type(output) is str else None
    if kind == LOCAL_SHELL_OUTPUT:
        return output if type(output) is str else None
    return blocks_text(output)


def rewritten_call(item: Mapping[str, Any], fate: Any) -> Any:
    """A call with the strategies' shortened arguments, or ``item`` itself when they
    cannot be written back in its shape (an action is never changed)."""
    kind = item.get("type")
    arguments = rewritten_arguments(fate)
    if type(arguments) is not dict:
        return item
    changed = dict(item)
    if kind == FUNCTION:
        changed["arguments"] = encode_arguments(arguments)
    elif kind == CUSTOM:
        text = arguments.get("input")
        if type(text) is not str:
            return item
        changed["input"] = text
    elif kind == PATCH:  # the diff alone: a path or a type must stay what it was
        operation = item.get("operation")
        diff = arguments.get("diff")
        if not isinstance(operation, Mapping) or type(diff) is not str:
            return item
        if {k: v for k, v in arguments.items() if k != "diff"} != {
            k: v for k, v in operation.items() if k != "diff"
        }:
            return item
        changed["operation"] = {**operation, "diff": diff}
    else:
        return item
    return changed


def rewritten_output_item(item: Mapping[str, Any], fate: Any) -> Any:
    """An output with the strategies' shortened text written back in its shape, or
    ``item`` itself (a screenshot; an unreadable rewrite)."""
    kind = item.get("type")
    text = rewritten_output(fate)
    if text is None or kind == COMPUTER_OUTPUT:
        return item
    output = item.get("output")
    changed = dict(item)
    if kind == SHELL_OUTPUT:  # one chunk, the last one's outcome kept
        last = output[-1] if type(output) is list and output else {}
        changed["output"] = [{**last, "stdout": text, "stderr": ""}]
    elif type(output) is str or kind not in (FUNCTION_OUTPUT, CUSTOM_OUTPUT):
        changed["output"] = text
    else:
        changed["output"] = [{"type": "input_text", "text": text}]
    return changed
