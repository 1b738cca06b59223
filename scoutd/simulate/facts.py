"""The hidden-fact measure: what a prepared prompt hides that the agent uses next.

At each model call of a recorded run, the agent's next action (its text, its
reasoning and its tool-call arguments) names *facts* (:func:`action_facts`).
A fact is *needed* at that call when it appears in an earlier tool output and
in no earlier operator text (system, user) nor earlier agent text: the agent
can only have learned it from a tool. A prepared prompt *hides* a needed fact
when the fact appears nowhere in it. docs/ECONOMY.md states the definition
and its noise.

The run is indexed once (:class:`RunFacts`): each message's facts, and for
every call the needed facts with the tool outputs they appear in. Measuring a
prompt then costs a look at its messages: an unchanged original message is
recognised by identity or by its encoded text, and only rewritten messages
(placeholders, shortened outputs, notices) are read for facts, once each.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from .texts import ACTION, OUTPUT, Part, encode, message_parts

__all__ = [
    "Call",
    "FactTally",
    "Hidden",
    "RunFacts",
    "action_facts",
    "fact_kind",
    "text_facts",
]

_EXTENSIONS = (
    "py|pyi|pyx|ipynb|js|jsx|mjs|cjs|ts|tsx|go|rs|c|h|cc|cpp|hpp|java|kt|rb|php|cs|swift|"
    "scala|sh|bash|zsh|md|rst|txt|json|jsonl|toml|yaml|yml|ini|cfg|conf|lock|xml|html|css|"
    "scss|sql|proto|csv|log|mod|sum|gradle|vue|svelte|tf|lua|ex|exs|dart"
)
# A word character in Unicode's sense: an identifier or a number is never cut out of
# a longer word (``café_config`` is one identifier, ``é4096`` no number).
_NAME = r"\w"
_PATH = rf"(?:[\w.~-]*/)+[\w.-]*\w|[\w-][\w.-]*\.(?:{_EXTENSIONS})(?!{_NAME})"
_IDENT = rf"[^\W\d]{_NAME}{{5,}}"  # a letter or ``_``, then 5+ word characters
_FACT = re.compile(
    rf"(?<![\w.~/-])(?P<path>(?:{_PATH})(?::\d+)?)"
    r"|\b(?P<line>(?i:lines?) \d+)"
    rf"|(?<!{_NAME})(?P<ident>{_IDENT})(?!{_NAME})"
    rf"|(?<!{_NAME})(?P<number>\d{{3,}})(?!{_NAME})"
)
# Identifiers and numbers inside a path or a line reference.
_INNER = re.compile(rf"(?<!{_NAME})(?:(?P<ident>{_IDENT})|(?P<number>\d{{3,}}))(?!{_NAME})")
# scoutd's own words in a rewritten message: a shortened text's prefix and middle marker
# (its length, digest and recall handle) and the default notice's counts and handles.
# They copy nothing from an output: a needed fact they happen to spell is still hidden.
_HANDLES = r"#\d+(?:-#\d+)?(?:, #\d+(?:-#\d+)?)*"
_MARKUP = re.compile(
    r"Truncated \(\d+(?:, recall #\d+)?\): "
    r"|<\.\.\.\d+ - [0-9a-f]{5}\.\.\.>"
    r"|\d+ older tool messages are shown shortened"
    r"|\d+ were removed\."
    rf"|from the oldest; removed here: {_HANDLES};"
)


def _identifier(token: str) -> bool:
    """An underscore, a digit, or an inner capital (mixed case, a capital after the first).

    An all-capital word without ``_`` or digit (``WARNING``, ``REDACTED``) is
    prose or a marker, not an identifier.
    """
    if "_" in token or any(c.isdigit() for c in token):
        return True
    return any(c.isupper() for c in token[1:]) and any(c.islower() for c in token)


def _path(token: str) -> bool:
    return len(token) >= 4 and any(c.isalpha() for c in token)


def _line(token: str) -> str:
    """``line N`` for ``Line N``, ``lines N``: one spelling of a line reference."""
    return f"line {token.rpartition(' ')[2]}"  # pragma: no mutate (one space: partition agrees)


def action_facts(text: str) -> set[str]:
    """The facts a text names, as written.

    A path has a ``/`` or ends in a known file extension, has a letter and 4+
    characters; ``path:N`` is a line reference, and so is ``line N`` (any
    case, ``lines`` too, spelled ``line N``). An identifier has 6+ characters
    of letters, digits and ``_``, starts with a letter or ``_`` and has an
    ``_``, a digit or an inner capital (with lower case letters too). A
    number has 3+ digits on its own.
    """
    found: set[str] = set()
    for match in _FACT.finditer(text):
        kind = match.lastgroup
        token = match.group()
        if kind == "path":
            if _path(token):
                found.add(token)
        elif kind == "line":
            found.add(_line(token))
        elif _identifier(token):  # a number passes too: it is digits
            found.add(token)
    return found


def _tails(token: str) -> list[str]:
    """What follows each ``/`` of a path (a path never ends in ``/``)."""
    return [token[i + 1 :] for i, c in enumerate(token) if c == "/"]


def text_facts(text: str) -> set[str]:
    """The facts a text contains: its own, and those written inside them.

    A path also contains each of its tails (``src/pkg/a.py`` contains
    ``pkg/a.py`` and ``a.py``), a line reference its path, and both the
    identifiers and numbers between their separators: ``a.py`` named by the
    agent appears in an output that printed ``src/pkg/a.py:12``, and ``1234``
    in one that printed ``line 1234`` (a traceback's line).
    """
    found = action_facts(text)
    for token in list(found):
        path, colon, _ = token.rpartition(":")  # pragma: no mutate (one ":" at most)
        pieces = _tails(token)
        if colon:
            pieces += [path, *_tails(path)]
        found.update(piece for piece in pieces if _path(piece))
        for inner in _INNER.finditer(token):
            if _identifier(inner.group()):  # a number passes too: it is digits
                found.add(inner.group())
    return found


def fact_kind(fact: str) -> str:
    """``line``, ``path``, ``identifier`` or ``number``: the kind of a fact."""
    _, colon, end = fact.rpartition(":")  # pragma: no mutate (one ":" at most)
    if fact.startswith("line ") or (colon and end.isdigit()):
        return "line"
    if "/" in fact or "." in fact:
        return "path"
    return "number" if fact.isdigit() else "identifier"


@dataclass(frozen=True, slots=True)
class Source:
    """A tool output a needed fact appears in: its message and its place in the run."""

    position: int  # index of the message in the run
    output: int  # number of the output in the run (0: the first)


@dataclass(frozen=True, slots=True)
class Call:
    """One model call: its prefix length and the facts it needs, with their sources."""

    end: int
    outputs_before: int
    needed: dict[str, tuple[Source, ...]]


@dataclass(frozen=True, slots=True)
class Hidden:
    """A needed fact a prompt hid at a call."""

    call: Call
    fact: str


class FactTally(msgspec.Struct, kw_only=True):
    """The measure of one strategy over one or more runs.

    ``rate`` is hidden needed facts over needed facts; ``call_share`` the share
    of calls (with a next action) whose prompt hid at least one needed fact.
    """

    calls: int = 0
    needed: int = 0
    hidden: int = 0
    calls_hiding: int = 0

    @property
    def rate(self) -> float:
        return self.hidden / self.needed if self.needed else 0.0

    @property
    def call_share(self) -> float:
        return self.calls_hiding / self.calls if self.calls else 0.0

    def add(self, other: FactTally) -> None:
        """Add ``other``'s counts to this one."""
        self.calls += other.calls
        self.needed += other.needed
        self.hidden += other.hidden
        self.calls_hiding += other.calls_hiding


class RunFacts:
    """A run indexed once: its calls, what each needs, and how to measure a prompt.

    ``calls`` are the model calls that have a next action: the prefix ends
    given (the replay's rounds) followed by a message the agent wrote.
    """

    def __init__(self, messages: Sequence[Any], format_name: str, ends: Sequence[int]) -> None:
        self.messages = list(messages)
        self.format_name = format_name
        parts = [message_parts(m, format_name) for m in self.messages]
        self.parts = parts
        self._ids = {id(m): position for position, m in enumerate(self.messages)}
        self._encoded: dict[str, int] | None = None
        self._rewritten: dict[str, frozenset[str]] = {}
        self.calls = self._index(parts, ends)

    def _index(self, parts: list[list[Part]], ends: Sequence[int]) -> list[Call]:
        earlier: set[str] = set()  # facts of earlier operator and agent text
        sources: dict[str, list[Source]] = {}
        outputs = 0
        added = 0
        calls = []
        for end in ends:
            for position in range(added, min(end, len(parts))):
                for part in parts[position]:
                    facts = text_facts(part.text)
                    if part.kind == OUTPUT:
                        source = Source(position, outputs)
                        outputs += 1
                        for fact in facts:
                            sources.setdefault(fact, []).append(source)
                    else:
                        earlier |= facts
            added = max(added, end)
            action = self._action(parts, end)
            if action is None:
                continue
            needed = {
                fact: tuple(sources[fact])
                for fact in sorted(action)
                if fact in sources and fact not in earlier
            }
            calls.append(Call(end, outputs, needed))
        return calls

    @staticmethod
    def _action(parts: list[list[Part]], end: int) -> set[str] | None:
        """The facts the messages the agent writes from ``end`` on name (None: none)."""
        found: set[str] = set()
        position = end
        while position < len(parts):
            kinds = {part.kind for part in parts[position]}
            if not kinds or kinds - {ACTION}:
                break
            for part in parts[position]:
                found |= action_facts(part.text)
            position += 1
        return found if position > end else None

    def _by_text(self) -> dict[str, int]:
        """The position of each original message by its encoded text (computed once)."""
        if self._encoded is None:
            self._encoded = {}
            for number, original in enumerate(self.messages):
                self._encoded.setdefault(encode(original), number)
        return self._encoded

    def _facts_of(self, encoded: str, message: Any) -> frozenset[str]:
        found = self._rewritten.get(encoded)
        if found is None:
            parts = message_parts(message, self.format_name)
            found = frozenset().union(*(text_facts(_MARKUP.sub(" ", p.text)) for p in parts))
            self._rewritten[encoded] = found
        return found

    def hidden(self, call: Call, prompt: Sequence[Any]) -> list[Hidden]:
        """The needed facts of ``call`` that appear nowhere in ``prompt``."""
        if not call.needed:
            return []
        present: set[int] = set()
        rewritten: list[frozenset[str]] = []
        for message in prompt:
            position = self._ids.get(id(message))
            if position is not None and self.messages[position] is message:
                present.add(position)
                continue
            encoded = encode(message)
            position = self._by_text().get(encoded)
            if position is not None:
                present.add(position)
            else:
                rewritten.append(self._facts_of(encoded, message))
        return [
            Hidden(call, fact)
            for fact, sources in call.needed.items()
            if not any(s.position in present for s in sources)
            and not any(fact in facts for facts in rewritten)
        ]

    def measure(
        self,
        prompts: Callable[[int], Sequence[Any]],
        record: Callable[[Hidden], None] | None = None,
    ) -> FactTally:
        """Tally every call against ``prompts(end)``, the prompt prepared for that prefix."""
        tally = FactTally()
        for call in self.calls:
            self.tally_call(tally, call, prompts(call.end), record)
        return tally

    def tally_call(
        self,
        tally: FactTally,
        call: Call,
        prompt: Sequence[Any],
        record: Callable[[Hidden], None] | None = None,
    ) -> None:
        """Add one call's needed and hidden facts to ``tally``."""
        hidden = self.hidden(call, prompt)
        tally.calls += 1
        tally.needed += len(call.needed)
        tally.hidden += len(hidden)
        tally.calls_hiding += bool(hidden)
        if record is not None:
            for item in hidden:
                record(item)

    def calls_at(self) -> dict[int, Call]:
        """The calls by prefix length."""
        return {call.end: call for call in self.calls}
