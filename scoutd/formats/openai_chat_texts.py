"""The texts of the OpenAI Chat view kept from one view to the next (docs/PERFORMANCE.md).

Split from :mod:`scoutd.formats.openai_chat`: the texts of the previous view,
reused for the very same strings, and the bodies of the texts handed over to
the strategies so that they do not decode what the view just encoded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..strategies.tool_messages import ToolBody
from .view import call_text, output_text

__all__ = ["Known", "Texts", "forget", "group_bodies"]

# (output, id, name, arguments, call text, output text, then (text, body) of the call
# (None: not handed over) and of the output) of one-call groups, by id(output)
Known = tuple[str, str, str, str, str, str, tuple[str, ToolBody] | None, tuple[str, ToolBody]]
_SHALLOW = 64  # at most this many brackets in arguments whose decoded body is handed over


def group_bodies(
    call: str,
    reply: str,
    name: str,
    ident: str,
    arguments: dict[str, Any],
    text: str,
    encoded: bytes,
    ident_json: bytes,
) -> tuple[tuple[str, ToolBody] | None, tuple[str, ToolBody]]:
    """The bodies the strategies would parse from a one-call group's texts, made from its values.

    ``arguments`` is the object decoded from the arguments ``text``; ``encoded``
    is the output text as bytes, whose ``content`` value is read in place. Very
    nested arguments are left to the parser: nested one level deeper in the
    call text, they could be too deep for it.
    """
    calling = None
    if text.count("{") + text.count("[") <= _SHALLOW:
        calling = (call, ToolBody(name=name, id=ident, arguments=arguments))
    value = memoryview(encoded)[len(ident_json) + 17 : -1]  # {"id":ID,"content":VALUE}
    return calling, (reply, ToolBody(id=ident, content=msgspec.Raw(value)))


def _handed_over(texts: Texts) -> _Bodies:
    """The bodies of the one-call texts of the view just made (see :func:`group_bodies`).

    When the view reused every group of the previous one (an agent resends its
    conversation and appends to it), the previous view's bodies are all still
    right: that dict grows by the new groups only. Otherwise it is made afresh.
    """
    if len(texts.made) - len(texts.fresh) == len(texts.known):
        bodies, new = texts.known_bodies, texts.fresh  # every kept entry was reused
    else:
        bodies, new = {}, list(texts.made.values())
    for known in new:
        _give(bodies, known)
    return bodies


def _give(bodies: _Bodies, known: Known) -> None:
    """Hand over the bodies of a one-call group's texts (see :func:`group_bodies`)."""
    calling, answering = known[6], known[7]
    if calling is not None:
        bodies[id(calling[0])] = calling
    bodies[id(answering[0])] = answering


# (arguments, id, name, call text) by id(arguments) and (output, id, output text) by
# id(output), of the calls and outputs of parallel calls
KnownCall = tuple[str, str, str, str]
KnownOutput = tuple[str, str, str]
_Bodies = dict[int, tuple[str, ToolBody]]
_Kept = tuple[dict[int, Known], dict[int, KnownCall], dict[int, KnownOutput], _Bodies]


@dataclass(slots=True)
class Texts:
    """The view texts of the previous view, and those of the view being made.

    An agent sends the same message objects every turn: a call or output whose
    strings (output, id, function name, arguments) are the very same objects
    as in the previous view gets the same texts, which are not encoded again
    (docs/PERFORMANCE.md). Strings cannot change, so identity is proof; the
    entries hold their strings, so an ``id`` is not reused while it is a key.
    Only the last view's texts are kept: a bound of one conversation.
    """

    known: dict[int, Known]
    known_calls: dict[int, KnownCall]
    known_outputs: dict[int, KnownOutput]
    known_bodies: _Bodies  # what the previous view handed over
    made: dict[int, Known] = field(default_factory=dict)
    fresh: list[Known] = field(default_factory=list)  # the one-call entries made, not reused
    made_calls: dict[int, KnownCall] = field(default_factory=dict)
    made_outputs: dict[int, KnownOutput] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # the JSON text of each name seen

    @classmethod
    def last(cls) -> Texts:
        """A new view's texts, knowing those of the previous view."""
        return cls(*_last_texts)

    def remember(self) -> _Bodies:
        """Keep this view's texts for the next view; return the bodies handed over."""
        bodies = _handed_over(self)
        _remember((self.made, self.made_calls, self.made_outputs, bodies))
        return bodies

    def call(self, name: Any, ident: str, arguments: str) -> str:
        """:func:`call_text`, or the previous view's text for the very same strings."""
        key = id(arguments)
        known = self.known_calls.get(key)
        if known is not None and known[1] is ident and known[2] is name:
            self.made_calls[key] = known
            return known[3]
        text = call_text(name, ident, arguments)
        if type(name) is str:
            self.made_calls[key] = (arguments, ident, name, text)
        return text

    def output(self, ident: str, output: str) -> str:
        """:func:`output_text`, or the previous view's text for the very same strings."""
        key = id(output)
        known = self.known_outputs.get(key)
        if known is not None and known[1] is ident:
            self.made_outputs[key] = known
            return known[2]
        text = output_text(ident, output)
        self.made_outputs[key] = (output, ident, text)
        return text


_last_texts: _Kept = ({}, {}, {}, {})


def _remember(made: _Kept) -> None:
    """Keep ``made`` for the next view (replaced whole: safe across threads)."""
    global _last_texts
    _last_texts = made


def forget() -> None:
    """Drop the texts kept from the previous view (the next view encodes everything)."""
    _remember(({}, {}, {}, {}))
