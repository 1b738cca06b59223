"""Tool traffic inside a conversation: decoding, pairing, positions.

Every strategy starts with :func:`index_tools`, which parses each tool
message's JSON exactly once and works out the pairs and the newest-first
positions (docs/STRATEGIES.md). A tool message whose content is not a JSON
object is *unusable*: it is not indexed, so it counts nowhere and is passed
through unchanged.

The index is kept in parallel lists rather than one object per message: a
prepare call on a long agent run touches thousands of tool messages, and the
strategies must cost little more than decoding them (see docs/PERFORMANCE.md).
Parsing reads only ``name``, ``id`` and ``arguments``; an output's ``content``
is validated but left undecoded (``msgspec.Raw``) until a strategy rewrites it
(:mod:`.rewrites`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import attrgetter, eq, is_, is_not, itemgetter, sub
from typing import Any

import msgspec

from .columns import Columns, known_columns

__all__ = [
    "CALL",
    "OUTPUT",
    "TOOL_ROLES",
    "ToolBody",
    "ToolIndex",
    "call_keys",
    "decode_body",
    "encode_json",
    "Handed",
    "index_tools",
    "output_handles",
    "repeated_pairs",
    "role_of",
    "roles_of",
    "with_content",
]

CALL = "function_call"
OUTPUT = "function_call_output"
TOOL_ROLES = frozenset((CALL, OUTPUT))
ARGUMENT_SIZE = 200
OUTPUT_SIZE = 400


class ToolBody(msgspec.Struct, gc=False):
    """The parts of a tool message's JSON object that the strategies read."""

    name: Any = None
    id: Any = None
    arguments: Any = None
    content: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


_parse_body = msgspec.json.Decoder(ToolBody).decode
# A whole body, read after the index accepted it. The index skips the fields it does
# not read without checking their numbers, so a number no double can hold (1e400)
# must read here too: as infinity, written back as null (docs/STRATEGIES.md).
decode_body = msgspec.json.Decoder(float_hook=float).decode
# msgspec writes compact JSON in the key order of the dict, raw UTF-8, `/`
# unescaped and lowercase \u00xx escapes: byte-identical to the original's output.
_encode = msgspec.json.Encoder().encode
_encode_sorted = msgspec.json.Encoder(order="sorted").encode
# RecursionError: JSON nested deeper than the decoder goes is unusable, like invalid JSON.
_PARSE_ERRORS = (msgspec.DecodeError, TypeError, UnicodeError, RecursionError)
_NO_ARGUMENTS: dict[str, Any] = {}


def encode_json(value: Any) -> str:
    """Compact JSON text of ``value`` as the strategies write it."""
    return _encode(value).decode()  # UTF-8


def role_of(message: Any) -> Any:
    """The ``role`` of a message, or None when the message is not a mapping."""
    if type(message) is dict or isinstance(message, Mapping):
        return message.get("role")
    return None


_get_role = itemgetter("role")


def roles_of(messages: Sequence[Any]) -> list[Any]:
    """The role of every message (None for a message without one)."""
    # not mutated: a fast path; whatever its mutants raise, the fallback finds the same
    # roles (it writes None for a non-string role, which no caller tells from another)
    try:
        roles = list(map(_get_role, messages))  # pragma: no mutate
        set(roles)  # pragma: no mutate (raises TypeError on an unhashable role)
    except (KeyError, TypeError, IndexError):
        roles = [role_of(message) for message in messages]
        roles = [role if isinstance(role, str) else None for role in roles]
    return roles


def with_content(message: Mapping[str, Any], content: str) -> dict[str, Any]:
    """A new message with the same keys as ``message`` and a new ``content``."""
    changed = dict(message)
    changed["content"] = content
    return changed


