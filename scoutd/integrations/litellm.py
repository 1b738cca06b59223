"""scoutd in front of every model call of a LiteLLM proxy (docs/INTEGRATIONS.md).

Two lines of the proxy's ``config.yaml``::

    litellm_settings:
      callbacks: scoutd.integrations.litellm.proxy_handler

Before the proxy forwards a request, its pre-call hook prepares the request's
conversation with scoutd: ``messages`` on the OpenAI-compatible route
(``/v1/chat/completions``) and the Anthropic-compatible one (``/v1/messages``,
whose ``system`` passes through), ``input`` on the Responses route
(``/v1/responses``; an ``input`` string is one user item). Any agent that
takes a base URL gets compaction, notices and aborts without a code change.

A request names its chat with the header ``x-scoutd-chat: <save file>``
(the path's bytes), which must lie under the roots the operator configured
(``SCOUTD_LITELLM_ROOTS``, or the key's LiteLLM team's,
``SCOUTD_LITELLM_TEAM_ROOTS``), in a directory that exists: the chat's inbox
beside it brings notices and aborts, and each conversation of the chat (an
agent's, its sub-agents') keeps one incremental session from request to
request, in a bounded LRU of this process (or a daemon session with
``SCOUTD_LITELLM_SOCKET``; :mod:`._litellm_routes`). Without the header a request
is only compacted: no inbox, no state. An abort answers the agent with HTTP
403, a non-retryable error saying that the operator aborted the chat, and the
chat stays aborted (its marker, docs/RELIABILITY.md) until an operator runs
``scoutd clear``. An abort that exists always aborts: a request that names the
chat is checked whatever its route and body, with a conversation to prepare
or not (a completion, an embedding, an empty ``input``), and again before each
further attempt the proxy's router makes of it (a retry, a fallback model).

Needs the extra ``scoutd[litellm]``.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, TypeVar

import anyio.to_thread

from ..client import Client, default_socket_path
from ..client._common import wire_path
from ..errors import Aborted, Forbidden, InvalidMessages, RemoteError
from ..formats import ANTHROPIC, AUTO, OPENAI_CHAT, OPENAI_RESPONSES
from ..paths import display_path
from ..protocol.messages import INVALID_PARAMS, TOO_LARGE
from ..protocol.report import Prepared
from ..security import check_save_file, resolve_roots
from ._chat_cache import Chat, ChatCache, detached
from ._litellm_paths import unreachable
from ._litellm_routes import Routes, format_of
from ._proxy_settings import ProxySettings
from ._run import HookClosed, RunPreparer, missing_extra, round_summary

try:
    from fastapi import HTTPException
    from litellm.integrations.custom_logger import CustomLogger
except ImportError as exc:  # pragma: no cover - exercised by a subprocess test
    raise missing_extra(__name__, "litellm", exc) from None

__all__ = ["CHAT_HEADER", "ProxySettings", "ScoutdProxyHook", "proxy_handler"]

log = logging.getLogger(__name__)

CHAT_HEADER = "x-scoutd-chat"
# The status of an abort. Not 408/409/429/5xx: the OpenAI and Anthropic SDKs (and
# the agents built on them) retry those, and an aborted agent must stop, not loop.
# 403 says "refused by policy" and is surfaced as it is.
ABORT_STATUS = 403
# The request's conversation for each LiteLLM call type: its format and its key.
ROUTES: Mapping[str, tuple[str, str]] = {
    "completion": (OPENAI_CHAT, "messages"),
    "acompletion": (OPENAI_CHAT, "messages"),
    "anthropic_messages": (ANTHROPIC, "messages"),
    "aanthropic_messages": (ANTHROPIC, "messages"),
    "responses": (OPENAI_RESPONSES, "input"),
    "aresponses": (OPENAI_RESPONSES, "input"),
}
# The daemon's bounds (TOO_LARGE, the key in its data) that one request's conversation
# passes by itself: sent again it passes them again, unlike the bounds of a uid's or
# all sessions together (``max_session_bytes_per_uid``, ...), which another time may not.
OWN_BOUNDS = frozenset(("max_request_bytes", "max_session_messages", "max_session_bytes"))
# Rounds a request tries when other requests evict its chat's session meanwhile.
_TRIES = 3
# Connections to the daemon that the kept chats share (daemon_clients).
DAEMON_CONNECTIONS = 4

_T = TypeVar("_T")


# The call type of LiteLLM's passthrough routes (``/anthropic/...``, ``/openai/...``).
PASSTHROUGH = "pass_through_endpoint"


def api_error(status: int, message: str, kind: str) -> HTTPException:
    """An error the proxy answers in the route's own format (OpenAI or Anthropic)."""
    return HTTPException(status_code=status, detail={"error": {"message": message, "type": kind}})


