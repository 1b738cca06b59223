"""Which chats of this host a command reaches (pure: no I/O, no clock).

A command names its chats by one selector: ``all`` (every open session of
every host), ``host=NAME``, ``label=NAME`` (hosts carrying that label),
``session=LABEL`` (the open sessions their clients labelled so, or the one
with that id) or ``chat=GLOB`` (save files matching an
absolute glob: the open sessions' and, found on disk by the I/O shell, the
chats of no session yet). Whatever the selector, a chat outside the host's
``allowed_roots`` is never reached: the roots are the host's boundary, not
the publisher's (docs/OPERATIONS.md, "A fleet").
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from .wire import Command, SessionView, TargetError, check_pattern

__all__ = [
    "SELECTORS",
    "Identity",
    "TargetError",
    "check_pattern",
    "chats_for",
    "glob_matches",
    "normal_pattern",
    "parse_target",
    "within",
]

SELECTORS = ("all", "host", "label", "chat", "session")


class Identity(NamedTuple):
    """What a host is to the fleet: its name, its labels and the roots it serves."""

    host: str
    labels: tuple[str, ...]
    roots: tuple[str, ...]  # resolved


def parse_target(text: str) -> tuple[str, str]:
    """``all`` or ``SELECTOR=VALUE`` as (selector, value); TargetError otherwise."""
    if text == "all":
        return "all", ""
    selector, sep, value = text.partition("=")
    if not sep or selector not in SELECTORS or selector == "all" or not value:
        raise TargetError(f"target {text!r}: all, host=NAME, label=NAME, chat=GLOB or session=ID")
    if selector == "chat":
        check_pattern(value)
        value = normal_pattern(value)
    return selector, value


def normal_pattern(pattern: str) -> str:
    """An absolute chat glob without empty or ``.`` components (``/a//./b`` is ``/a/b``):
    the spelling of the paths it is matched against."""
    return "/" + "/".join(part for part in pattern.split("/") if part not in ("", "."))


def glob_matches(pattern: str, path: str) -> bool:
    """Shell-glob match of an absolute path, component by component (``*`` stops at ``/``).

    The same rule as :func:`glob.glob` applies on disk, so an open session and
    a chat found there are matched alike.
    """
    parts, names = pattern.split("/"), path.split("/")
    if len(parts) != len(names):
        return False
    return all(fnmatch.fnmatchcase(name, part) for part, name in zip(parts, names, strict=True))


def within(path: str, roots: Iterable[str]) -> bool:
    """``path`` (resolved) is one of ``roots`` or below one."""
    for root in roots:
        if root == "/" or path == root or path.startswith(root.rstrip("/") + "/"):
            return True
    return False


def _addressed(command: Command, me: Identity) -> bool:
    """The host-wide selectors: does this one reach every open session here?"""
    if command.selector == "all":
        return True
    if command.selector == "host":
        return command.value == me.host
    if command.selector == "label":
        return command.value in me.labels
    return False


def chats_for(
    command: Command,
    me: Identity,
    sessions: Sequence[SessionView],
    found: Iterable[str] = (),
    *,
    limit: int,
) -> list[str]:
    """The save files ``command`` reaches here, sorted, at most ``limit``.

    ``found``: the resolved paths the I/O shell found on disk for a ``chat``
    glob (checked here again, like the sessions' paths).
    """
    chats: set[str] = set()
    if _addressed(command, me):
        chats.update(s.save_file for s in sessions)
    elif command.selector == "session":
        chats.update(s.save_file for s in sessions if command.value in (s.label, s.id))
    elif command.selector == "chat":
        check_pattern(command.value)
        chats.update(s.save_file for s in sessions if glob_matches(command.value, s.save_file))
        chats.update(p for p in found if glob_matches(command.value, p))
    return sorted(c for c in chats if within(c, me.roots))[:limit]
