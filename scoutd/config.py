"""Configuration: one typed definition, four sources, no memoization.

Sources, highest first: per-call overrides, the TOML file (``[prompt]``,
``[daemon]`` and ``[plugins]`` tables), environment variables (the upper-case
names of the ``[prompt]`` keys, plus ``PROMPT_STRATEGY``), built-in defaults.
Every layer is validated against the same msgspec Structs, so a typo, a wrong
type or a negative count is reported with the key and the source that set it.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

import msgspec

from .config_paths import (
    DEFAULT_ALLOWED_ROOTS,
    DEFAULT_CONFIG_PATH,
    DEFAULT_SOCKET_PATH,
    allowed_roots_problem,
    config_file_path,
    load_config_file,
    socket_path_problem,
)
from .config_rules import (
    PROMPT_ACCESS,
    access_of,
    check_numbers,
    check_text,
    not_text,
    validated_layer,
    where,
)
from .errors import ConfigError
from .paths import printable

__all__ = [
    "DEFAULT_CONFIG_PATH",
    "DEFAULT_NOTICE",
    "DEFAULT_STRATEGIES",
    "MAX_COUNT",
    "MAX_FACTOR",
    "MAX_STRATEGIES",
    "NOTICE_MAX_BYTES",
    "OPERATOR_ONLY",
    "TIGHTEN_ONLY",
    "config_file_path",
    "Config",
    "DaemonConfig",
    "FleetConfig",
    "PromptConfig",
    "load_config",
    "read_fleet_table",
    "refuse_operator_keys",
    "resolve_config",
    "strategy_names",
    "with_overrides",
]

DEFAULT_STRATEGIES = ("shorten_tools_cost_aware", "inbox")

DEFAULT_NOTICE = (
    "[Context compaction]\n"
    "This conversation was compacted to fit the model's context window: {compacted} older"
    ' tool messages are shown shortened (marked "Truncated (<original length>): ...") and'
    " {removed} were removed.\n"
    "A tool call that is no longer visible may still have run: do not repeat a call only"
    " because its earlier result is missing. The latest of any repeated identical calls is"
    " always kept."
)

MIB = 1024 * 1024
SECONDS = 1.0
# Every number a configuration holds is bounded, so that no arithmetic the
# strategies do on it can overflow (docs/RELIABILITY.md, "What a client may
# configure"): counts fit in 63 bits, other floats are finite and at most
# MAX_FACTOR, so a product of a few of them with a count stays far below 1e308.
MAX_COUNT = 2**63 - 1
MAX_FACTOR = 1e6
# Strategies one call runs, one after the other, each over the whole conversation.
MAX_STRATEGIES = 32
# The compaction notice is a message to the model, not a payload: its UTF-8 bytes.
NOTICE_MAX_BYTES = 64 * 1024

Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_COUNT)]
Positive = Annotated[int, msgspec.Meta(ge=1, le=MAX_COUNT)]
Factor = Annotated[float, msgspec.Meta(ge=0, le=MAX_FACTOR)]
# At least 10 ms (shorter would make the daemon spin or close every connection at
# once) and finite (about 31 years at most).
Duration = Annotated[float, msgspec.Meta(ge=0.01, le=1e9)]
Share = Annotated[float, msgspec.Meta(ge=0, le=1)]
Id = Annotated[int, msgspec.Meta(ge=0, le=2**32 - 2)]  # a uid or gid; 2**32 - 1 is "none"
CachePricing = Literal["auto", "anthropic", "anthropic-1h", "openai", "openai-4o"]


class PromptConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Keys of the ``[prompt]`` table: what the strategies read."""

    prompt_strategies: str | tuple[str, ...] | None = None
    compaction_notice: str = DEFAULT_NOTICE
    # shorten_tools (docs/STRATEGIES.md)
    full_tool_calls: Count = 0
    full_tool_outputs: Count = 10
    max_tool_calls: Count = 40
    max_tool_outputs: Count | None = None  # None: the value of max_tool_calls
    max_tool_chars: Count = 100_000
    # shorten_tools_epoch (section 5)
    epoch_tool_call_threshold: Count = 50
    epoch_full_tool_calls: Count = 20
    epoch_compacted_tool_calls: Count = 80
    epoch_size: Count = 20
    # shorten_tools_epoch_increment (section 6)
    epoch_increment_epochs_per_increase: Count = 3
    epoch_increment_size_increase: Count = 10
    epoch_increment_repeat_increase: Count = 10
    epoch_increment_max_size: Count = 60
    epoch_increment_compacted_growth_ratio: Factor = 2.0
    epoch_increment_max_compacted_tool_calls: Count = 160
    # shorten_tools_cost_aware, the default: when compaction pays (docs/ECONOMY.md)
    context_window: Positive = 200_000
    compaction_trigger_share: Share = 0.05
    compaction_limit_share: Share = 0.75
    expected_horizon: Factor = 1.0
    compaction_risk_share: Factor = 0.06
    # What keeping an output verbatim for a round is worth, as a share of its read cost.
    cost_verbatim_value: Annotated[float, msgspec.Meta(ge=0, lt=1)] = 0.8
    cache_pricing: CachePricing = "auto"
    cache_write_price: Factor | None = None
    cache_read_price: Factor | None = None
    # At least 0.01 (a hundred tokens a character): a length divided by it stays finite.
    chars_per_token: Annotated[float, msgspec.Meta(ge=0.01, le=MAX_FACTOR)] = 4.0
    # module:attribute of a callable str -> int: code, so the operator's alone (OPERATOR_ONLY)
    tokenizer: str | None = None
    cost_full_tool_outputs: Count = 20
    # On a long run, at least this share of its outputs stays verbatim, up to the cap.
    cost_full_share: Share = 0.0
    cost_full_share_cap: Count = 35
    # Few: the old outputs the agent uses again are kept whole below (docs/ECONOMY.md).
    cost_compacted_tool_calls: Count = 2
    # Old outputs a compaction keeps whole all the same (docs/ECONOMY.md, "What it keeps"):
    # the newest whole read of each file and run of each search, at most this share
    # of what the compaction removes (0: none), among this many outputs before the
    # whole ones.
    cost_keep_share: Share = 0.3
    # At most 1,000: each weighed round walks this many pairs (docs/RELIABILITY.md, rule 1).
    # 47: docs/ECONOMY.md, "The default's retention" (50 until 6 December 2026).
    cost_keep_lookback: Annotated[int, msgspec.Meta(ge=0, le=1000)] = 47
    # inbox (docs/STRATEGIES.md)
    inbox_max_bytes: Positive = 1 * MIB
    inbox_max_total_bytes: Positive = 8 * MIB  # all notices of one call together
    # Anthropic format: mark the end of the stable prefix for the prompt cache
    # (docs/FORMATS.md)
    cache_control: bool = False
    # Recall (docs/STRATEGIES.md, "Recall"): each shortened output says its handle
    # ("recall #N") and the compaction notice names the removed ones, for a model
    # given the recall tool. Off: prompts are byte for byte what they were without it.
    recall: bool = False

    def __post_init__(self) -> None:
        check_numbers(self)
        if isinstance(self.prompt_strategies, (str, tuple)):
            strategy_names(self.prompt_strategies)  # at most MAX_STRATEGIES
        notice = self.compaction_notice
        if isinstance(notice, str):
            size = len(notice.encode("utf-8", "surrogatepass"))
            if size > NOTICE_MAX_BYTES:
                raise ValueError(
                    f"compaction_notice is {size} bytes (UTF-8); at most {NOTICE_MAX_BYTES}"
                )

    @property
    def effective_max_tool_outputs(self) -> int:
        """``max_tool_outputs`` falls back to ``max_tool_calls`` when unset."""
        if self.max_tool_outputs is None:
            return self.max_tool_calls
        return self.max_tool_outputs


