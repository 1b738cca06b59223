"""The texts of the OpenAI Chat view kept from one view to the next (docs/PERFORMANCE.md).

Split from :mod:`scoutd.formats.openai_chat`: the texts of the previous view,
reused for the very same strings, and the texts handed over to the strategies
with their bodies, so that a text resent is not decoded again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..strategies.tool_messages import Given, ToolBody
from .view import call_text, output_text

__all__ = ["Known", "Texts", "forget"]

# (output, id, name, arguments, call text, output text, bodies) of one-call groups, by
# id(output); bodies: None until known, then the (text, body) of the call and the output
_Pair = tuple[str, ToolBody]
Known = tuple[str, str, str, str, str, str, tuple[_Pair | None, _Pair | None] | None]


def _handed_over(texts: Texts) -> Given:
    """The bodies of the texts of the view just made that are known, by id of the text.

    A group's bodies are those the strategies parsed from its texts in the
    previous prepare (:func:`~scoutd.strategies.tool_messages.given_bodies`),
    so a resent group is parsed once. When the view reused every group of the
    previous one (an agent resends its conversation and appends to it), the
    previous view's dict is still right: it grows by the groups just known.
    Otherwise it is made afresh from this view's groups.
    """
    if len(texts.made) - texts.fresh == len(texts.known):
        bodies, known = texts.known_bodies, texts.picked  # every kept entry was reused
    else:
        bodies, known = {}, list(texts.made.values())
    for entry in known:
        for pair in entry[6] or ():
            if pair is not None:
                bodies[id(pair[0])] = pair
    return bodies


# (arguments, id, name, call text) by id(arguments) and (output, id, output text) by
# id(output), of the calls and outputs of parallel calls
KnownCall = tuple[str, str, str, str]
KnownOutput = tuple[str, str, str]
_Kept = tuple[dict[int, Known], dict[int, KnownCall], dict[int, KnownOutput], Given, Given]


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
    known_bodies: Given  # what the previous view handed over
    known_parsed: Given  # what the strategies parsed in the previous prepare
    made: dict[int, Known] = field(default_factory=dict)
    fresh: int = 0  # one-call entries made, not reused
    picked: list[Known] = field(default_factory=list)  # entries whose bodies became known
    parsed: Given = field(default_factory=dict)  # for the strategies to fill
    made_calls: dict[int, KnownCall] = field(default_factory=dict)
    made_outputs: dict[int, KnownOutput] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # the JSON text of each name seen

    def add(self, key: int, known: Known) -> None:
        """Keep the texts of a new one-call group."""
        self.made[key] = known
        self.fresh += 1

    def reuse(self, key: int, known: Known) -> None:
        """Keep the previous view's entry of a one-call group, with the bodies of its
        texts if the strategies parsed them in the previous prepare."""
        if known[6] is None:
            parsed = self.known_parsed
            calling, answering = parsed.get(id(known[4])), parsed.get(id(known[5]))
            if calling is not None or answering is not None:
                known = (*known[:6], (calling, answering))
                self.picked.append(known)
        self.made[key] = known

    @classmethod
    def last(cls) -> Texts:
        """A new view's texts, knowing those of the previous view."""
        return cls(*_last_texts)

    def remember(self) -> Given:
        """Keep this view's texts for the next view; return the bodies handed over."""
        bodies = _handed_over(self)
        _remember((self.made, self.made_calls, self.made_outputs, bodies, self.parsed))
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


_last_texts: _Kept = ({}, {}, {}, {}, {})


def _remember(made: _Kept) -> None:
    """Keep ``made`` for the next view (replaced whole: safe across threads)."""
    global _last_texts
    _last_texts = made


def forget() -> None:
    """Drop the texts kept from the previous view (the next view encodes everything)."""
    _remember(({}, {}, {}, {}, {}))
