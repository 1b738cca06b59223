"""What the default counts: the tokens of a text, and of each message.

The operator's tokenizer (``tokenizer = "module:attr"``), held to its contract,
or characters / ``chars_per_token``; a message is its content's count plus a
few tokens of overhead, an image, a document, a file or audio at the most its
provider bills for it, in tokens, whatever its data (:mod:`.media`). One count
for the whole-conversation replay and the session's round by round
(:mod:`.cost_rounds`), so that both plan alike.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from itertools import repeat
from operator import add, floordiv, itemgetter, truediv
from typing import Any

import msgspec

from ..config import PromptConfig
from ..errors import ConfigError
from .columns import Columns, known_columns
from .media import block_tokens, media_tokens, split_media
from .named_code import Contained, import_named
from .text import ENCODE_ERRORS, json_text

__all__ = [
    "MESSAGE_OVERHEAD_TOKENS",
    "TokenCounter",
    "load_tokenizer",
    "message_tokens",
    "token_counter",
    "tokens_and_media",
]

TokenCounter = Callable[[str], int]
# A message costs a few tokens beyond its content (role, separators).
MESSAGE_OVERHEAD_TOKENS = 4


def load_tokenizer(target: str) -> TokenCounter:
    """The callable named ``module:attribute``, its calls contained
    (:mod:`.named_code`: nothing it raises ends the daemon).

    Raises:
        ConfigError: it cannot be imported or is not callable.
    """
    label = f"tokenizer {target!r}"
    found = import_named(label, target)
    if not callable(found):
        raise ConfigError(f"{label} is not callable")
    return _Counted(label, Contained(label, found))


class _Counted:
    """An operator's tokenizer held to its contract where it returns: a count.

    What it returns goes into the plan's sums; anything but a finite number
    from 0 to 2**53 (None, a string, NaN, a negative count, an integer no
    float holds) would surface as a TypeError, ValueError or OverflowError deep
    in the plan, or, negative, silently stop every compaction.

    Raises:
        ConfigError: ``tokenizer '...' returned ..., expected a count``.
    """

    def __init__(self, label: str, count: Callable[[str], Any]) -> None:
        self.label = label
        self.count = count
        functools.update_wrapper(self, count)  # its name, for reports

    def __call__(self, text: str) -> int:
        tokens = self.count(text)
        kind = type(tokens)
        if (kind is int or kind is float) and 0 <= tokens <= _MOST_TOKENS:
            return tokens  # type: ignore[no-any-return]  # an int, or a float tokens count
        # repr of an integer past 4,300 digits raises: its size is shown instead
        shown = repr(tokens)[:40] if kind is float or (kind is int and tokens < 2**128) else kind
        raise ConfigError(f"{self.label} returned {shown}, expected a count (0 or more)")


_MOST_TOKENS = 2**53  # a count every float holds exactly


class _CharEstimate:
    """Tokens estimated as characters / ``chars_per_token``, rounded up."""

    def __init__(self, chars_per_token: float) -> None:
        self.chars_per_token = chars_per_token

    def __call__(self, text: str) -> int:
        return math.ceil(len(text) / self.chars_per_token)


def token_counter(config: PromptConfig) -> TokenCounter:
    """Counts a text's tokens: the configured tokenizer, else characters / ``chars_per_token``."""
    if config.tokenizer:
        return load_tokenizer(config.tokenizer)
    return _CharEstimate(config.chars_per_token)


def _tokens(message: Any, count: TokenCounter) -> int:
    """A message's content tokens: its text's count, and what its media count apart
    (.media: by what the provider bills, not by their data)."""
    content = message.get("content") if isinstance(message, dict) else message
    if type(content) is str:
        return count(content)
    if content is None:
        return count("")
    counted, media = split_media(content)  # each media block an empty text, counted apart
    try:
        text = msgspec.json.encode(counted).decode()
    except ENCODE_ERRORS:  # a lone surrogate, a key that is not a string, another object
        text = json_text(counted)
    return count(text) + sum(block_tokens(block, count) for block in media)


_get_content = itemgetter("content")


# Characters per token by which a length divides exactly (a power of two): then
# ceil(length / step) + overhead == (length + step - 1 + step * overhead) // step.
_EXACT_STEPS = frozenset((1.0, 2.0, 4.0, 8.0))


def message_tokens(
    messages: Sequence[Any], count: TokenCounter, shared: Columns | None = None
) -> list[int]:
    """Tokens of each message, a tool output's media while whole included (.media)."""
    return tokens_and_media(messages, count, shared)[0]


def tokens_and_media(
    messages: Sequence[Any], count: TokenCounter, shared: Columns | None = None
) -> tuple[list[int], list[tuple[int, int]]]:
    """:func:`message_tokens`, and the ``(position, tokens)`` its media added to each
    message that holds some (:func:`~.media.media_tokens`)."""
    tokens = _content_tokens(messages, count, shared)
    media = media_tokens(messages, count)
    for position, added in media:
        tokens[position] += added
    return tokens, media


def _content_tokens(
    messages: Sequence[Any], count: TokenCounter, shared: Columns | None = None
) -> list[int]:
    """Tokens of each message: its content's count plus the per-message overhead.

    ``shared``: ``messages``' columns when read already (the estimate reads the
    lengths); a tokenizer is code of its own, so its caller reads the messages
    afresh after it (:func:`shorten_tools_cost_aware`).
    """
    overhead = MESSAGE_OVERHEAD_TOKENS
    if type(count) is _CharEstimate:
        columns = known_columns(messages, shared)
        if columns is not None and columns.lengths is not None:  # the estimate below, from
            # the lengths read once for this prepare
            step = count.chars_per_token
            if step in _EXACT_STEPS:  # length / step is exact: the same count in integers
                whole_step = int(step)
                shifted = map(add, columns.lengths, repeat(whole_step - 1 + whole_step * overhead))
                return list(map(floordiv, shifted, repeat(whole_step)))
            per_length = map(truediv, columns.lengths, repeat(step))
            return list(map(add, map(math.ceil, per_length), repeat(overhead)))
    # A fast path. Not mutated: its mutants either raise inside the `try` or
    # leave the fast path, and the general count below gives the same counts;
    # a `per_token` of None, or the `is not None` reversed, calls the estimate
    # per message (the same counts), and a tokenizer's None fails the division
    # inside the `try`. (Dropping getattr's default would fail a tokenizer.)
    try:
        contents = list(map(_get_content, messages))  # pragma: no mutate
        if set(map(type, contents)) <= {str}:  # pragma: no mutate
            per_token = getattr(count, "chars_per_token", None)  # pragma: no mutate
            if per_token is not None:  # pragma: no mutate (the estimate: no call per message)
                # Not mutated: every mutant of these two statements (a None
                # function, iterable or operand, a dropped argument) raises
                # TypeError in the `list` inside the `try`, or yields nothing on
                # no messages, and the general count gives the same counts.
                # pragma: no mutate start
                estimates = map(math.ceil, map(truediv, map(len, contents), repeat(per_token)))
                return list(map(add, estimates, repeat(overhead)))
                # pragma: no mutate end
            return [count(text) + overhead for text in contents]
    except (KeyError, TypeError, IndexError):
        pass  # a message that is not a mapping, or without a string content
    return [_tokens(m, count) + overhead for m in messages]