@dataclass(slots=True)
class ToolIndex:
    """The usable tool messages of a conversation, in parallel lists, oldest first.

    ``numbers[t]`` is the oldest-first number of the output that gives tool
    ``t`` its place: its own number for an output, its output's for a paired
    call, the next output's for a call still waiting (one past the newest if
    none came yet). ``positions`` turns them into newest-first numbers.
    ``partners[t]`` is the slot of the other half of a pair, or -1.

    The index can grow with the conversation (:meth:`extend`), so that a
    session pays only for what is new.
    """

    roles: list[Any] = field(default_factory=list)  # of every message
    indices: list[int] = field(default_factory=list)  # message index of each tool
    is_call: list[bool] = field(default_factory=list)
    bodies: list[ToolBody] = field(default_factory=list)
    numbers: list[int] = field(default_factory=list)
    partners: list[int] = field(default_factory=list)
    outputs: int = 0
    waiting: dict[Any, int] = field(default_factory=dict)  # call slots by id, not yet paired
    paired: list[int] = field(default_factory=list)  # call slots paired by the last extend
    # Every tool so far paired by _pair_alternating: slot 2k is pair k+1's call, slot
    # 2k+1 its output, and the numbers go 1, 1, 2, 2, ...
    alternating: bool = True
    _positions: list[int] | None = None

    @property
    def positions(self) -> list[int]:
        """Newest-first numbers: 1 for the newest output, 0 for a call after it."""
        if self._positions is None:
            top = self.outputs + 1
            self._positions = list(map(sub, repeat(top), self.numbers))
        return self._positions

    def content(self, messages: Sequence[Any], slot: int) -> str:
        """The stored JSON text of tool ``slot``."""
        text: str = messages[self.indices[slot]]["content"]
        return text

    def extend(
        self,
        messages: Sequence[Any],
        start: int,
        shared: Columns | None = None,
        given: Handed | None = None,
    ) -> None:
        """Index ``messages[start:]``, the messages appended since the last call.

        Pairing goes forward: a call waits under its ``id`` until an output with
        the same ``id`` arrives (a later call with the same ``id`` replaces a
        waiting one).
        """
        # not mutated (the lines marked below): each only picks a faster way to the
        # same roles, contents and bodies; tests/strategies/test_core_columns.py
        # checks every such shortcut against the general path
        columns = None if start else known_columns(messages, shared)  # pragma: no mutate
        if columns is not None:  # read once for this prepare: the same roles and contents
            roles: list[Any] = columns.roles
        else:
            roles = roles_of(messages[start:] if start else messages)  # pragma: no mutate
        # roles_of gives hashable roles; compress and map keep these passes out of Python loops
        found = map(TOOL_ROLES.__contains__, roles)
        candidates = list(compress(range(start, start + len(roles)), found))
        if columns is not None:
            contents = list(map(columns.contents.__getitem__, candidates))
            strings = columns.lengths is not None  # pragma: no mutate
        else:
            contents = _contents(messages, candidates)
            strings = set(map(type, contents)) <= _STR  # pragma: no mutate
        indices, bodies = _parse_all(contents, candidates, strings, given)  # pragma: no mutate
        self.roles += roles
        first = len(self.indices)
        self.indices += indices
        self.bodies += bodies
        calls = list(map(eq, map(self.roles.__getitem__, indices), repeat(CALL)))
        self.is_call += calls
        self._positions = None
        ids = list(map(_get_id, bodies))
        if not self.waiting and _alternating(calls, ids):
            self._pair_alternating(first, len(indices))
        else:
            self._pair(first, ids, calls)
            self.alternating = False

    def _pair_alternating(self, first: int, count: int) -> None:
        """Pair ``count`` new tools that alternate call, output, each pair under one string id.

        What :meth:`_pair` finds for them when no call is waiting, built without
        a Python loop (most agents call one tool at a time; docs/PERFORMANCE.md).
        """
        half = count // 2
        calls, outputs = range(first, first + count, 2), range(first + 1, first + count, 2)
        # each pair's number twice, and each slot's partner: built by slice assignment
        numbers = [0] * count
        numbers[::2] = numbers[1::2] = range(self.outputs + 1, self.outputs + 1 + half)
        partners = [0] * count
        partners[::2], partners[1::2] = outputs, calls
        self.numbers += numbers
        self.partners += partners
        self.outputs += half
        self.paired = list(calls)

    def _pair(self, first: int, ids: list[Any], calls: list[bool]) -> None:
        """Number and pair the tools from slot ``first`` on, one by one."""
        # not mutated: a placeholder; the loop below writes every new slot's number
        self.numbers += [0] * len(ids)  # pragma: no mutate
        self.partners += [-1] * len(ids)
        numbers, partners, waiting = self.numbers, self.partners, self.waiting
        paired = []
        outputs = self.outputs
        slots = range(first, first + len(ids))
        # not mutated: slots, ids and calls have one entry per new tool (strict= changes nothing)
        for slot, ident, is_call in zip(slots, ids, calls, strict=True):  # pragma: no mutate
            key = ident if type(ident) is str else _pair_key(ident)
            if is_call:
                numbers[slot] = outputs + 1  # the nearest newer output, until paired
                if key is not None:
                    waiting[key] = slot
            else:
                outputs += 1
                numbers[slot] = outputs
                if key is not None and waiting:
                    partner = waiting.pop(key, -1)
                    if partner >= 0:
                        partners[slot] = partner
                        partners[partner] = slot
                        numbers[partner] = outputs
                        paired.append(partner)
        self.outputs = outputs
        self.paired = paired


