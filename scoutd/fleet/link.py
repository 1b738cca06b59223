"""The Redis connection of a fleet host or operator (the one module importing redis-py).

TLS and passwords as Redis supports them: a ``rediss://`` URL with the CA,
certificate and key files of ``[fleet]``; the password read from
``password_file`` when connecting, never kept in the config.
redis-py's own retries are off: the fleet agent reconnects with its own
backoff and says so in ``status`` (docs/OPERATIONS.md, "A fleet").
"""

from __future__ import annotations

import time
from typing import Any

from ..config import FleetConfig
from ..errors import ConfigError

__all__ = ["BLOCK_MS", "LinkErrors", "RedisClock", "connect", "read_password", "redis_now"]

# How long one XREADGROUP waits for a new command (milliseconds): the longest a
# stopping daemon waits for its read to return, and nothing more (a new command
# wakes the read at once).
BLOCK_MS = 1000


def read_password(path: str | None) -> str | None:
    """The password in ``path`` (its first line), or None without a file."""
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.readline().rstrip("\r\n")
    except OSError as exc:
        raise ConfigError(f"cannot read [fleet] password_file {path}: {exc.strerror}") from exc


def connect(config: FleetConfig) -> Any:
    """A ``redis.asyncio.Redis`` for ``config`` (connects lazily, at its first command).

    Raises:
        ConfigError: redis-py is not installed, or the password file cannot be read.
    """
    try:
        import redis.asyncio
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff
    except ImportError as exc:
        raise ConfigError(f"[fleet] needs redis-py: pip install 'scoutd[fleet]' ({exc})") from exc

    options: dict[str, Any] = {
        "username": config.username,
        "password": read_password(config.password_file),
        "socket_connect_timeout": config.connect_timeout,
        # a blocked XREADGROUP answers within BLOCK_MS: silence past this is a dead link
        "socket_timeout": config.connect_timeout + BLOCK_MS / 1000,
        "retry": Retry(NoBackoff(), 0),
        # (redis-py's CLIENT SETINFO on connect is refused by the hosts' ACL; it ignores that)
    }
    if config.url.startswith("rediss://"):
        options.update(
            ssl_ca_certs=config.tls_ca_file,
            ssl_certfile=config.tls_cert_file,
            ssl_keyfile=config.tls_key_file,
            ssl_check_hostname=config.tls_check_hostname,
        )
    return redis.asyncio.Redis.from_url(config.url, **options)


def _errors() -> tuple[type[BaseException], ...]:
    try:
        import redis.exceptions
    except ImportError:  # connect() says so, as a ConfigError
        return (OSError, ConfigError)

    # Any Redis error, not only a lost connection: a refused password or an ACL that
    # lacks a command must not stop the daemon serving its local files either.
    return (redis.exceptions.RedisError, OSError, ConfigError)


class LinkErrors:
    """The exceptions that mean "no fleet now" (log, reconnect later), looked up lazily."""

    _cached: tuple[type[BaseException], ...] | None = None

    @classmethod
    def get(cls) -> tuple[type[BaseException], ...]:
        if cls._cached is None:
            cls._cached = _errors()
        return cls._cached


class RedisClock:
    """The Redis server's clock as this process reads it: its own clock plus the offset
    the last ``TIME`` answer measured (docs/RELIABILITY.md, rule 39).

    A fleet compares times that hosts and operators write: each on its own
    clock, a host whose clock ran behind looked silent while it beat. Every
    time a host writes is on Redis's clock instead. Until a ``TIME`` answers
    (an account without ``+time``), the offset is 0: this machine's clock.
    """

    def __init__(self) -> None:
        self.offset = 0.0

    def now(self) -> float:
        """Seconds since the epoch, on Redis's clock as last measured."""
        return time.time() + self.offset

    def note(self, answer: Any, sent: float, received: float) -> bool:
        """Take a ``TIME`` answer (``(seconds, microseconds)``) read between ``sent`` and
        ``received`` (this machine's clock); False, the offset kept, when it is an error."""
        if isinstance(answer, BaseException):
            return False
        self.offset = _seconds(answer) - (sent + received) / 2
        return True


async def redis_now(client: Any) -> float:
    """The Redis server's time (``TIME``) through ``client``; this machine's clock when
    the account may not ask (an ACL without ``+time``)."""
    from redis.exceptions import ResponseError

    try:
        return _seconds(await client.time())
    except ResponseError:  # NOPERM: an ACL from before +time
        return time.time()


def _seconds(answer: Any) -> float:
    """A ``TIME`` answer, ``(seconds, microseconds)``, in seconds."""
    seconds, micros = answer
    return float(seconds + micros / 1e6)