# The [prompt] keys an override may only lower, and those it may not set at all
# (config_rules.PROMPT_ACCESS says why).
TIGHTEN_ONLY = frozenset(key for key, access in PROMPT_ACCESS.items() if access == "tighten")
OPERATOR_ONLY = frozenset(
    key for key in PromptConfig.__struct_fields__ if access_of(key) == "operator"
)


class DaemonConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Keys of the ``[daemon]`` table: what ``scoutd serve`` reads."""

    socket_path: str = DEFAULT_SOCKET_PATH
    socket_mode: Annotated[int, msgspec.Meta(ge=0, le=0o777)] = 0o660
    socket_group: str | None = None
    # None: only the daemon's own uid. Members of allowed_gids are also let in.
    allowed_uids: tuple[Id, ...] | None = None
    allowed_gids: tuple[Id, ...] = ()
    allowed_roots: tuple[str, ...] = DEFAULT_ALLOWED_ROOTS
    max_request_bytes: Positive = 64 * MIB
    max_connections: Positive = 256
    idle_timeout: Duration = 300 * SECONDS
    read_timeout: Duration = 30 * SECONDS
    shutdown_timeout: Duration = 10 * SECONDS
    rescan_interval: Duration = 5 * SECONDS
    watch_mode: Literal["native", "poll"] = "native"
    abort_signal: str | None = None
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    max_session_messages: Positive = 1_000_000
    max_session_bytes: Positive = 1024 * MIB
    session_idle_timeout: Duration = 3600 * SECONDS
    max_connections_per_uid: Positive = 128
    max_queued_response_bytes: Positive = 64 * MIB  # per connection: answers not yet read
    # all connections: request lines not yet complete or not yet answered
    max_pending_request_bytes: Positive = 256 * MIB

    # Sessions one uid may hold at once: each one costs watches and memory, and a
    # client decides how many it opens (docs/OPERATIONS.md).
    max_sessions_per_uid: Positive = 4096

    # CPU and memory per uid and for the whole daemon (docs/OPERATIONS.md, limits).
    # Prepares of one uid computing at once; None: half the worker threads, at least 1.
    max_prepares_per_uid: Positive | None = None
    max_queued_response_bytes_per_uid: Positive = 256 * MIB  # answers not yet read
    max_queued_response_bytes_total: Positive = 1024 * MIB
    # What stored sessions hold in memory (not their JSON size: about 2 to 15 times it)
    max_session_bytes_per_uid: Positive = 2048 * MIB
    max_total_session_bytes: Positive = 4096 * MIB

    def __post_init__(self) -> None:
        check_numbers(self)
        # Paths are checked here, with the rest, so that the daemon and
        # `scoutd config check` refuse the same files (docs/OPERATIONS.md).
        problem = allowed_roots_problem(self.allowed_roots) or socket_path_problem(self.socket_path)
        if problem is not None:
            raise ValueError(problem)


# A fleet's names: hosts, labels and the key prefix go into Redis keys and receipts.
FleetName = Annotated[
    str, msgspec.Meta(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:@-]+$")
]


class FleetConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Keys of the optional ``[fleet]`` table: commands through Redis Streams.

    Absent: no fleet, nothing changes (docs/OPERATIONS.md, "A fleet"). A
    reload does not change it: it is read once, when the daemon starts.
    """

    # redis://, rediss:// (TLS) or unix:// URL; a password in it is refused (password_file)
    url: str = "redis://127.0.0.1:6379/0"
    username: str | None = None
    password_file: str | None = None  # the password, read at connect time; never in the config
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_check_hostname: bool = True
    prefix: FleetName = "scoutd:fleet"  # every key: PREFIX:commands, PREFIX:hosts, ...
    host: FleetName | None = None  # this daemon's name in the fleet; None: the host name
    labels: tuple[FleetName, ...] = ()  # what `label=NAME` commands address
    # Where the daemon records the commands it delivered (at most once, across restarts).
    state_dir: str = "/var/lib/scoutd/fleet"
    heartbeat_interval: Duration = 5 * SECONDS
    # At startup, how long pending commands may hold up serving before the daemon
    # serves its local files anyway (and says so in status).
    startup_timeout: Duration = 10 * SECONDS
    connect_timeout: Duration = 5 * SECONDS
    reconnect_max: Duration = 30 * SECONDS  # the longest backoff between reconnects
    # Retention (applied by whoever writes): commands by age and count, receipts by age.
    command_max_age: Duration = 7 * 24 * 3600 * SECONDS
    command_max_len: Positive = 100_000
    event_max_len: Positive = 100_000
    receipt_max_age: Duration = 30 * 24 * 3600 * SECONDS
    # The most chats one command may reach on one host (a glob is bounded too).
    max_chats: Positive = 100_000

    def __post_init__(self) -> None:
        check_numbers(self)
        scheme = self.url.split("://", 1)[0]
        if scheme not in ("redis", "rediss", "unix"):
            raise ValueError(f"url {self.url!r}: redis://, rediss:// or unix:// only")
        if "@" in self.url.split("://", 1)[-1].split("/", 1)[0] and scheme != "unix":
            raise ValueError("url must not hold credentials: use username and password_file")
        for name in ("password_file", "tls_ca_file", "tls_cert_file", "tls_key_file"):
            value = getattr(self, name)
            if value is not None and not os.path.isabs(value):
                raise ValueError(f"{name} {value!r} is not an absolute path")
        if not os.path.isabs(self.state_dir):
            raise ValueError(f"state_dir {self.state_dir!r} is not an absolute path")