def _alternating(calls: list[bool], ids: list[Any]) -> bool:
    """Whether the tools go call, output, call, output..., each output with its call's string id."""
    # not mutated: any other half makes the test false, and _pair then finds the same pairs
    # (an odd count fails the next line too: the lengths differ)
    half = len(calls) // 2  # pragma: no mutate
    return calls == [True, False] * half and set(map(type, ids)) <= {str} and ids[::2] == ids[1::2]


_get_id = attrgetter("id")
_DICT = frozenset((dict,))
_STR = frozenset((str,))


# (text, body) by id(text); an entry holds its text, so no other object has that id
Given = dict[int, tuple[str, ToolBody]]
# Bodies handed over between prepares: (given, parsed). A tool message whose
# content is one of ``given``'s texts is not parsed again. A provider format's
# adapter keeps the JSON texts of its view from one prepare to the next while
# the agent resends the same values (docs/FORMATS.md): it hands over what the
# previous prepare parsed (``given``), and every tool message's text and body
# of this one are added to ``parsed``, for the next.
Handed = tuple[Given, Given]


def _contents(messages: Sequence[Any], candidates: list[int]) -> list[Any]:
    """The ``content`` of the messages at ``candidates`` (None when missing: unusable)."""
    chosen = list(map(messages.__getitem__, candidates))
    if set(map(type, chosen)) <= _DICT:  # plain dicts: their get, called without a Python loop
        return list(map(dict.get, chosen, repeat("content")))
    return [message.get("content") for message in chosen]


def _parse_all(
    contents: list[Any], candidates: list[int], strings: bool, given: Handed | None
) -> tuple[list[int], list[ToolBody]]:
    """Parse the ``contents`` of the tool messages at ``candidates``; drop the unusable ones.

    ``strings``: whether every content is a str. ``given``: bodies handed over
    (``Handed``), taken instead of parsing their texts again.
    """
    if given is not None:
        # not mutated: ``strings`` only chooses a faster way to the same result
        return _given_or_parsed(candidates, contents, strings, *given)  # pragma: no mutate
    return _parse_contents(contents, candidates, strings)  # pragma: no mutate


def _parse_contents(
    contents: list[Any], candidates: list[int], strings: bool
) -> tuple[list[int], list[ToolBody]]:
    """:func:`_parse_all` without bodies handed over."""
    if strings:
        # not mutated: a fast path; each of its mutants raises TypeError, caught
        # below, and the loop then parses the same contents one by one
        try:
            return candidates, list(map(_parse_body, contents))  # pragma: no mutate
        except (*_PARSE_ERRORS, msgspec.ValidationError):
            pass  # at least one is unusable: sort them out one by one
    indices: list[int] = []
    bodies: list[ToolBody] = []
    # not mutated: contents has one entry per candidate (strict= changes nothing)
    for i, content in zip(candidates, contents, strict=True):  # pragma: no mutate
        if type(content) is str:
            try:
                bodies.append(_parse_body(content))
            except (*_PARSE_ERRORS, msgspec.ValidationError):
                continue
            indices.append(i)
    return indices, bodies


