"""The LiteLLM proxy hook's options, read from the proxy's environment (docs/INTEGRATIONS.md).

Apart from :mod:`scoutd.integrations.litellm` so that they can be read and
checked without LiteLLM installed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import msgspec

__all__ = ["DEFAULT_MAX_BYTES", "MAX_CHATS_LIMIT", "ProxySettings"]

# Bounds of the chats kept between requests: each holds a conversation's
# incremental state (or a daemon session), evicted least recently used first.
MAX_CHATS_LIMIT = 10_000
# ... and the memory their conversations hold together (engine.held's count): by
# default half of what one uid's sessions may hold in the daemon.
DEFAULT_MAX_BYTES = 1 << 30
MIN_BYTES, MAX_BYTES_LIMIT = 1 << 20, 1 << 44


class ProxySettings(msgspec.Struct, frozen=True, kw_only=True):
    """The hook's options; :meth:`from_env` reads them from the proxy's environment.

    Attributes:
        roots: directories under which a request's ``x-scoutd-chat`` may name a
            save file (``SCOUTD_LITELLM_ROOTS``, separated by ``:``); none: a
            request that names a chat is refused. With ``team_roots``, those of
            the keys whose team is not listed there.
        team_roots: the roots of each LiteLLM team, by team id
            (``SCOUTD_LITELLM_TEAM_ROOTS``, a JSON object of lists): a request
            whose key belongs to a listed team may name only a chat under its
            team's roots. The team is the one LiteLLM's authentication gives the
            key, never one the request names.
        socket: the daemon's socket path, ``True`` for the default one, ``None``
            to prepare in the proxy's process (``SCOUTD_LITELLM_SOCKET``; the
            value ``default`` means ``True``).
        config: ``[prompt]`` overrides for every request (``SCOUTD_LITELLM_CONFIG``,
            a JSON object).
        max_chats: chats whose session is kept between requests
            (``SCOUTD_LITELLM_MAX_CHATS``).
        max_bytes: the memory the kept chats' conversations may hold together, in
            bytes, counted as the daemon counts its sessions
            (``SCOUTD_LITELLM_MAX_BYTES``; :mod:`._chat_cache`).
        timeout: seconds allowed for each daemon answer.
        passthrough: serve LiteLLM's passthrough routes (``/anthropic/...``,
            ``/openai/...``) although chats are supervised (:attr:`supervised`): their
            requests reach the hook without headers, so no chat's abort can be
            checked there (``SCOUTD_LITELLM_PASSTHROUGH=allow``). Off: refused.
    """

    roots: tuple[str, ...] = ()
    team_roots: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)
    socket: str | bool | None = None
    config: dict[str, Any] | None = None
    max_chats: int = 256
    max_bytes: int = DEFAULT_MAX_BYTES
    timeout: float = 60.0
    passthrough: bool = False

    def __post_init__(self) -> None:
        if not 1 <= self.max_chats <= MAX_CHATS_LIMIT:
            raise ValueError(f"max_chats must be within 1..{MAX_CHATS_LIMIT}: {self.max_chats}")
        if not MIN_BYTES <= self.max_bytes <= MAX_BYTES_LIMIT:
            raise ValueError(
                f"max_bytes must be within {MIN_BYTES}..{MAX_BYTES_LIMIT}: {self.max_bytes}"
            )
        if not self.timeout > 0:
            raise ValueError(f"timeout must be positive: {self.timeout}")

    @property
    def supervised(self) -> bool:
        """Whether requests may name chats at all (some roots are configured)."""
        return bool(self.roots or self.team_roots)

    def roots_of(self, team: object) -> tuple[str, ...]:
        """The roots a request of a key in LiteLLM team ``team`` may name chats under."""
        if isinstance(team, str) and team in self.team_roots:
            return self.team_roots[team]
        return self.roots

    @property
    def every_root(self) -> tuple[str, ...]:
        """Every root the proxy serves, whoever's."""
        return tuple(
            dict.fromkeys([*self.roots, *(r for t in self.team_roots.values() for r in t)])
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> ProxySettings:
        """The settings named by ``SCOUTD_LITELLM_*`` variables (defaults otherwise)."""
        roots = tuple(r for r in environ.get("SCOUTD_LITELLM_ROOTS", "").split(":") if r)
        socket: str | bool | None = environ.get("SCOUTD_LITELLM_SOCKET") or None
        if socket == "default":
            socket = True
        raw = environ.get("SCOUTD_LITELLM_CONFIG")
        config = json.loads(raw) if raw else None
        if config is not None and not isinstance(config, dict):
            raise ValueError(f"SCOUTD_LITELLM_CONFIG must be a JSON object: {raw}")
        raw = environ.get("SCOUTD_LITELLM_TEAM_ROOTS")
        try:
            teams = msgspec.json.decode(raw, type=dict[str, list[str]]) if raw else {}
        except msgspec.DecodeError as exc:
            raise ValueError(
                f"SCOUTD_LITELLM_TEAM_ROOTS must be a JSON object of lists of directories: {exc}"
            ) from None
        max_chats = int(environ.get("SCOUTD_LITELLM_MAX_CHATS", "256"))
        max_bytes = int(environ.get("SCOUTD_LITELLM_MAX_BYTES", str(DEFAULT_MAX_BYTES)))
        passthrough = environ.get("SCOUTD_LITELLM_PASSTHROUGH", "")
        if passthrough not in ("", "allow"):
            raise ValueError(f"SCOUTD_LITELLM_PASSTHROUGH must be 'allow' or unset: {passthrough}")
        team_roots = {team: tuple(r for r in found if r) for team, found in teams.items()}
        for root in (*roots, *(r for found in team_roots.values() for r in found)):
            if "\0" in root or not os.path.isabs(root):  # else no chat would ever be served
                raise ValueError(
                    f"SCOUTD_LITELLM_ROOTS / SCOUTD_LITELLM_TEAM_ROOTS entry {root!r} is not"
                    " an absolute path (a root is never expanded: write ~ out)"
                )
        return cls(
            roots=roots,
            team_roots=team_roots,
            socket=socket,
            config=config,
            max_chats=max_chats,
            max_bytes=max_bytes,
            passthrough=passthrough == "allow",
        )
