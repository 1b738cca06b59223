"""What a configuration may hold and who may set it (docs/RELIABILITY.md).

Two rules, one per half of this module. Every ``[prompt]`` key has an access
class in :data:`PROMPT_ACCESS`, which :func:`scoutd.config.with_overrides`
enforces on every per-call override; and every number of a configuration is
bounded (its msgspec ``Meta``), which :func:`check_numbers` also enforces on a
Struct built in code, where msgspec does not look.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final, Literal

import msgspec
import msgspec.inspect

__all__ = ["PROMPT_ACCESS", "Access", "access_of", "check_numbers"]

# Who may set each [prompt] key (docs/RELIABILITY.md, "What a client may configure"):
#   client    any value within the key's bounds, per call (the library's config=
#             mapping, a request's "config", --set), besides the operator's file;
#   tighten   per call only at or below the operator's value: a limit of what one
#             call reads or returns;
#   operator  the config file or the environment only: its value names code to
#             import and run, which nothing a client sends may do.
# A strategy name (prompt_strategies, a request's "strategies") is a client key:
# it selects among code the operator installed (built-ins, entry points, the
# [plugins] table) and never names a module itself. Every PromptConfig field is
# classified (tests/test_overrides.py); one left out counts as operator-only.
Access = Literal["client", "tighten", "operator"]
PROMPT_ACCESS: Final[Mapping[str, Access]] = MappingProxyType(
    {
        "prompt_strategies": "client",
        "compaction_notice": "client",
        "full_tool_calls": "client",
        "full_tool_outputs": "client",
        "max_tool_calls": "client",
        "max_tool_outputs": "client",
        "max_tool_chars": "client",
        "epoch_tool_call_threshold": "client",
        "epoch_full_tool_calls": "client",
        "epoch_compacted_tool_calls": "client",
        "epoch_size": "client",
        "epoch_increment_epochs_per_increase": "client",
        "epoch_increment_size_increase": "client",
        "epoch_increment_repeat_increase": "client",
        "epoch_increment_max_size": "client",
        "epoch_increment_compacted_growth_ratio": "client",
        "epoch_increment_max_compacted_tool_calls": "client",
        "context_window": "client",
        "compaction_trigger_share": "client",
        "compaction_limit_share": "client",
        "expected_horizon": "client",
        "compaction_risk_share": "client",
        "cost_verbatim_value": "client",
        "cache_pricing": "client",
        "cache_write_price": "client",
        "cache_read_price": "client",
        "chars_per_token": "client",
        "tokenizer": "operator",
        "cost_full_tool_outputs": "client",
        "cost_full_share": "client",
        "cost_full_share_cap": "client",
        "cost_compacted_tool_calls": "client",
        "cost_keep_share": "client",
        # the retention walks this many pairs at each weighed round: work, so only lowered
        "cost_keep_lookback": "tighten",
        "inbox_max_bytes": "tighten",
        "inbox_max_total_bytes": "tighten",
        "cache_control": "client",
        "recall": "client",
    }
)


def access_of(key: str) -> Access:
    """Who may set ``key``; a key missing from the table is the operator's (fail closed)."""
    return PROMPT_ACCESS.get(key, "operator")


def _number_type(annotation: msgspec.inspect.Type) -> msgspec.inspect.Type | None:
    """The int or float type of a field (inside ``X | None``), or None."""
    if isinstance(annotation, msgspec.inspect.UnionType):
        found = [t for t in annotation.types if _number_type(t) is not None]
        return found[0] if found else None
    if isinstance(annotation, (msgspec.inspect.IntType, msgspec.inspect.FloatType)):
        return annotation
    return None


Bounds = tuple[str, Any, Any, Any, Any]  # name, ge, gt, le, lt (None: no such bound)


# A pure memo of a pure function: a Struct class's annotations never change after
# import, so what it remembers can be observed by no one (docs/ARCHITECTURE.md)
@functools.cache
def _number_fields(struct: type[msgspec.Struct]) -> tuple[Bounds, ...]:
    """The bounds of each numeric field of ``struct``, as its annotations declare them."""
    info = msgspec.inspect.type_info(struct)
    assert isinstance(info, msgspec.inspect.StructType)
    found: list[Bounds] = []
    for field in info.fields:
        kind = _number_type(field.type)
        if isinstance(kind, (msgspec.inspect.IntType, msgspec.inspect.FloatType)):
            found.append((field.name, kind.ge, kind.gt, kind.le, kind.lt))
    return tuple(found)


def _shown(value: int | float) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} digits)"


def check_numbers(struct: msgspec.Struct) -> None:
    """Hold a Struct built in code to the bounds its fields declare.

    msgspec checks those bounds when it decodes or converts, not when code
    calls the constructor: this makes a ``PromptConfig(...)`` of the library
    refuse what a file, a variable or an override is refused (ValueError).
    """
    for name, ge, gt, le, lt in _number_fields(type(struct)):
        value = getattr(struct, name)
        if type(value) is float:
            if not math.isfinite(value):
                raise ValueError(f"{name} must be finite")
        elif type(value) is not int:
            continue  # None where allowed; a wrong type is not a bound's business
        if (
            (ge is not None and value < ge)
            or (gt is not None and value <= gt)
            or (le is not None and value > le)
            or (lt is not None and value >= lt)
        ):
            signs = ((">=", ge), (">", gt), ("<=", le), ("<", lt))
            bounds = " and ".join(f"{sign} {bound}" for sign, bound in signs if bound is not None)
            raise ValueError(f"{name} = {_shown(value)} is out of bounds ({bounds})")
