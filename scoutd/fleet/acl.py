"""The Redis ACL rules of a fleet's two roles (pure): who may publish is a security boundary.

A notice ends up in a model's prompt, so only operators may write the command
stream. A host may read it through its consumer group and acknowledge, and
write only heartbeats, session events and receipts. Redis 7 selectors (the
parenthesised rule group) give a command set per key pattern: a host's
``XADD`` is allowed on the events stream and refused on the command stream
(tests/fleet/test_acl.py runs these rules on a real server, and checks that
docs/OPERATIONS.md, "A fleet", lists them as they are here).
"""

from __future__ import annotations

from typing import Literal

from .wire import Keys

__all__ = ["ROLES", "acl_rules", "acl_setuser"]

ROLES = ("host", "operator")
Role = Literal["host", "operator"]


def acl_rules(role: Role, prefix: str) -> list[str]:
    """The ACL rules (after the user's name and password) of ``role`` for ``prefix``'s keys."""
    keys = Keys(prefix)
    if role == "host":
        return [
            "resetchannels",
            "-@all",
            f"~{keys.commands}",
            "+ping",
            "+time",
            "+xreadgroup",
            "+xack",
            "+xgroup|create",
            # one selector per key and what is done to it: a beat read and written, a
            # receipt written, an event added (no other kind of write on any of them)
            f"(~{keys.hosts} +hget +hset)",
            f"(~{keys.receipts('*')} +hset +expire)",
            f"(~{keys.events} +xadd)",
        ]
    return [
        "resetchannels",
        "-@all",
        f"~{prefix}:*",
        "+ping",
        "+time",
        "+xadd",
        "+xtrim",
        "+xlen",
        "+xrange",
        "+xrevrange",
        "+xinfo|groups",
        "+xinfo|stream",
        "+xpending",
        "+exists",
        "+hgetall",
        "+hlen",
    ]


def acl_setuser(user: str, role: Role, prefix: str, password: str) -> list[str]:
    """``ACL SETUSER`` as arguments: ``password`` is a rule, ``>secret`` or ``#<sha256 hex>``."""
    return ["ACL", "SETUSER", user, "reset", "on", password, *acl_rules(role, prefix)]
