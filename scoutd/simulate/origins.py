"""Where the hidden facts come from: which tool outputs, how old, superseded or not.

Each needed fact is attributed to the newest earlier tool output it appears in
(the one a retention policy would most cheaply keep). That output is
classified by what produced it (:func:`tool_kind`: a file read, a search or
listing, a test run, ..., by the classifier the default's retention uses,
:mod:`scoutd.strategies.tool_kinds`), by its age in outputs at the call (1: the output
just before it), and, for a file read, by whether a later output read the same
file again (*superseded*) or edited it before the call. :class:`Origins`
counts needed and hidden facts along each of these axes for one strategy.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from ..strategies.tool_kinds import EDIT, KINDS, OTHER, READ, CallKind, call_kind, command_text
from .facts import Call, Hidden, RunFacts, action_facts, fact_kind
from .texts import ACTION, OUTPUT

__all__ = ["AGES", "Origins", "OutputInfo", "format_origins", "run_outputs", "tool_kind"]

# Age buckets in outputs: (lowest, highest or None).
AGES = ((1, 10), (11, 20), (21, 40), (41, 80), (81, None))
_decode = msgspec.json.Decoder().decode


def _arguments(text: str) -> Any:
    """A call's arguments from their JSON text (an object), or the text itself."""
    try:
        return _decode(text)
    except (msgspec.DecodeError, UnicodeError, RecursionError):
        return text


def tool_kind(tool: str | None, arguments: Any) -> str:
    """What produced an output (:func:`scoutd.strategies.tool_kinds.call_kind`), from
    the call's tool name and its arguments: the JSON text of a function call's, or
    the object of a call of another kind."""
    return _call(tool, arguments).kind


def _call(tool: str | None, arguments: Any) -> CallKind:
    found = _arguments(arguments) if type(arguments) is str else arguments
    return call_kind(tool, found)


@dataclass(frozen=True, slots=True)
class OutputInfo:
    """One tool output: what produced it and the file it read or edited, if any."""

    kind: str
    target: str | None


def _target(kind: str, arguments: Any, named: str | None = None) -> str | None:
    """The file a read or an edit names: ``named``, the one its call names in a field
    (an apply_patch operation's ``path``), else the longest path of its arguments."""
    if kind not in (READ, EDIT):
        return None
    if named is not None:
        return named
    value = _arguments(arguments) if type(arguments) is str else arguments
    found = action_facts(command_text(value))
    kinds = ("path", "line")
    paths = sorted(f for f in found if fact_kind(f) in kinds and not f.startswith("line "))
    if not paths:
        return None
    longest = max(paths, key=len)  # the first of the longest, in sorted order
    path, colon, line = longest.rpartition(":")
    return path if colon and line.isdigit() else longest


def run_outputs(facts: RunFacts) -> list[OutputInfo]:
    """Every tool output of the run, in order, with its kind and target file."""
    calls: dict[str, tuple[str | None, Any]] = {}
    infos = []
    for parts in facts.parts:
        for part in parts:
            if part.kind == ACTION and part.call_id is not None:
                given = part.text if part.arguments is None else part.arguments
                calls[part.call_id] = (part.tool, given)
            elif part.kind == OUTPUT:
                tool, arguments = calls.get(part.call_id or "", (None, ""))
                found = _call(tool, arguments)
                named = None if type(arguments) is str else found.target
                infos.append(OutputInfo(found.kind, _target(found.kind, arguments, named)))
    return infos


def age_bucket(age: int) -> str:
    """The label of the age bucket of an output ``age`` outputs before a call."""
    for low, high in AGES:
        if high is None or age <= high:
            return f"{low}+" if high is None else f"{low}-{high}"
    return "0"


class Origins:
    """Needed and hidden facts of one strategy, by where they come from."""

    def __init__(self, strategy: str) -> None:
        self.strategy = strategy
        self.needed: dict[str, Counter[str]] = {}
        self.hidden: dict[str, Counter[str]] = {}
        self._outputs: dict[int, tuple[RunFacts, list[OutputInfo]]] = {}

    def _axes(self, facts: RunFacts, call: Call, fact: str) -> dict[str, str]:
        entry = self._outputs.get(id(facts))
        if entry is None or entry[0] is not facts:
            entry = (facts, run_outputs(facts))
            self._outputs = {id(facts): entry}
        outputs = entry[1]
        source = call.needed[fact][-1].output
        info = outputs[source] if source < len(outputs) else OutputInfo(OTHER, None)
        later = outputs[source + 1 : call.outputs_before]
        reread = info.kind == READ and any(
            o.kind == READ and o.target == info.target for o in later
        )
        edited = info.target is not None and any(
            o.kind == EDIT and o.target == info.target for o in later
        )
        return {
            "tool": info.kind,
            "age": age_bucket(call.outputs_before - source),
            "fact": fact_kind(fact),
            "read": (
                "superseded by a later read"
                if reread
                else "edited since"
                if edited
                else "newest read"
                if info.kind == READ
                else "not a read"
            ),
        }

    def _count(self, into: dict[str, Counter[str]], axes: dict[str, str]) -> None:
        for axis, value in axes.items():
            into.setdefault(axis, Counter())[value] += 1

    def run(self, facts: RunFacts) -> None:
        """Count the needed facts of a run (once per run)."""
        for call in facts.calls:
            for fact in call.needed:
                self._count(self.needed, self._axes(facts, call, fact))

    def record(self, facts: RunFacts, hidden: Hidden) -> None:
        """Count one fact this strategy's prompt hid."""
        self._count(self.hidden, self._axes(facts, hidden.call, hidden.fact))


def format_origins(origins: Origins, axes: Sequence[str] = ("tool", "age", "read", "fact")) -> str:
    """One table per axis: needed and hidden facts, share of the hidden, rate."""
    total = sum(origins.hidden.get("tool", Counter()).values())
    lines = [f"hidden facts of {origins.strategy}, by origin ({total} hidden)"]
    for axis in axes:
        needed = origins.needed.get(axis, Counter())
        hidden = origins.hidden.get(axis, Counter())
        lines.append("")
        lines.append(f"{axis:<28}{'needed':>8}{'hidden':>8}{'of hidden':>11}{'rate':>8}")
        order = [k for k in (*KINDS, *(age_bucket(low) for low, _ in AGES)) if k in needed]
        order += sorted(k for k in needed if k not in order)
        for key in order:
            share = hidden[key] / total if total else 0.0
            rate = hidden[key] / needed[key] if needed[key] else 0.0
            lines.append(f"{key:<28}{needed[key]:>8}{hidden[key]:>8}{share:>11.1%}{rate:>8.1%}")
    return "\n".join(lines)