def _given_or_parsed(
    candidates: list[int], contents: list[Any], strings: bool, given: Given, parsed: Given
) -> tuple[list[int], list[ToolBody]]:
    """:func:`_parse_all` with the bodies handed over; each text and body
    (given or parsed) goes into ``parsed``."""
    ids = list(map(id, contents))
    # not mutated: the two tests below only choose between equal ways (the
    # general loop at the end gives the same indices, bodies and records), and
    # every zip here pairs lists of one length, so strict= changes nothing
    entries: list[Any] = list(map(given.get, ids)) if given else []  # pragma: no mutate
    if entries and not any(map(is_, entries, repeat(None))):
        parsed.update(zip(ids, entries, strict=True))  # pragma: no mutate
        return candidates, list(map(_get_body, entries))
    if not entries or not any(map(is_not, entries, repeat(None))):  # pragma: no mutate
        indices, bodies = _parse_contents(contents, candidates, strings)  # pragma: no mutate
        if len(indices) == len(candidates):
            pairs = zip(contents, bodies, strict=True)  # pragma: no mutate
            parsed.update(zip(ids, pairs, strict=True))  # pragma: no mutate
            return indices, bodies
    indices, bodies = [], []
    entries = entries or [None] * len(contents)
    for i, content, entry in zip(candidates, contents, entries, strict=True):  # pragma: no mutate
        if entry is None:
            if type(content) is not str:
                continue
            try:
                entry = (content, _parse_body(content))
            except (*_PARSE_ERRORS, msgspec.ValidationError):
                continue
        parsed[id(content)] = entry
        indices.append(i)
        bodies.append(entry[1])
    return indices, bodies


_get_body = itemgetter(1)


def _pair_key(ident: Any) -> Any:
    """A hashable key for a non-string ``id``, or None when it cannot pair.

    A string id is its own key (the caller's fast path): the type name keeps
    ``1``, ``1.0`` and ``true`` apart from each other and from strings.
    """
    if ident is None or isinstance(ident, (list, dict)):
        return None
    return (type(ident).__name__, ident)


def index_tools(
    messages: Sequence[Any], columns: Columns | None = None, given: Handed | None = None
) -> ToolIndex:
    """Parse, pair and number the usable tool messages of ``messages``.

    ``columns``: ``messages``' roles and contents when read already; ``given``:
    bodies handed over from the previous prepare (``Handed``).
    """
    index = ToolIndex()
    index.extend(messages, 0, columns, given)
    return index


def output_handles(index: ToolIndex) -> list[tuple[Any, int]]:
    """Each usable tool output's id and number in ``index``, oldest first: what its
    recall handle names (docs/STRATEGIES.md, "Recall")."""
    bodies, numbers = index.bodies, index.numbers
    return [(bodies[t].id, numbers[t]) for t, call in enumerate(index.is_call) if not call]


def call_keys(bodies: Sequence[ToolBody]) -> list[bytes]:
    """The repeat-detection key of each call: its name and canonical arguments.

    Object keys are sorted at every depth; values keep their JSON type, so
    ``1``, ``1.0`` and ``true`` give three different keys. Missing or null
    arguments count as ``{}``.
    """
    return [
        _encode_sorted((body.name, _NO_ARGUMENTS if body.arguments is None else body.arguments))
        for body in bodies
    ]


def repeated_pairs(index: ToolIndex) -> dict[bytes, list[int]]:
    """Output numbers (oldest-first) of the pairs of every call key seen twice or more.

    Each list is in the order of the calls.
    """
    slots = [s for s, partner in enumerate(index.partners) if partner != -1 and index.is_call[s]]
    keys = call_keys([index.bodies[s] for s in slots])
    counts = Counter(keys)
    if len(counts) == len(keys):
        return {}
    top = index.outputs + 1
    repeated: dict[bytes, list[int]] = {}
    # not mutated: keys has one entry per slot (strict= changes nothing)
    for slot, key in zip(slots, keys, strict=True):  # pragma: no mutate
        if counts[key] > 1:
            repeated.setdefault(key, []).append(top - index.positions[slot])
    return repeated
