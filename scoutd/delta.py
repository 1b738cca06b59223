"""The prompt delta: a prepared prompt sent as a change of the previous one.

:class:`DeltaEncoder` (the sender) and :class:`DeltaDecoder` (the receiver)
carry each prepared prompt as "the first ``keep`` messages of the previous
prompt, then ``append``" (docs/PROTOCOL.md, incremental sessions). Two forms:

* the running form: ``checksum`` is the CRC-32 of the kept prefix (over each
  message's compact JSON, one after the other);
* the replacing form (``replace`` is a list, maybe empty): some of the kept
  messages are replaced by index, so that a change early in the prompt (a
  notice, a protected call that moved) does not resend the whole tail;
  ``checksum`` is then the CRC-32 of the kept messages' own CRC-32s, each as 4
  bytes little-endian, which stays cheap to keep when a single message changes.

Either way the receiver checks that both sides agree on the kept prefix before
applying anything. Pure: no I/O, nothing from the strategies.
"""

from __future__ import annotations

import operator
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from .errors import DeltaMismatch

__all__ = ["DeltaDecoder", "DeltaEncoder", "DeltaMismatch", "PromptDelta"]

_encode = msgspec.json.Encoder().encode


class PromptDelta(msgspec.Struct, kw_only=True):
    """The prepared prompt as a change of the previous one.

    The new prompt is the first ``keep`` messages of the previous prepared
    prompt, with each ``(index, message)`` of ``replace`` put at its index
    (every index below ``keep``), followed by ``append``. ``replace`` None is
    the running form (see the module).
    """

    keep: int
    append: list[Any]
    checksum: int
    replace: list[tuple[int, Any]] | None = None


def _running_crcs(messages: Sequence[Any], start: int) -> list[int]:
    crcs = []
    crc = start
    for message in messages:
        crc = zlib.crc32(_encode(message), crc)
        crcs.append(crc)
    return crcs


def _packed_crcs(messages: Sequence[Any]) -> bytes:
    """Each message's own CRC-32, 4 bytes little-endian each, one after the other."""
    return b"".join(zlib.crc32(_encode(message)).to_bytes(4, "little") for message in messages)


class _Checksummed:
    """A prepared prompt with what its checksums need: the running CRC after
    each message (running form) or each message's own CRC (replacing form)."""

    def __init__(self, replacing: bool = False) -> None:
        self.replacing = replacing
        self.prompt: list[Any] = []
        self.crcs: list[int] = []
        self.packed = bytearray()

    def prefix_crc(self, keep: int) -> int:
        if self.replacing:
            return zlib.crc32(self.packed[: 4 * keep]) if keep else 0
        return self.crcs[keep - 1] if keep else 0

    def take(self, keep: int, append: list[Any]) -> None:
        """Keep the first ``keep`` messages, then ``append``."""
        del self.prompt[keep:]
        if self.replacing:
            del self.packed[4 * keep :]
            self.packed += _packed_crcs(append)
        else:
            del self.crcs[keep:]
            self.crcs += _running_crcs(append, self.prefix_crc(keep))
        self.prompt += append

    def put(self, index: int, message: Any) -> None:
        """Replace one message (replacing form only)."""
        self.prompt[index] = message
        self.packed[4 * index : 4 * index + 4] = zlib.crc32(_encode(message)).to_bytes(4, "little")

    def reset(self, replacing: bool) -> None:
        self.replacing = replacing
        self.prompt, self.crcs, self.packed = [], [], bytearray()


def _same(a: Any, b: Any) -> bool:
    """Whether two messages are sent as the same JSON. ``==`` alone is not enough: it
    takes 1, 1.0 and True for one another, and two dicts in another key order, whose
    JSON differs, so the receiver would rebuild a prompt that is not the one prepared."""
    return a is b or (a == b and _encode(a) == _encode(b))


def _changed(previous: list[Any], prompt: list[Any], start: int, end: int) -> list[int]:
    """The indices in ``[start, end)`` where the two prompts differ.

    Identity first, in C; only the messages that are not the very same objects
    are compared by value (the engine hands back the same objects for what it
    did not touch).
    """
    same = list(map(operator.is_, previous[start:end], prompt[start:end]))
    changed: list[int] = []
    at = 0
    while True:
        try:
            at = same.index(False, at)
        except ValueError:
            return changed
        if not _same(previous[start + at], prompt[start + at]):
            changed.append(start + at)
        at += 1