class Config(msgspec.Struct, frozen=True, kw_only=True):
    """An immutable snapshot of the effective configuration.

    ``origins`` maps every key (``prompt.epoch_size``, ``daemon.socket_path``,
    ``plugins.NAME``) to where its value came from: ``default``, ``env:NAME``,
    ``file`` or ``override``.
    """

    prompt: PromptConfig = msgspec.field(default_factory=PromptConfig)
    daemon: DaemonConfig = msgspec.field(default_factory=DaemonConfig)
    plugins: dict[str, str] = msgspec.field(default_factory=dict)
    fleet: FleetConfig | None = None  # the [fleet] table, if the file has one
    path: str | None = None
    origins: dict[str, str] = msgspec.field(default_factory=dict)


class _FileLayout(msgspec.Struct, forbid_unknown_fields=True):
    prompt: dict[str, Any] = msgspec.field(default_factory=dict)
    daemon: dict[str, Any] = msgspec.field(default_factory=dict)
    plugins: dict[str, str] = msgspec.field(default_factory=dict)
    fleet: dict[str, Any] | None = None


def strategy_names(value: str | Sequence[str] | None) -> list[str] | None:
    """Normalise a strategy list: a comma-separated string or a list of names, at most
    :data:`MAX_STRATEGIES` (each runs over the whole conversation; ConfigError)."""
    if value is None:
        return None
    parts = value.split(",") if isinstance(value, str) else list(value)
    names = [name.strip() for name in parts if name.strip()]
    if len(names) > MAX_STRATEGIES:
        raise ConfigError(f"{len(names)} strategies named: at most {MAX_STRATEGIES}")
    return names


