"""An SDK's own objects in a conversation, read as the SDK sends them.

The providers' Python SDKs document agent loops that put their response
objects straight back into the conversation: OpenAI's
``messages.append(completion.choices[0].message)``, the Responses API's
``input += response.output``, Anthropic's
``{"role": "assistant", "content": response.content}``. Those objects are
pydantic models, and the SDK turns them into JSON as it sends a request:
``model_dump(mode="json", exclude_unset=True, by_alias=True)``, without the
fields the model declares its own (``__api_exclude__``). scoutd reads them as
that JSON, the library and the client alike (docs/FORMATS.md, "Objects of a
provider's SDK"): a conversation holding them is compacted as its dicts would
be, and the prompt comes back as plain JSON values, which the SDK sends as
they are.

Only pydantic models are taken, and only where the SDKs put them: a message,
a value of a message, an item of a list value of a message (content blocks,
tool calls). A model found there is converted whole; so is any model inside
the same message. A message without one there is not walked at all: it stays
as it is however deep it nests. Nothing is looked for while pydantic is not
loaded (no model can exist then), so a process without it pays nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain, compress, repeat
from operator import is_
from typing import Any

from ..errors import InvalidMessages

__all__ = ["model_class", "sent_form", "sent_forms"]

# The types of JSON values as Python holds them: never a model.
_JSON = frozenset((dict, list, str, int, float, bool, type(None)))
_DICT = frozenset((dict,))


def model_class() -> type | None:
    """pydantic's ``BaseModel`` if pydantic is loaded, else None (no model exists)."""
    pydantic = sys.modules.get("pydantic")
    found = getattr(pydantic, "BaseModel", None)
    return found if isinstance(found, type) else None


def sent_form(model: Any) -> Any:
    """The JSON value an SDK sends for ``model``, a pydantic model it made.

    Raises:
        TypeError: the model cannot be dumped (its own ``model_dump`` failed).
    """
    try:
        return model.model_dump(
            mode="json",
            exclude_unset=True,
            by_alias=True,
            exclude=getattr(model, "__api_exclude__", None),
        )
    except Exception as exc:
        raise TypeError(f"cannot read a {type(model).__name__} as JSON: {exc}") from exc


def _has_model(types: set[type], model: type) -> bool:
    return not types <= _JSON and any(issubclass(kind, model) for kind in types - _JSON)


def _may_hold(messages: Sequence[Any], model: type) -> bool:
    """Whether a model lies where the SDKs put them (see the module's docstring).

    Three looks by type, in C for a list of dicts (docs/PERFORMANCE.md): the
    messages, their values, the items of their list values (a second walk, only
    when there are such lists).
    """
    types = set(map(type, messages))
    if _has_model(types, model):
        return True

    def values() -> Iterable[Any]:
        if types <= _DICT:
            return chain.from_iterable(map(dict.values, messages))
        return chain.from_iterable(m.values() for m in messages if isinstance(m, Mapping))

    kinds = set(map(type, values()))
    if _has_model(kinds, model):
        return True
    if list not in kinds:
        return False
    every = list(values())
    lists = compress(every, map(is_, map(type, every), repeat(list)))
    return _has_model(set(map(type, chain.from_iterable(lists))), model)


def _holds(message: Any, model: type) -> bool:
    """Whether ``message`` holds a model where the SDKs put them (the module's docstring)."""
    if isinstance(message, model):
        return True
    if not isinstance(message, Mapping):
        return False
    for value in message.values():
        if isinstance(value, model):
            return True
        if type(value) is list and any(isinstance(item, model) for item in value):
            return True
    return False


def _converted(value: Any, model: type) -> Any:
    """``value`` with every model in it replaced by its sent form; the same object
    when it holds none (nothing is copied that does not change)."""
    if isinstance(value, model):
        return sent_form(value)
    if isinstance(value, Mapping):
        changed = {key: _converted(item, model) for key, item in value.items()}
        if any(changed[key] is not item for key, item in value.items()):
            return changed
        return value
    if type(value) is list or type(value) is tuple:
        items = [_converted(item, model) for item in value]
        if any(new is not old for new, old in zip(items, value, strict=True)):
            return items
        return value
    return value


def sent_forms(messages: Sequence[Any], start: int = 0) -> list[Any] | None:
    """``messages`` with the SDK objects in them in their sent form, or None when they
    hold none where the SDKs put them (then the caller goes on with ``messages``).

    Messages without a model there stay the same objects, unwalked; the input is
    never modified. ``start``: the position of the first of ``messages`` in the
    conversation (a session converts only what is new), so that an error names
    the message where the conversation has it.

    Raises:
        InvalidMessages: a model's own ``model_dump`` failed (its position and why).
    """
    model = model_class()
    if model is None or isinstance(messages, (str, bytes, bytearray, Mapping)):
        return None  # a model cannot exist; no list of messages: the caller refuses it
    if not isinstance(messages, Sequence) or not _may_hold(messages, model):
        return None
    result: list[Any] = []
    for position, message in enumerate(messages, start):
        if not _holds(message, model):
            result.append(message)
            continue
        try:
            result.append(_converted(message, model))
        except TypeError as exc:
            raise InvalidMessages(position, str(exc)) from exc
    return result
