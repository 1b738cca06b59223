"""What a configuration may hold and who may set it (docs/RELIABILITY.md).

Three rules. Every ``[prompt]`` key has an access class in
:data:`PROMPT_ACCESS`, which :func:`scoutd.config.with_overrides` enforces on
every per-call override; every number of a configuration is bounded (its
msgspec ``Meta``), which :func:`check_numbers` also enforces on a Struct built
in code, where msgspec does not look; and the config file itself is read only
as a bounded regular file (:func:`scoutd.config_paths.read_config_bytes`), and
by the daemon only when no one but root and the daemon's own user may change
it (:func:`untrusted_writer`): whoever writes it names code and access.
"""

from __future__ import annotations

import functools
import grp
import math
import os
import stat
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, Literal

import msgspec
import msgspec.inspect

from .errors import ConfigError
from .paths import printable

__all__ = [
    "PROMPT_ACCESS",
    "Access",
    "access_of",
    "check_numbers",
    "check_text",
    "not_text",
    "untrusted_writer",
    "validated_layer",
    "where",
]

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


def not_text(value: object) -> str | None:
    """The first string in ``value`` (itself, or inside its lists and mappings, keys
    too) that is no UTF-8 text, or None. A lone surrogate is what an undecodable
    byte of the environment or of the command line becomes: msgspec cannot even
    name it in an error, and no prompt may carry it."""
    pending = [value]
    while pending:  # a loop, not recursion: a client's value may nest deeply
        item = pending.pop()
        if isinstance(item, str):
            try:
                item.encode()  # UTF-8
            except UnicodeEncodeError:
                return item
        elif isinstance(item, Mapping):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, Sequence) and not isinstance(item, (bytes, bytearray)):
            pending.extend(item)
    return None


def check_text(layer: Mapping[str, Any], table: str, source: str) -> None:
    """Refuse a layer holding a string that is no UTF-8 text (:func:`not_text`):
    ConfigError naming the source, the table and the string, instead of the
    UnicodeEncodeError that validating or sending it would raise."""
    bad = not_text(layer)
    if bad is not None:
        raise ConfigError(
            f"invalid configuration in {source}, table [{table}]:"
            f" '{printable(bad)}' is not UTF-8 text"
        )


def where(error: msgspec.ValidationError, table: str) -> str:
    """msgspec's error with its ``$`` root named as the table (a key of the file when '').
    An error at the root itself names no path (``Expected `object`, got `int```)."""
    inside = f"`{table}." if table else "`"
    # printable: a key's name is the file's (or the client's), and may hold a newline
    return printable(str(error).replace("`$.", inside))


def validated_layer(
    layer: Mapping[str, Any], struct: type[msgspec.Struct], table: str, source: str
) -> dict[str, Any]:
    """Validate a partial table and return the keys it sets, converted (ConfigError
    naming the source, the table and the key otherwise)."""
    if not layer:
        return {}
    check_text(layer, table, source)
    try:
        converted = msgspec.convert(dict(layer), struct)
    except msgspec.ValidationError as exc:
        raise ConfigError(
            f"invalid configuration in {source}, table [{table}]: {where(exc, table)}"
        ) from exc
    return {key: getattr(converted, key) for key in layer}


def _group_trusted(gid: int) -> bool:
    """Whether members of ``gid`` are root or the daemon's user alone: root's group,
    or (for a daemon not run by root) its own group when no one else is named in it."""
    if gid == 0:
        return True
    if os.geteuid() == 0 or gid != os.getegid():
        return False
    try:
        return not grp.getgrgid(gid).gr_mem
    except KeyError:
        return True


def _writable_by_others(entry: os.stat_result) -> str | None:
    """Why others than root and the daemon's user may change ``entry``, or None."""
    if entry.st_uid not in (0, os.geteuid()):
        return f"owned by uid {entry.st_uid}"
    if stat.S_ISLNK(entry.st_mode):
        return None  # a link's own mode means nothing; its owner and directory do
    sticky = stat.S_ISDIR(entry.st_mode) and entry.st_mode & stat.S_ISVTX
    if entry.st_mode & 0o002 and not sticky:
        return "writable by every user"
    if entry.st_mode & 0o020 and not sticky and not _group_trusted(entry.st_gid):
        return f"writable by group {entry.st_gid}"
    return None


def untrusted_writer(path: str) -> str | None:
    """Why someone other than root or the daemon's user could change the config file
    at ``path`` (None: no one can).

    Its contents name code (``[plugins]``, ``tokenizer``) and who may connect, so a
    daemon reads it only when no one else can write it, nor any directory above it
    (a sticky directory such as /tmp protects the entries of others), nor swap a
    symbolic link on the way: the path as given and the path it resolves to, each
    directory from ``/`` down (as sshd's StrictModes does for its keys).
    """
    given = os.path.abspath(path)
    real = os.path.realpath(path)
    seen: set[str] = set()
    for name in (given, real):
        parts = name.split(os.sep)[1:]
        # not mutated: a depth past the last gives the whole path again, which is seen
        for depth in range(len(parts) + 1):  # pragma: no mutate
            entry = os.sep + os.sep.join(parts[:depth])
            if entry in seen:
                continue
            # not mutated: forgetting an entry only looks at it again
            seen.add(entry)  # pragma: no mutate
            try:
                found = os.lstat(entry)
            except OSError:
                # gone meanwhile: reading it fails on its own. Not mutated: the entries
                # below a missing one are missing too, so a break ends the walk the same
                continue  # pragma: no mutate
            why = _writable_by_others(found)
            if why is not None:
                return f"{printable(entry)} is {why}"
    return None
