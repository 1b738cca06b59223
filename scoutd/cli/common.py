"""What every ``scoutd`` verb shares: exit codes, errors, input and output, options.

Exit codes are part of the interface, so that agents' wrapper scripts can
branch on them (docs/OPERATIONS.md, "The command line"):

* 0: success;
* 1: a runtime failure (one line on stderr, never a traceback);
* 2: a usage or configuration mistake (a bad option, an unknown strategy,
  an invalid ``--set`` or config file, a path outside the daemon's roots);
* 3: the agent was aborted by an operator (an ``abort`` file in its inbox);
* 4: incomplete (``fleet``: a command did not reach every chat it matched).
"""

from __future__ import annotations

import argparse
import os
import re
import stat
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

from ..paths import MAX_INPUT_BYTES, open_input, printable
from ..protocol.format_names import AUTO, FORMATS
from .arg_types import path, real

# The configuration, the JSON codec and socket discovery are imported where they are
# used: the parser, --help and the light verbs need none of them (docs/ARCHITECTURE.md,
# "Layers"; tests/test_layers.py).
if TYPE_CHECKING:
    import msgspec

    from ..config import Config

__all__ = [
    "EXIT_ABORTED",
    "EXIT_ERROR",
    "EXIT_INCOMPLETE",
    "EXIT_OK",
    "EXIT_USAGE",
    "CliError",
    "Parser",
    "UsageError",
    "Verb",
    "add_client",
    "add_config",
    "add_format",
    "add_strategies",
    "client_socket",
    "config_path",
    "find_socket",
    "found_config",
    "notice_text",
    "read_messages",
    "save_file_path",
    "snapshot",
    "write_json",
]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2  # also what argparse itself exits with on a bad command line
EXIT_ABORTED = 3
# `fleet receipts`: an answer says the command did not reach every chat it matched (a
# refusal, an error, an unreadable receipt): final news, unlike 1 (not answered yet)
EXIT_INCOMPLETE = 4


def encode(value: Any) -> bytes:
    """``value`` as compact JSON."""
    import msgspec

    return msgspec.json.encode(value)


class CliError(Exception):
    """A runtime failure the CLI reports as one line and exit code 1."""

    exit_code = EXIT_ERROR


class UsageError(CliError):
    """A mistake in what the user asked for: one line and exit code 2."""

    exit_code = EXIT_USAGE


Handler = Callable[[argparse.Namespace], int]


class Verb(NamedTuple):
    """One ``scoutd`` verb: its help, its options and the function that runs it.

    ``examples`` end its ``--help``; ``actions`` make it a group of verbs
    (``scoutd config show``) instead of a verb with a ``run`` of its own;
    ``passthrough`` hands every argument after the verb, ``--help`` included,
    to ``run`` as ``args.args`` (a verb with its own parser, like ``simulate``).
    ``logs`` false: the verb runs no code that logs (``notify``, ``abort``), so
    it is spared loading :mod:`logging`, most of a light verb's start-up (a
    record would reach Python's last-resort handler, unescaped:
    tests/test_layers.py checks that none loads it); the others show the
    library's warnings as their own lines (``scoutd: warning: ...``).
    """

    name: str
    help: str
    examples: tuple[str, ...] = ()
    configure: Callable[[argparse.ArgumentParser], None] | None = None
    run: Handler | None = None
    actions: tuple[Verb, ...] = ()
    passthrough: bool = False
    logs: bool = True


def _terminal_columns() -> int:
    """The terminal's width as :func:`shutil.get_terminal_size` tells it (``$COLUMNS``,
    else standard output's terminal, else 80), without importing :mod:`shutil`."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """argparse's formatter, descriptions kept as written, the width found without shutil.

    argparse makes a formatter for every ``add_argument`` and, given no width,
    imports :mod:`shutil` for it, which loads ``bz2``, ``lzma`` and ``fnmatch``:
    about 2 ms of a light verb's start (docs/PERFORMANCE.md).
    """

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        width = _terminal_columns() - 2 if width is None else width
        super().__init__(prog, indent_increment, max_help_position, width)


class Parser(argparse.ArgumentParser):
    """argparse, with usage errors kept to the usage line and one error line, and
    :class:`HelpFormatter` for every parser, the subcommands' too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


# ---------------------------------------------------------------- input / output


_CHUNK = 1024 * 1024


def input_name(source: str) -> str:
    """``source`` as an error message names it: one safe line (the path may be anyone's)."""
    return "<stdin>" if source == "-" else printable(source)


def _read_bounded(fd: int, name: str) -> bytes:
    """Everything ``fd`` holds, at most :data:`MAX_INPUT_BYTES`."""
    data = bytearray()
    while True:
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            return bytes(data)
        data += chunk
        if len(data) > MAX_INPUT_BYTES:
            raise CliError(f"{name} is larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB: refused")