def aborted_error(reason: str, chat: str) -> HTTPException:
    """The answer to a request of an aborted chat: clear, final, not retryable."""
    return api_error(
        ABORT_STATUS,
        f"aborted by the operator: {reason} (scoutd: the chat {chat} stays aborted "
        f"until an operator runs: scoutd clear {chat})",
        "scoutd_aborted",
    )


def client_error(exc: InvalidMessages | RemoteError) -> HTTPException | None:
    """The 400 for a conversation that breaks the message rule (docs/PROTOCOL.md,
    "Messages"), in process or as the daemon's ``INVALID_PARAMS`` about it; the 413
    for one larger than a bound of the daemon's on a request or a session
    (:data:`OWN_BOUNDS`); else None.

    The request is the client's error, not the proxy's: a 500 says otherwise, and
    the OpenAI and Anthropic SDKs retry it, sending the same conversation again.
    """
    if isinstance(exc, RemoteError) and exc.code == TOO_LARGE:
        key = exc.data.get("key") if isinstance(exc.data, dict) else None
        if key not in OWN_BOUNDS:
            return None  # the bounds of all sessions together: another time may do
        message = f"scoutd cannot take the request's conversation: {exc.message}"
        return api_error(413, message, "request_too_large")
    data = exc.data if isinstance(exc, RemoteError) and isinstance(exc.data, dict) else {}
    path = data.get("path")
    about_messages = isinstance(path, str) and path.startswith(
        ("$.params.messages", "$.params.append")
    )
    if isinstance(exc, RemoteError) and not (exc.code == INVALID_PARAMS and about_messages):
        return None
    message = f"scoutd refused the request's conversation: {exc}"
    return api_error(400, message, "invalid_request_error")


def chat_header(data: Mapping[str, Any]) -> str | None:
    """The ``x-scoutd-chat`` header of the request, if any, as the path its bytes name.

    A header carries bytes (curl sends a path's UTF-8); Starlette decodes each as
    latin-1, which made ``josé-run.chat`` the chat ``josÃ©-run.chat``, with no
    inbox. The bytes are recovered and decoded as a path (``os.fsdecode``), so
    bytes that are not UTF-8 name their own file too. A value with characters
    beyond latin-1 never came from the wire as such: it is taken as it is. An
    empty value is returned too, and refused: a client's unset variable, not no chat.
    """
    request = data.get("proxy_server_request")
    headers = request.get("headers") if isinstance(request, Mapping) else None
    if not isinstance(headers, Mapping):
        return None
    for name, value in headers.items():
        if isinstance(name, str) and name.lower() == CHAT_HEADER:
            text = str(value)
            try:
                return os.fsdecode(text.encode("latin-1"))
            except UnicodeEncodeError:
                return text
    return None


class Conversation(NamedTuple):
    """A request's conversation: its format, its key in the body, its messages."""

    format: str
    key: str
    messages: list[Any]


def conversation(data: Mapping[str, Any], call_type: str) -> Conversation | None:
    """The request's conversation for scoutd to prepare.

    A non-empty list, or a Responses ``input`` string (the OpenAI SDK's
    ``responses.create(input="...")``), which is one user item. None for any
    other call type or body (absent, empty, another shape): there is nothing to
    prepare, but a request that names a chat is checked for its abort all the same.
    """
    route = ROUTES.get(call_type)
    if route is None:
        return None
    format, key = route
    value = data.get(key)
    if format == OPENAI_RESPONSES and isinstance(value, str) and value:
        return Conversation(format, key, [{"role": "user", "content": value}])
    if isinstance(value, list) and value:
        return Conversation(format, key, value)
    return None