def _env_layer(environ: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    layer: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for key in PromptConfig.__struct_fields__:
        name = "PROMPT_STRATEGY" if key == "prompt_strategies" else key.upper()
        if name not in environ:
            continue
        raw = environ[name]
        if not_text(raw) is not None:  # msgspec could not even say why it refuses it
            raise ConfigError(f"invalid environment variable {name}='{printable(raw)}': not UTF-8")
        value = raw if key == "compaction_notice" else raw.strip()
        try:
            converted = msgspec.convert({key: value}, PromptConfig, strict=False)
        except msgspec.ValidationError as exc:
            raise ConfigError(f"invalid environment variable {name}={raw!r}: {exc}") from exc
        layer[key] = getattr(converted, key)
        origins[key] = f"env:{name}"
    return layer, origins


# What msgspec.toml.decode passes on: TOML's dates and times stay what tomllib made.
_TOML_TYPES = (datetime.datetime, datetime.date, datetime.time)


def _read_file(path: str, *, allow_empty: bool) -> _FileLayout:
    table = load_config_file(path, allow_empty=allow_empty)
    try:
        return msgspec.convert(table, _FileLayout, str_keys=True, builtin_types=_TOML_TYPES)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"invalid config file {printable(path)}: {where(exc, '')}") from exc
    except RecursionError:  # tables or arrays nested past what the conversion walks
        raise ConfigError(f"invalid config file {printable(path)}: nested too deeply") from None


def _fleet_table(table: Mapping[str, Any], source: str) -> FleetConfig:
    try:
        return msgspec.convert(dict(table), FleetConfig)
    except msgspec.ValidationError as exc:
        raise ConfigError(
            f"invalid configuration in {source}, table [fleet]: {where(exc, 'fleet')}"
        ) from exc


def read_fleet_table(path: str) -> FleetConfig | None:
    """The ``[fleet]`` table of the config file at ``path`` (None: the file has none),
    validated alone: the operator's fleet verbs need nothing else, so a mistake in
    another table, or in a ``[prompt]`` environment variable, cannot stop a fleet
    abort (docs/OPERATIONS.md, "A fleet").

    Raises:
        ConfigError: the file cannot be read, is not TOML of this layout, or its
            ``[fleet]`` table is invalid.
    """
    layout = _read_file(path, allow_empty=True)
    source = f"config file {printable(path)}"
    return None if layout.fleet is None else _fleet_table(layout.fleet, source)