def read_input(source: str) -> bytes:
    """The bytes of FILE, or of stdin when ``source`` is ``-``, at most :data:`MAX_INPUT_BYTES`.

    FILE is opened without blocking: a FIFO nobody writes to reads as empty
    (said so) instead of hanging the command in ``open``; a directory is
    refused by name. Names in errors are escaped (docs/RELIABILITY.md, "An
    abort fails closed", rule 7).
    """
    name = input_name(source)
    if source == "-":
        if sys.stdin is None:  # started with fd 0 closed (``scoutd notify F - <&-``)
            raise CliError(f"cannot read {name}: standard input is closed")
        try:
            return _read_bounded(sys.stdin.fileno(), name)
        except OSError as exc:  # opened for writing only, say
            raise CliError(f"cannot read {name}: {exc.strerror or exc}") from exc
    try:
        fd, mode = open_input(source)
    except OSError as exc:
        raise CliError(f"cannot read {name}: {exc.strerror or exc}") from exc
    try:
        data = _read_bounded(fd, name)
    except OSError as exc:
        raise CliError(f"cannot read {name}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    if not data and stat.S_ISFIFO(mode):
        raise CliError(f"cannot read {name}: a FIFO with no writer (nothing to read)")
    return data


def save_file_path(text: str) -> str:
    """The SAVE_FILE argument, made absolute (the daemon runs elsewhere).

    What names no file is refused, before :func:`os.path.abspath` would turn
    it into another chat: ``''`` is the current directory, ``D/`` is ``D``, so
    ``scoutd clear D/`` lifted the abort of the chat ``D.chat`` beside it.

    Raises:
        UsageError: ``text`` is empty or ends in ``/``, ``.`` or ``..``.
    """
    if not text or os.path.basename(text) in ("", ".", ".."):
        raise UsageError(f"save file '{printable(text)}' has no file name: name the chat's file")
    return os.path.abspath(text)


def notice_text(text: str) -> str:
    """A notice's TEXT argument, or stdin's bytes when it is ``-``.

    Bytes as given, from stdin as from the command line: what is not UTF-8 is
    kept as it came (``surrogateescape``), never refused. Stdin is read up to
    :data:`MAX_INPUT_BYTES`, as every input.
    """
    return read_input("-").decode("utf-8", "surrogateescape") if text == "-" else text


_BYTE_POSITION = re.compile(r"\(byte (\d+)\)")


def _json_error(source: str, data: bytes, exc: msgspec.DecodeError) -> CliError:
    """A decode error with its line and column, which msgspec gives as a byte offset."""
    name = input_name(source)
    message = printable(str(exc))
    found = _BYTE_POSITION.search(message)
    if found is None:
        if not data.strip():
            return CliError(f"invalid JSON in {name}: the input is empty")
        return CliError(f"invalid JSON in {name}: {message}")
    offset = int(found.group(1))
    line = data.count(b"\n", 0, offset) + 1
    column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    detail = _BYTE_POSITION.sub("", message).strip()
    return CliError(f"invalid JSON in {name} at line {line}, column {column}: {detail}")


def read_messages(source: str) -> list[Any]:
    """A message list from a JSON list, or from an object with a ``messages`` list."""
    import msgspec

    data = read_input(source)
    try:
        document = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise _json_error(source, data, exc) from exc
    except RecursionError:
        raise CliError(f"invalid JSON in {input_name(source)}: nested too deeply") from None
    except MemoryError:
        # Decoded JSON takes up to some 40 times its bytes (``[{},{},...]``): an input
        # under the byte bound may still not fit in memory.
        raise CliError(
            f"{input_name(source)}: not enough memory to decode its"
            f" {len(data) / (1024 * 1024):.0f} MiB of JSON"
        ) from None
    if isinstance(document, dict) and "messages" in document:
        document = document["messages"]
    if not isinstance(document, list):
        raise CliError(
            f"{input_name(source)}: expected a JSON list of messages"
            " or an object with a 'messages' list"
        )
    return document


def write_json(value: Any) -> None:
    """One JSON document (compact, UTF-8) on stdout.

    A string JSON cannot hold (a path's bytes that are not UTF-8, as Python hands
    them over) is written with those bytes as ``\\xNN`` (:func:`~scoutd.paths.safe_value`).
    """
    try:
        data = encode(value)
    except UnicodeEncodeError:
        import msgspec

        from ..paths import safe_value

        data = encode(safe_value(msgspec.to_builtins(value)))
    sys.stdout.flush()
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.buffer.flush()


def warn(message: str) -> None:
    """One ``scoutd: warning:`` line on stderr."""
    print(f"scoutd: warning: {printable(message)}", file=sys.stderr)


# ---------------------------------------------------------------- options


def _parse_setting(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` for ``--set``: VALUE is JSON when it parses, else a string."""
    key, sep, raw = text.partition("=")
    key = key.strip().removeprefix("prompt.")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    import msgspec

    try:
        value: Any = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError, UnicodeEncodeError):
        # UnicodeEncodeError: bytes that are not UTF-8 (``surrogateescape``); the
        # configuration then refuses the string by its key, as it does any bad value
        value = raw
    return key, value


# --timeout: at most a week, well inside what the waits it bounds accept (poll(2) takes
# milliseconds in an int: some 24.8 days); past that it ended in an OverflowError
MAX_TIMEOUT = 7 * 86400.0
_positive_seconds = real(0.0, above=True, maximum=MAX_TIMEOUT)


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The ``--set`` overrides of a command line, as a mapping.

    A key only the operator sets is refused here (ConfigError), before it could
    be sent: a daemon of an older version would have run what it names.
    """
    from ..config import refuse_operator_keys

    found = dict(getattr(args, "set", None) or ())
    refuse_operator_keys(found)
    return found


def config_path(args: argparse.Namespace) -> str | None:
    """``--config`` after the verb wins over one before it; else the library decides."""
    path: str | None = getattr(args, "config", None) or getattr(args, "global_config", None)
    return path


def found_config(args: argparse.Namespace) -> tuple[str | None, str]:
    """The config file of this command line and where it was found (docs/OPERATIONS.md,
    "Finding the daemon"): the same for every verb, the running daemon's at the end."""
    from .config_file import discover_config

    return discover_config(config_path(args))


def snapshot(args: argparse.Namespace) -> Config:
    """The effective config: file, environment, defaults, then ``--set`` overrides."""
    from ..config import resolve_config, with_overrides

    path, _ = found_config(args)
    return with_overrides(resolve_config(path), overrides(args))


def find_socket(
    args: argparse.Namespace, *, read_config: bool = True, paths_only: bool = False
) -> str:
    """The daemon's socket for this command line (docs/OPERATIONS.md, "Finding the daemon");
    ``read_config`` false: found without the config file; ``paths_only``: reading only
    its ``[daemon]`` paths (:func:`scoutd.config_paths.read_daemon_paths`).

    Raises:
        ConfigError: the config file named cannot be read (``read_config`` only).
    """
    from ..discovery import discover_socket

    return discover_socket(
        getattr(args, "socket", None),
        config_path=config_path(args),
        read_config=read_config,
        paths_only=paths_only,
    )


def client_socket(args: argparse.Namespace, *, config_optional: bool = False) -> str:
    """:func:`find_socket`; ``config_optional``: for the verbs that only look at the daemon
    (``status``, ``metrics``).

    For those, a config file that cannot be read does not stop the verb: the
    daemon keeps its last good configuration and reports the reload error in
    its ``status``, which is what the operator then needs to see. The socket is
    found without the file, and a warning says so. A verb whose answer depends
    on the daemon's configuration (``prepare``) stops instead: it must not be
    served by another daemon than the one the file names.
    """
    from ..errors import ConfigError

    try:
        return find_socket(args)
    except ConfigError as exc:
        if not config_optional:
            raise
        warn(f"{exc}; looking for the daemon without it (or name it with --socket)")
        return find_socket(args, read_config=False)


def add_config(parser: argparse.ArgumentParser, *, overrides: bool = True) -> None:
    """``--config`` (and ``--set`` unless ``overrides`` is false)."""
    parser.add_argument(
        "--config",
        metavar="FILE",
        type=path,
        help="config file (default: $SCOUTD_CONFIG, else /etc/scoutd/scoutd.toml if present, "
        "else the running daemon's)",
    )
    if overrides:
        parser.add_argument(
            "--set",
            metavar="KEY=VALUE",
            action="append",
            type=_parse_setting,
            help="override a [prompt] key for this call (VALUE as JSON, else a string); repeatable",
        )


def add_client(parser: argparse.ArgumentParser) -> None:
    """``--socket`` and ``--timeout``, for verbs that talk to the daemon."""
    parser.add_argument(
        "--socket",
        metavar="PATH",
        type=path,
        help="daemon socket (default: found as docs/OPERATIONS.md says: $SCOUTD_SOCKET, "
        "the config's socket_path, $XDG_RUNTIME_DIR/scoutd/scoutd.sock, ...)",
    )
    parser.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=_positive_seconds,
        default=60.0,
        help="give up on the daemon after this long (default: %(default)s)",
    )


def add_strategies(parser: argparse.ArgumentParser) -> None:
    """``--strategies``."""
    parser.add_argument(
        "--strategies",
        metavar="S",
        help="comma-separated strategy names (default: [prompt].prompt_strategies, "
        "else shorten_tools_cost_aware,inbox)",
    )


def add_format(parser: argparse.ArgumentParser) -> None:
    """``--format``."""
    parser.add_argument(
        "--format",
        choices=(AUTO, *FORMATS),
        default=AUTO,
        help="message format (default: detected from the messages; see docs/FORMATS.md)",
    )


def examples_epilog(examples: Sequence[str]) -> str | None:
    """The ``examples:`` block that ends a verb's ``--help``."""
    if not examples:
        return None
    return "examples:\n" + "\n".join(f"  {line}" for line in examples)
