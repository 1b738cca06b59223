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

__all__ = ["Known", "Texts", "forget"]

# (output, id, name, arguments, call text, output text, bodies) of one-call groups, by
# id(output); bodies: the (text, body) of the call and of the output (None: not handed over)
_Pair = tuple[str, ToolBody]
Known = tuple[str, str, str, str, str, str, tuple[_Pair | None, _Pair | None]]
_SHALLOW = 64  # at most this many brackets in arguments whose decoded object is handed over
_parse_body = msgspec.json.Decoder(ToolBody).decode
# What parsing a text can raise (as for the strategies' own parsing)
_PARSE_ERRORS = (
    msgspec.DecodeError,
    msgspec.ValidationError,
    TypeError,
    UnicodeError,
    RecursionError,
)


def _parsed(text: str) -> _Pair | None:
    """``text`` with the body the strategies parse from it; None if they cannot."""
    try:
        return text, _parse_body(text)
    except _PARSE_ERRORS:
        return None


def _handed_over(texts: Texts) -> _Bodies:
    """The bodies of the one-call texts of the view just made, by id of the text.

    When the view reused every group of the previous one (an agent resends its
    conversation and appends to it), the previous view's bodies are all still
    right: that dict grows by the new groups only. Otherwise it is made afresh.
    """
    if len(texts.made) - len(texts.fresh) == len(texts.known):
        bodies, fresh = texts.known_bodies, texts.fresh  # every kept entry was reused
    else:
        bodies, fresh = {}, list(texts.made.values())
    for known in fresh:
        for pair in known[6]:
            if pair is not None:
                bodies[id(pair[0])] = pair
    return bodies


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
    fresh: list[Known] = field(default_factory=list)  # one-call entries made, not reused
    made_calls: dict[int, KnownCall] = field(default_factory=dict)
    made_outputs: dict[int, KnownOutput] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # the JSON text of each name seen

    def add(self, key: int, texts: tuple[str, str, str, str, str, str], decoded: Any) -> None:
        """Keep the ``texts`` of a new one-call group, with the bodies of its texts.

        (output, id, name, arguments, call text, output text); ``decoded`` is the
        object decoded from the arguments. The call's body is made of those values
        unless the arguments are very nested (one level deeper in the call text,
        they could be too deep for the parser); the output's is parsed.
        """
        call, arguments = texts[4], texts[3]
        if arguments.count("{") + arguments.count("[") <= _SHALLOW:
            body = ToolBody(name=texts[2], id=texts[1], arguments=decoded)
            calling: _Pair | None = (call, body)
        else:
            calling = _parsed(call)
        known = (*texts, (calling, _parsed(texts[5])))
        self.made[key] = known
        self.fresh.append(known)

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
