"""The fields of an OpenAI Chat message besides its content, for the estimate.

The estimate counts a view message by its ``content``. A Chat message sends more:
an assistant's ``refusal``, ``audio`` and ``name``, a legacy ``function_call``, the
calls of a message passed through, any field a client adds. The view shows them
as content parts (:func:`said`, :func:`pass_through`), so that they are counted
and a prompt holding them stays inside its window.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .view import ORIGIN_KEY, SCOUT_TOOL_ROLES, View, blocks_text

__all__ = ["pass_through", "said", "unshown", "with_fields"]

# The fields of a message the view shows otherwise or does not count: its role and
# content, the calls and call id of a group it reads, LiteLLM's own fields, the key
# an integration marks its messages with (never sent). The reasoning a model gave
# (``reasoning_content``) is counted: a provider may take it back (docs/FORMATS.md).
_SHOWN = frozenset(
    ("role", "content", "tool_calls", "tool_call_id", "provider_specific_fields", ORIGIN_KEY)
)
_OWN_CALLS = frozenset(("tool_calls", "tool_call_id"))
_PLAIN = frozenset(("role", "content"))
_PLAIN_ANSWER = frozenset(("role", "content", "tool_call_id"))  # a tool message's own


def unshown(message: Mapping[str, Any], passed: bool = False) -> dict[Any, Any]:
    """The fields ``message`` sends beside its content that its view message would not
    show (``refusal``, ``audio``, ``name``, a legacy ``function_call``, any other); with
    ``passed`` (it goes into the view as it is) its calls and call id too.

    The estimate counts a view message by its ``content``: a 100 KB refusal, or the
    arguments of calls passed through, counted for nothing and the prompt passed its
    window uncompacted.
    """
    if message.keys() <= _PLAIN:  # the common message: nothing beside its content
        return {}
    if not passed and message.keys() <= _PLAIN_ANSWER:  # the common answer of a group
        return {}
    return {
        key: value
        for key, value in message.items()
        if value is not None and (key not in _SHOWN or (passed and key in _OWN_CALLS))
    }


def with_fields(content: Any, fields: dict[Any, Any]) -> Any:
    """``content`` as content parts with ``fields`` as one more part (the
    estimate counts a part by its JSON text, a medium by what it holds).

    An assistant's ``audio`` (sent back by its id) is billed as the audio it
    names, not as its id's few characters: it adds an audio part, which the
    media rules count as one page when its data is not there to read.
    """
    if type(content) is list:
        parts = list(content)
    elif type(content) is str:
        parts = [{"type": "text", "text": content}]
    else:
        parts = [] if content is None else [content]
    if not fields:
        return parts
    audio = fields.get("audio")
    medium = [{"type": "audio", "audio": audio}] if isinstance(audio, Mapping) else []
    return [*parts, fields, *medium]


def said(message: Mapping[str, Any]) -> Any:
    """What the view shows of an assistant message beside its calls: its text, or, when it
    sends more (a refusal, audio, a part that is no text), content parts holding that."""
    content = message.get("content")
    text = (content if type(content) is str else blocks_text(content)) if content else None
    extra = unshown(message)
    if not extra and (text is not None or not content):
        return text
    return with_fields(content if text is None else text, extra)


def pass_through(result: View, message: Any, calls: bool = False) -> None:
    """Put ``message`` in the view as it is (:meth:`View.passthrough`), or as a stand-in
    of its role (``passthrough`` with ``calls``) whose content holds what it sends
    beside its content (:func:`unshown`), so that the estimate counts it."""
    if isinstance(message, Mapping) and message.get("role") not in SCOUT_TOOL_ROLES:
        extra = unshown(message, True)
        if extra:
            role = "passthrough" if calls else message.get("role")
            result.passthrough(
                {"role": role, "content": with_fields(message.get("content"), extra)}
            )
            return
    result.passthrough(message, calls)