def resolve_config(
    path: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    allow_empty: bool = True,
) -> Config:
    """Build a snapshot from defaults, environment and file, reading them now.

    ``path`` wins over ``$SCOUTD_CONFIG``, which wins over
    ``/etc/scoutd/scoutd.toml`` (used only if it exists). A named file that is
    missing is an error; so is an empty one unless ``allow_empty`` (the daemon
    refuses it: see :func:`scoutd.server.load_daemon_config`).
    """
    environ = os.environ if environ is None else environ
    prompt_layer, env_origins = _env_layer(environ)
    origins = {f"prompt.{key}": "default" for key in PromptConfig.__struct_fields__}
    origins.update({f"daemon.{key}": "default" for key in DaemonConfig.__struct_fields__})
    origins.update({f"prompt.{key}": origin for key, origin in env_origins.items()})

    file_path = config_file_path(path, environ)
    daemon_layer: dict[str, Any] = {}
    plugins: dict[str, str] = {}
    fleet: FleetConfig | None = None
    if file_path is not None:
        layout = _read_file(file_path, allow_empty=allow_empty)
        source = f"config file {printable(file_path)}"
        file_prompt = validated_layer(layout.prompt, PromptConfig, "prompt", source)
        daemon_layer = validated_layer(layout.daemon, DaemonConfig, "daemon", source)
        plugins = dict(layout.plugins)
        if layout.fleet is not None:
            fleet = _fleet_table(layout.fleet, source)
            origins.update({f"fleet.{key}": "file" for key in layout.fleet})
        prompt_layer.update(file_prompt)
        origins.update({f"prompt.{key}": "file" for key in file_prompt})
        origins.update({f"daemon.{key}": "file" for key in daemon_layer})
        origins.update({f"plugins.{key}": "file" for key in plugins})
    return Config(
        prompt=msgspec.convert(prompt_layer, PromptConfig),
        daemon=msgspec.convert(daemon_layer, DaemonConfig),
        plugins=plugins,
        fleet=fleet,
        path=file_path,
        origins=origins,
    )


def refuse_operator_keys(overrides: Mapping[str, Any]) -> None:
    """Refuse an override of a key only the operator sets, whatever its value, and
    one holding a string that is no UTF-8 text (an undecodable byte of argv).

    Called before any value is converted, by :func:`with_overrides` and by a
    client that wants to refuse before sending (``--set``, ``scoutd.Client``).
    """
    check_text(overrides, "prompt", "per-call overrides")
    for key in overrides:
        if key in PromptConfig.__struct_fields__ and access_of(key) == "operator":
            raise ConfigError(
                f"per-call override of {key} refused: its value names code to import and"
                " run, which only the operator configures (the config file's [prompt]"
                f" table or the {key.upper()} environment variable)"
            )


def with_overrides(config: Config, overrides: Mapping[str, Any] | None) -> Config:
    """Return ``config`` with per-call overrides of ``[prompt]`` keys applied.

    What a client may set is :data:`PROMPT_ACCESS`: plugins and daemon keys
    come from the operator alone, so do the :data:`OPERATOR_ONLY` keys (they
    name code), and the limits in :data:`TIGHTEN_ONLY` may only be lowered
    (ConfigError otherwise, naming the key). Code that trusts itself passes a
    ``Config`` or a ``PromptConfig`` instead of overrides.
    """
    if not overrides:
        return config
    if not isinstance(overrides, Mapping):
        raise ConfigError(f"config overrides must be a mapping, got {type(overrides).__name__}")
    refuse_operator_keys(overrides)
    layer = validated_layer(overrides, PromptConfig, "prompt", "per-call overrides")
    for key in TIGHTEN_ONLY.intersection(layer):
        limit = getattr(config.prompt, key)
        if layer[key] > limit:
            raise ConfigError(
                f"per-call override {key} = {layer[key]} is above the operator's limit"
                f" ({limit}); an override may only lower it"
            )
    origins = dict(config.origins)
    origins.update({f"prompt.{key}": "override" for key in layer})
    return msgspec.structs.replace(
        config, prompt=msgspec.structs.replace(config.prompt, **layer), origins=origins
    )


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Read the configuration now (file, environment, defaults) plus overrides."""
    return with_overrides(resolve_config(path), overrides)