class DeltaEncoder(_Checksummed):
    """Sender side: turns each new prepared prompt into a :class:`PromptDelta`.

    ``writer``: who last set the conversation these prompts are prepared from
    (the daemon's connection); set and read by the caller, None for nobody yet.
    """

    def __init__(self, replacing: bool = False) -> None:
        super().__init__(replacing)
        self.writer: object = None
        self._whole: list[Any] | None = None  # the previous prompt, sent whole

    def delta(self, prompt: list[Any], stable: int = 0, *, replace: bool = False) -> PromptDelta:
        """The delta from the previous prompt to ``prompt``.

        ``stable`` leading messages are known to be unchanged (they are not
        compared again). ``replace``: the replacing form; asking for the
        other form than the previous call starts over (``keep`` 0), unless the
        previous prompt went whole (:meth:`sent_whole`).
        """
        whole, self._whole = self._whole, None
        if whole is not None:
            self.reset(replace)
            self.take(0, whole)
        elif replace != self.replacing:
            self.reset(replace)
        previous = self.prompt
        keep = min(stable, len(previous), len(prompt))
        # A stable prefix shares its objects with the previous prompt: check every
        # one (in C, about 50 us at 4,000 messages), since a false hint would make
        # the receiver rebuild a wrong prompt under a matching checksum.
        if keep and not all(map(operator.is_, previous[:keep], prompt[:keep])):
            keep = 0
        limit = min(len(previous), len(prompt))
        if not replace:
            while keep < limit and _same(previous[keep], prompt[keep]):
                keep += 1
            checksum = self.prefix_crc(keep)
            append = prompt[keep:]
            self.take(keep, append)
            return PromptDelta(keep=keep, append=append, checksum=checksum)
        changed = _changed(previous, prompt, keep, limit)
        keep = limit
        while changed and changed[-1] == keep - 1:  # a changed end goes in `append`
            changed.pop()
            keep -= 1
        checksum = self.prefix_crc(keep)
        replaced = [(index, prompt[index]) for index in changed]
        for index, message in replaced:
            self.put(index, message)
        append = prompt[keep:]
        self.take(keep, append)
        return PromptDelta(keep=keep, append=append, checksum=checksum, replace=replaced)

    def forget(self) -> None:
        """Forget the previous prompt: the next delta carries everything."""
        self.reset(self.replacing)
        self._whole = None

    def sent_whole(self, prompt: list[Any]) -> None:
        """``prompt`` went out whole (not as a delta): the receiver holds it, so the
        next delta is of it, in the form that one asks for. Its checksums are made
        then, if one is ever asked for (a caller that never asks pays nothing)."""
        self.forget()
        self._whole = prompt


class DeltaDecoder(_Checksummed):
    """Receiver side: applies deltas to the prompt it holds, checking the prefix.

    ``replacing``: the form the sender was asked for (see the module).
    """

    def apply(self, delta: PromptDelta | Mapping[str, Any]) -> list[Any]:
        """The new prepared prompt. Raises :class:`DeltaMismatch` if the prefix differs
        (or the delta is not in the form this decoder holds checksums for)."""
        if isinstance(delta, Mapping):
            delta = msgspec.convert(delta, PromptDelta)
        keep = delta.keep
        if (
            (delta.replace is not None) != self.replacing
            or not 0 <= keep <= len(self.prompt)  # a negative one would index from the end
            or self.prefix_crc(keep) != delta.checksum
            or not all(0 <= index < keep for index, _ in delta.replace or ())
        ):
            raise DeltaMismatch(
                f"prompt delta does not apply: keep={keep} of {len(self.prompt)} messages"
            )
        for index, message in delta.replace or ():
            self.put(index, message)
        self.take(keep, list(delta.append))
        return list(self.prompt)

    def full(self, prompt: list[Any]) -> list[Any]:
        """Take a full prompt (the sender forgot the previous one)."""
        self.reset(self.replacing)
        self.take(0, list(prompt))
        return list(self.prompt)
