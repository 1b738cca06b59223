"""The prompt delta: a prepared prompt sent as a change of the previous one.

:class:`DeltaEncoder` (the sender) and :class:`DeltaDecoder` (the receiver)
carry each prepared prompt as "the first ``keep`` messages of the previous
prompt, then ``append``", with a CRC-32 of the kept prefix (over each
message's compact JSON, one after the other) so the receiver can check that
both sides agree on it (docs/PROTOCOL.md, incremental sessions).

Pure: no I/O, nothing from the strategies.
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
    prompt followed by ``append``; ``checksum`` is the CRC-32 of the compact
    JSON of those ``keep`` messages, one after the other.
    """

    keep: int
    append: list[Any]
    checksum: int


def _running_crcs(messages: Sequence[Any], start: int) -> list[int]:
    crcs = []
    crc = start
    for message in messages:
        crc = zlib.crc32(_encode(message), crc)
        crcs.append(crc)
    return crcs


class _Checksummed:
    """A prepared prompt with the running CRC after each of its messages."""

    def __init__(self) -> None:
        self.prompt: list[Any] = []
        self.crcs: list[int] = []

    def prefix_crc(self, keep: int) -> int:
        return self.crcs[keep - 1] if keep else 0

    def replace(self, keep: int, append: list[Any]) -> None:
        del self.prompt[keep:], self.crcs[keep:]
        self.crcs += _running_crcs(append, self.prefix_crc(keep))
        self.prompt += append


class DeltaEncoder(_Checksummed):
    """Sender side: turns each new prepared prompt into a :class:`PromptDelta`."""

    # no mutate: a default hint of 1 is checked by identity like any other, and a
    # first message that is the same object is kept by the walk below anyway
    def delta(self, prompt: list[Any], stable: int = 0) -> PromptDelta:  # pragma: no mutate
        """The delta from the previous prompt to ``prompt``.

        ``stable`` leading messages are known to be unchanged (they are not
        compared again).
        """
        previous = self.prompt
        keep = min(stable, len(previous), len(prompt))
        # A stable prefix shares its objects with the previous prompt: check every
        # one (in C, about 50 us at 4,000 messages), since a false hint would make
        # the receiver rebuild a wrong prompt under a matching checksum.
        if keep and not all(map(operator.is_, previous[:keep], prompt[:keep])):
            keep = 0
        limit = min(len(previous), len(prompt))
        while keep < limit and (previous[keep] is prompt[keep] or previous[keep] == prompt[keep]):
            keep += 1
        checksum = self.prefix_crc(keep)
        append = prompt[keep:]
        self.replace(keep, append)
        return PromptDelta(keep=keep, append=append, checksum=checksum)

    def forget(self) -> None:
        """Forget the previous prompt: the next delta carries everything."""
        self.prompt, self.crcs = [], []


class DeltaDecoder(_Checksummed):
    """Receiver side: applies deltas to the prompt it holds, checking the prefix."""

    def apply(self, delta: PromptDelta | Mapping[str, Any]) -> list[Any]:
        """The new prepared prompt. Raises :class:`DeltaMismatch` if the prefix differs."""
        if isinstance(delta, Mapping):
            delta = msgspec.convert(delta, PromptDelta)
        if delta.keep > len(self.prompt) or self.prefix_crc(delta.keep) != delta.checksum:
            raise DeltaMismatch(
                f"prompt delta does not apply: keep={delta.keep} of {len(self.prompt)} messages"
            )
        self.replace(delta.keep, list(delta.append))
        return list(self.prompt)

    def full(self, prompt: list[Any]) -> list[Any]:
        """Take a full prompt (the sender forgot the previous one)."""
        self.prompt, self.crcs = [], []
        # no mutate: replace(None, ...) slices and tests None as it does 0
        self.replace(0, list(prompt))  # pragma: no mutate
        return list(self.prompt)
