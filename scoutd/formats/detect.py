"""Which provider format a message list is in, from the messages themselves.

Each message may carry a *signal* of one format: OpenAI Chat tool traffic
(``tool_calls``, role ``tool``), OpenAI Responses items (``type`` of
``function_call``, ``function_call_output``, ``message``, ``reasoning``),
Anthropic content blocks (``tool_use``, ``tool_result``) or the scout tool roles
(``function_call``, ``function_call_output``). Messages without a signal fit
every format. See docs/FORMATS.md.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from collections.abc import Set as AbstractSet
from operator import itemgetter
from typing import Any

from ..errors import FormatError  # re-exported: it was defined here
from ..protocol.format_names import (  # with the wire types, for the client (re-exported)
    ANTHROPIC,
    AUTO,
    FORMATS,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    SCOUT,
    check_format_name,
)

__all__ = [
    "first_signal",
    "ANTHROPIC",
    "AUTO",
    "FORMATS",
    "OPENAI_CHAT",
    "OPENAI_RESPONSES",
    "SCOUT",
    "FormatError",
    "check_format_name",
    "detect_format",
    "format_of",
    "signals",
]

_RESPONSES_TYPES = frozenset(
    ("function_call", "function_call_output", "reasoning", "item_reference")
)
# A ``message`` item is a Responses signal only with Responses content: an Anthropic
# response object dumped whole is typed ``message`` too, with blocks of its own.
_RESPONSES_PARTS = frozenset(
    ("input_text", "input_image", "input_file", "output_text", "refusal", "summary_text")
)
_ANTHROPIC_BLOCKS = frozenset(("tool_use", "tool_result"))
_SCOUT_ROLES = frozenset(("function_call", "function_call_output"))


_RESPONSES_SIGNALS = {t: (OPENAI_RESPONSES, f"an item of type {t!r}") for t in _RESPONSES_TYPES}
_SCOUT_SIGNALS = {r: (SCOUT, f"role {r!r}") for r in _SCOUT_ROLES}
_BLOCK_SIGNALS = {b: (ANTHROPIC, f"a {b!r} block") for b in _ANTHROPIC_BLOCKS}
_TOOL_ROLE = (OPENAI_CHAT, "role 'tool'")
_RESPONSES_MESSAGE = (OPENAI_RESPONSES, "an item of type 'message'")
_TOOL_CALLS = (OPENAI_CHAT, "'tool_calls'")


def _responses_content(content: Any) -> bool:
    if type(content) is str:
        return True
    if type(content) is not list:
        return False
    for part in content:
        if isinstance(part, Mapping):
            kind = part.get("type")
            if type(kind) is str and kind in _RESPONSES_PARTS:
                return True
    return False


def _signal(message: Any) -> tuple[str, str] | None:
    """The format ``message`` belongs to and why, or None when it fits any."""
    # the type tests before isinstance (not mutated, here and below) only spare a
    # dict the slower check: without them the answer is the same
    if type(message) is not dict and not isinstance(message, Mapping):  # pragma: no mutate
        return None
    kind = message.get("type")
    if kind is not None and type(kind) is str and kind in _RESPONSES_SIGNALS:
        return _RESPONSES_SIGNALS[kind]
    if kind == "message" and _responses_content(message.get("content")):
        return _RESPONSES_MESSAGE
    role = message.get("role")
    if role == "tool":
        return _TOOL_ROLE
    if type(message.get("tool_calls")) is list:
        return _TOOL_CALLS
    if type(role) is str and role in _SCOUT_SIGNALS:
        return _SCOUT_SIGNALS[role]
    content = message.get("content")
    if type(content) is list:
        for block in content:
            if type(block) is dict or isinstance(block, Mapping):  # pragma: no mutate
                block_type = block.get("type")
                if type(block_type) is str and block_type in _BLOCK_SIGNALS:
                    return _BLOCK_SIGNALS[block_type]
    return None


_get_content = itemgetter("content")
_get_role = itemgetter("role")
# What a caller has read of a list of plain dicts: the set of its keys, and the
# roles (all strings) and the set of the contents' types, or None for those.
Known = tuple[AbstractSet[str], Sequence[str] | None, Collection[type] | None]


def _role_signals(
    messages: Sequence[Any], known: Known | None = None
) -> dict[str, tuple[int, str]] | None:
    """:func:`signals` for the common list whose signals can only come from roles, else None.

    That is a list of plain dicts none of which has a ``type`` or ``tool_calls``
    key or a list content, whose roles are strings or missing: a message's
    signal is then role ``tool`` or a scout tool role, and the first of each is
    found by ``list.index`` instead of a call of :func:`_signal` per message
    (detection runs on every prepare; docs/PERFORMANCE.md). ``known``: for a
    list of plain dicts, what the caller has read of it already: the set of
    the messages' keys, and maybe the roles (all strings) and the set of the
    contents' types.
    """
    if not messages:
        return None
    if known is None:
        if set(map(type, messages)) != {dict}:
            return None
        keys: AbstractSet[str] = set().union(*messages)
    else:
        keys, known_roles, content_types = known
    if "type" in keys or "tool_calls" in keys:
        return None
    if known is not None and known_roles is not None and content_types is not None:
        roles: Sequence[Any] = known_roles
        if list in content_types:
            return None
    else:
        try:
            if list in set(map(type, map(_get_content, messages))):
                return None
            roles = list(map(_get_role, messages))
        except KeyError:
            return None  # a message without a role or a content
        if not set(map(type, roles)) <= {str, type(None)}:
            return None
    shown: list[tuple[int, tuple[str, str]]] = []
    for role, signal in (("tool", _TOOL_ROLE), *_SCOUT_SIGNALS.items()):
        if role in roles:
            shown.append((roles.index(role), signal))
    found: dict[str, tuple[int, str]] = {}
    for position, (name, why) in sorted(shown):
        found.setdefault(name, (position, why))
    return found


def signals(messages: Sequence[Any], known: Known | None = None) -> dict[str, tuple[int, str]]:
    """The first message (index, reason) showing each format present in ``messages``.

    ``known``: see :func:`_role_signals`.
    """
    found = _role_signals(messages, known)
    if found is not None:
        return found
    found = {}
    for position, message in enumerate(messages):
        signal = _signal(message)
        if signal is not None and signal[0] not in found:
            found[signal[0]] = (position, signal[1])
    return found


def first_signal(messages: Sequence[Any]) -> int:
    """The index of the first message that shows a format (``len(messages)``: none does).

    The same as the smallest position :func:`signals` gives, without walking
    past it: a prompt's tool traffic usually starts within its first messages.
    """
    for position, message in enumerate(messages):
        if _signal(message) is not None:
            return position
    return len(messages)


def detect_format(messages: Sequence[Any], known: Known | None = None) -> str:
    """The format of ``messages``: one of :data:`FORMATS` (``scout`` without tool traffic).

    ``known``: what the caller has read of a list of plain dicts already
    (:func:`_role_signals`).

    Raises:
        FormatError: the list mixes formats; the message names the first
            message of each format found.
    """
    return format_of(signals(messages, known))


def format_of(found: dict[str, tuple[int, str]]) -> str:
    """The format shown by :func:`signals`; FormatError when it shows several."""
    if len(found) > 1:
        (first, (i, why)), (second, (j, why_2)) = sorted(found.items(), key=lambda f: f[1][0])[:2]
        raise FormatError(
            f"messages mix formats: message {i} is {first} ({why}) but message {j} is"
            f" {second} ({why_2})"
        )
    return next(iter(found), SCOUT)