class ScoutdProxyHook(CustomLogger):
    """A LiteLLM proxy callback whose pre-call hook prepares each request with scoutd.

    One :class:`~scoutd.integrations._run.RunPreparer` per conversation of a chat
    (save file and format), kept between requests in a bounded LRU: a
    conversation's requests share one incremental session, so each prepares only
    what is new, whatever other agents under the chat's header send meanwhile. A
    conversation evicted, or aborted, ends its session; its next request opens a
    new one (which an aborted chat's marker aborts at once).
    """

    def __init__(self, settings: ProxySettings | None = None) -> None:
        super().__init__()
        self.settings = ProxySettings.from_env() if settings is None else settings
        self._lock = threading.Lock()  # the settings and their cache change together
        self._cache, self._clients = self._cache_for(self.settings)
        self._routes = Routes(self.settings.max_chats)

    def _cache_for(self, settings: ProxySettings) -> tuple[ChatCache, list[Client]]:
        """The chat cache of ``settings``, and the daemon connections its chats share."""
        clients = daemon_clients(settings)
        turns = itertools.count()

        def new(chat: Chat) -> RunPreparer:
            shared = clients[next(turns) % len(clients)] if clients else None
            return self._new(chat[0], format_of(chat[1]), client=shared)

        return ChatCache(settings.max_chats, settings.max_bytes, new), clients

    def configure(self, settings: ProxySettings) -> None:
        """Use ``settings`` from the next request on; every chat's session is ended."""
        with self._lock:
            self.settings = settings
            old, clients = self._cache, self._clients
            self._cache, self._clients = self._cache_for(settings)
            self._routes = Routes(settings.max_chats)
        old.clear()  # their sessions end first, then the connections they shared
        for client in clients:
            client.close()

    @property
    def chats(self) -> list[Chat]:
        """The conversations (save file, format marked past a chat's first) whose session
        is kept, least recently used first (:mod:`._litellm_routes`)."""
        return self._cache.chats

    @property
    def held(self) -> int:
        """The memory the kept chats' conversations hold, in bytes, as last counted."""
        return self._cache.held

    def save_file(self, data: Mapping[str, Any], roots: tuple[str, ...]) -> str | None:
        """The chat the request names, confined to ``roots`` (its key's team's,
        :meth:`ProxySettings.roots_of`).

        An operator's abort must be able to reach it (:func:`unreachable`): a chat
        whose directory does not exist has no inbox and never had one (``scoutd
        abort`` and ``notify`` make the directories), so the header names a chat no
        operator watches: a typo, or a path mis-encoded on the way. It is refused
        rather than served unsupervised.

        Raises:
            HTTPException: 400 if it names a file outside the roots, one no
                operator's abort can reach, or, through the daemon, one whose path
                is not UTF-8.
        """
        named = chat_header(data)
        if named is None:
            return None
        try:
            save_file = check_save_file(os.path.expanduser(named), resolve_roots(roots))
        except Forbidden as exc:
            # What it resolved to and the roots are the proxy's: its log has them,
            # a remote client gets back only what it sent.
            log.warning("scoutd: refused the header %s: %r", CHAT_HEADER, str(exc))
            message = (
                f"scoutd refused the header {CHAT_HEADER}: {display_path(named)!r} is not an "
                "absolute path to a save file under the roots this proxy serves to the "
                "request's key (SCOUTD_LITELLM_ROOTS, SCOUTD_LITELLM_TEAM_ROOTS)"
            )
            raise api_error(400, message, "invalid_request_error") from None
        problem = unreachable(save_file) or self._unsendable(named)
        if problem is not None:
            raise api_error(
                400, f"scoutd refused the header {CHAT_HEADER}: {problem}", "invalid_request_error"
            )
        return save_file

    def _unsendable(self, named: str) -> str | None:
        """Why the daemon cannot serve the chat ``named``, or None: its protocol carries
        UTF-8 paths only, so a header of other bytes names a file only a proxy
        preparing in its own process can serve. Refused here as the client's error
        (400), not failed later as the proxy's (500, which the SDKs retry)."""
        if self.settings.socket in (None, False):
            return None
        try:
            wire_path(named)
        except ValueError as exc:
            return str(exc)
        return None

    def _new(self, save_file: str | None, format: str, client: Client | None = None) -> RunPreparer:
        s = self.settings
        return RunPreparer(
            save_file=save_file,
            socket=s.socket if client is None else None,
            client=client,
            config=s.config,
            format=format,
            timeout=s.timeout,
        )

    def prepare(self, save_file: str | None, format: str, messages: list[Any]) -> Prepared:
        """The prepared conversation (blocking; the hook runs it in a worker thread).

        Raises:
            Aborted: an operator aborted the chat.
        """
        if save_file is None:  # no chat: compaction only, nothing kept
            shared = self._clients[0] if self._clients else None
            with self._new(None, format, client=shared) as preparer:
                return preparer.prepare(messages)
        name = self._routes.route(save_file, format, messages)  # the conversation it continues
        return self._round(save_file, name, lambda preparer: preparer.prepare(messages))

    def check(self, save_file: str) -> None:
        """Raise the chat's abort, for a request with no conversation to prepare
        (blocking). The chat's session of format ``auto`` checks it, kept as any other.

        Raises:
            Aborted: an operator aborted the chat.
        """
        self._round(save_file, AUTO, RunPreparer.check)

    def _round(self, save_file: str, format: str, round: Callable[[RunPreparer], _T]) -> _T:
        """``round`` of the chat's preparer; an aborted chat's session is ended."""
        chat = (save_file, format)
        for _ in range(_TRIES):  # bounded: another request may evict it meanwhile
            cache = self._cache  # configure() may have replaced it: the new one's chats
            preparer = cache.get(chat)
            try:
                result = round(preparer)
            except HookClosed:  # evicted and closed between the lookup and the round
                continue
            except Aborted:
                cache.forget(chat, preparer)
                raise
            cache.weigh(chat, preparer)
            return result
        raise HookClosed(
            f"scoutd: the session of {display_path(save_file)} was evicted {_TRIES} times"
        )

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: str
    ) -> dict[str, Any]:
        """The hook: the request with its conversation prepared; other bodies untouched.

        Every request that names a chat is checked for its abort, whatever its
        call type and body: an abort that exists always aborts.

        Raises:
            HTTPException: 403 for an aborted chat; 400 for a chat outside the
                roots or in a directory that does not exist.
        """
        settings = self.settings
        if call_type == PASSTHROUGH and settings.supervised and not settings.passthrough:
            # No headers reach the hook there: an aborted chat would be served.
            raise api_error(
                ABORT_STATUS,
                "scoutd: LiteLLM's passthrough routes cannot be checked for a chat's abort;"
                " use /v1/chat/completions, /v1/messages or /v1/responses (or start the"
                " proxy with SCOUTD_LITELLM_PASSTHROUGH=allow)",
                "scoutd_passthrough_refused",
            )
        # The team LiteLLM's authentication gave the key: what the request says is not asked.
        roots = settings.roots_of(getattr(user_api_key_dict, "team_id", None))
        save_file = await anyio.to_thread.run_sync(self.save_file, data, roots)  # I/O
        found = conversation(data, call_type)
        chat = "no chat" if save_file is None else display_path(save_file)
        try:
            if found is None:  # nothing to prepare: a named chat's abort is checked all the same
                if save_file is not None:
                    await anyio.to_thread.run_sync(self.check, save_file)
                return data
            prepared = await anyio.to_thread.run_sync(
                self.prepare, save_file, found.format, found.messages
            )
        except Aborted as exc:
            log.warning("scoutd: %r: request refused, the chat is aborted: %r", chat, exc.reason)
            raise aborted_error(exc.reason, chat) from None
        except (InvalidMessages, RemoteError) as exc:
            refused = client_error(exc)
            if refused is None:
                raise
            raise refused from None
        log.info("scoutd: %r: %s", chat, round_summary(len(found.messages), prepared))
        # New lists and dicts: the request's own are left as they came, and nothing
        # LiteLLM changes in them reaches the chat's session.
        data[found.key] = detached(prepared.messages)
        return data

    def recheck(self, save_file: str) -> None:
        """Raise the chat's abort again, for a further attempt of a request (blocking).

        Asked of the chat's session kept most recently, whatever its format, so that
        a daemon session is not opened for a check alone; of the ``auto`` one if
        none is kept (evicted meanwhile).

        Raises:
            Aborted: an operator aborted the chat.
        """
        kept = [format for file, format in self.chats if file == save_file]
        self._round(save_file, kept[-1] if kept else AUTO, RunPreparer.check)

    async def async_pre_call_deployment_hook(
        self, kwargs: dict[str, Any], call_type: Any
    ) -> dict[str, Any] | None:
        """Each attempt of a request, as the proxy's router makes it: the first, each
        retry (``num_retries``) and each fallback model. The pre-call hook runs once per
        request, before all of them; an abort written while an attempt was in flight
        must stop the next one, so a request that names a chat is checked again here.
        The request is left as it is (``None``).

        Raises:
            HTTPException: 403 for an aborted chat; 400 as :meth:`save_file` says.
        """
        # No key reaches this hook: every root the proxy serves. The pre-call hook held
        # the request's chat to its team's roots before the first attempt.
        every = self.settings.every_root
        save_file = await anyio.to_thread.run_sync(self.save_file, kwargs, every)
        if save_file is None:
            return None
        try:
            await anyio.to_thread.run_sync(self.recheck, save_file)
        except Aborted as exc:
            chat = display_path(save_file)
            log.warning("scoutd: %r: attempt refused, the chat is aborted: %r", chat, exc.reason)
            raise aborted_error(exc.reason, chat) from None
        return None

    def close(self) -> None:
        """End every chat's session (idempotent); the hook stays usable. A proxy that
        exits needs no call: its daemon sessions end with its connections."""
        self.configure(self.settings)


def daemon_clients(settings: ProxySettings) -> list[Client]:
    """The daemon connections the chats of ``settings`` share (none in process).

    Not one a chat: the daemon lets one uid hold ``max_connections_per_uid``
    connections (128 by default), fewer than the chats kept (256), and the
    chats past it were refused. A few shared ones carry as many requests at
    once as the daemon computes for one uid (64 a connection).
    """
    if settings.socket is None or settings.socket is False:
        return []
    path = default_socket_path() if settings.socket is True else settings.socket
    return [Client(path, timeout=settings.timeout) for _ in range(DAEMON_CONNECTIONS)]


def _log_to_stderr() -> None:
    """Show the hook's lines in the proxy's console, unless logging is set up already."""
    if log.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s - %(name)s:%(levelname)s: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False


_log_to_stderr()
proxy_handler = ScoutdProxyHook()
