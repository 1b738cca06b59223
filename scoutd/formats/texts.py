"""The texts of a provider view kept from one view to the next (docs/PERFORMANCE.md).

The tool texts of the previous view, reused for the very same strings, and
the bodies the strategies parsed from them, handed over so that a text reused
is not decoded again. Every provider adapter uses :meth:`Texts.call` and
:meth:`Texts.output`; the OpenAI Chat view also keeps whole one-call groups
(``known``). The previous view is the last one made with the same
:class:`ConversationTexts`, an object the owner of the conversation keeps and
passes to each view (a session its own; ``prepare(texts=...)`` the caller's):
no view finds another's texts, so sessions taking turns all stay warm and
threads share nothing. A view made without one starts from nothing and keeps
nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..strategies.tool_messages import Given
from .view import call_text, output_text

__all__ = ["ConversationTexts", "Known", "Texts"]

# (output, id, name, arguments, call text, output text) of one-call groups, by id(output)
Known = tuple[str, str, str, str, str, str]


# (arguments, id, name, call text) by id(arguments) and (output, id, output text) by
# id(output): every call and output but the OpenAI Chat one-call groups
KnownCall = tuple[str, str, str, str]
KnownOutput = tuple[str, str, str]
_Kept = tuple[dict[int, Known], dict[int, KnownCall], dict[int, KnownOutput], Given, dict[str, str]]


def _nothing() -> _Kept:
    """What a conversation seen for the first time knows: fresh, empty tables."""
    return ({}, {}, {}, {}, {})


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
    # The texts and bodies the strategies parsed in the previous prepare, and those of this one
    # (``PrepareContext.given``): a text the view reuses is not parsed again
    known_parsed: Given
    # Call texts encoded from an arguments object, by value (see :meth:`encoded_call`)
    known_encoded: dict[str, str]
    made: dict[int, Known] = field(default_factory=dict)
    parsed: Given = field(default_factory=dict)
    made_calls: dict[int, KnownCall] = field(default_factory=dict)
    made_outputs: dict[int, KnownOutput] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # the JSON text of each name seen
    made_encoded: dict[str, str] = field(default_factory=dict)

    @classmethod
    def after(cls, kept: ConversationTexts | None) -> Texts:
        """A new view's texts, knowing those of the previous view kept in ``kept``."""
        return cls(*((kept is not None and kept.kept) or _nothing()))

    def keep(self, kept: ConversationTexts | None) -> None:
        """Keep this view's texts, and the bodies its prepare will parse, in ``kept``
        for the next view (replaced whole: safe across threads)."""
        if kept is not None:
            kept.kept = (
                self.made,
                self.made_calls,
                self.made_outputs,
                self.parsed,
                self.made_encoded,
            )

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

    def encoded_call(self, name: Any, ident: str, arguments: dict[str, Any]) -> str:
        """:func:`call_text` of an arguments object, as the previous view's very text
        object when the text is equal.

        An object can change in place, so it is encoded every time; handing back
        the earlier text object lets the strategies take the body they parsed
        from it instead of parsing it again.
        """
        text = call_text(name, ident, arguments)
        text = self.known_encoded.get(text, text)
        self.made_encoded[text] = text
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


class ConversationTexts:
    """The texts of one conversation's last provider view, kept by whoever owns the
    conversation for its next view (docs/PERFORMANCE.md)."""

    __slots__ = ("kept",)

    def __init__(self) -> None:
        self.kept: _Kept | None = None  # nothing until the first view

    def forget(self) -> None:
        """Drop them (the conversation was replaced)."""
        self.kept = None
