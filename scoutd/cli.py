"""The ``scoutd`` command: a thin shell over the library and the client.

Every verb maps onto one library or client call. Exit codes are part of the
interface, so that agents' wrapper scripts can branch on them:

* 0: success;
* 1: an error (one line on stderr, never a traceback);
* 2: a usage error (argparse's own code);
* 3: the agent was aborted by an operator (an ``abort`` file in its inbox).
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import msgspec

from ._version import __version__
from .config import Config, DaemonConfig, PromptConfig, resolve_config, with_overrides
from .errors import Aborted, ScoutdError
from .formats import AUTO, FORMATS, FormatError
from .message_rules import InvalidMessages
from .strategies.report import StrategyReport

__all__ = ["EXIT_ABORTED", "EXIT_ERROR", "EXIT_OK", "EXIT_USAGE", "main"]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2  # what argparse itself exits with on a bad command line
EXIT_ABORTED = 3

# Set to show the traceback of an unexpected error (a bug, or a broken plugin)
# instead of the one-line message.
DEBUG_ENV = "SCOUTD_DEBUG"
SOCKET_ENV = "SCOUTD_SOCKET"

_encode = msgspec.json.Encoder().encode


class CliError(Exception):
    """An error the CLI reports as one line and exit code 1."""


# ---------------------------------------------------------------- input / output


def _read_input(source: str) -> bytes:
    """The bytes of FILE, or of stdin when ``source`` is ``-``."""
    if source == "-":
        return sys.stdin.buffer.read()
    try:
        with open(source, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise CliError(f"cannot read {source}: {exc.strerror or exc}") from exc


_BYTE_POSITION = re.compile(r"\(byte (\d+)\)")


def _json_error(source: str, data: bytes, exc: msgspec.DecodeError) -> CliError:
    """A decode error with its line and column, which msgspec gives as a byte offset."""
    name = "<stdin>" if source == "-" else source
    message = str(exc)
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


def _read_messages(source: str) -> list[Any]:
    """A message list from a JSON list, or from an object with a ``messages`` list."""
    data = _read_input(source)
    try:
        document = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise _json_error(source, data, exc) from exc
    if isinstance(document, dict) and "messages" in document:
        document = document["messages"]
    if not isinstance(document, list):
        name = "<stdin>" if source == "-" else source
        raise CliError(
            f"{name}: expected a JSON list of messages or an object with a 'messages' list"
        )
    return document


def _write_json(value: Any) -> None:
    """One JSON document (compact, UTF-8) on stdout."""
    sys.stdout.flush()
    sys.stdout.buffer.write(_encode(value) + b"\n")
    sys.stdout.buffer.flush()


def _parse_setting(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` for ``--set``: VALUE is JSON when it parses, else a string."""
    key, sep, raw = text.partition("=")
    key = key.strip().removeprefix("prompt.")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        value: Any = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        value = raw
    return key, value


def _positive_seconds(text: str) -> float:
    """``--timeout``: a positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (0 < value < float("inf")):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _overrides(settings: Sequence[tuple[str, Any]] | None) -> dict[str, Any]:
    return dict(settings or ())


def _config_path(args: argparse.Namespace) -> str | None:
    """``--config`` after the verb wins over one before it; else the library decides."""
    path: str | None = getattr(args, "config", None) or getattr(args, "global_config", None)
    return path


def _snapshot(args: argparse.Namespace) -> Config:
    """The effective config: file, environment, defaults, then ``--set`` overrides."""
    return with_overrides(resolve_config(_config_path(args)), _overrides(args.set))


def _socket_path(args: argparse.Namespace) -> str | None:
    """``--socket``, then ``$SCOUTD_SOCKET``, then ``[daemon].socket_path`` of ``--config``.

    None lets the client apply its own default (the environment's config file).
    """
    if args.socket:
        return str(args.socket)
    if os.environ.get(SOCKET_ENV):
        return os.environ[SOCKET_ENV]
    path = _config_path(args)
    if path is not None:
        return resolve_config(path).daemon.socket_path
    return None


# ---------------------------------------------------------------- verbs


def _cmd_serve(args: argparse.Namespace) -> int:
    from . import server

    return server.run(config_path=_config_path(args), socket_path=args.socket)


def _cmd_prepare(args: argparse.Namespace) -> int:
    messages = _read_messages(args.file)
    if args.local:
        from .prepare import prepare

        prepared = prepare(
            messages,
            args.strategies,
            save_file=args.save_file,
            config=_snapshot(args),
            format=args.format,
        )
        result_messages: list[Any] = prepared.messages
        report: Any = prepared.report
    else:
        from .client import Client

        overrides = _overrides(args.set) or None
        # The daemon runs elsewhere: it needs the absolute path, not ours relative to our cwd.
        save_file = os.path.abspath(args.save_file) if args.save_file else None
        with Client(_socket_path(args), timeout=args.timeout) as client:
            remote = client.prepare(
                messages, args.strategies, save_file=save_file, config=overrides, format=args.format
            )
        result_messages, report = remote.messages, remote.report
    _warn(report)
    if args.report:
        _write_json({"messages": result_messages, "report": report})
    else:
        _write_json(result_messages)
    return EXIT_OK


def _warn(report: Sequence[StrategyReport]) -> None:
    """Foreign tool traffic is never a silent no-op: say so on stderr."""
    for entry in report:
        for warning in entry.warnings or ():
            print(f"scoutd: warning: {warning}", file=sys.stderr)


def _add_format(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format",
        choices=(AUTO, *FORMATS),
        default=AUTO,
        help="message format (default: detected from the messages; see docs/FORMATS.md)",
    )


def _counts(report: StrategyReport) -> str:
    def side(prefix: str) -> str:
        values = [
            (label, getattr(report, f"{prefix}_{label}"))
            for label in ("kept", "protected", "truncated", "dropped")
        ]
        return ", ".join(f"{value} {label}" for label, value in values)

    parts = [
        f"calls: {side('calls')}",
        f"outputs: {side('outputs')}",
        f"chars: {report.chars_before} -> {report.chars_after}",
        f"notice: {'inserted' if report.notice else 'no'}",
        f"inbox delivered: {report.inbox_delivered}",
    ]
    return "; ".join(parts)


def _cell(value: Any, width: int = 40) -> str:
    text = "-" if value is None else value if isinstance(value, str) else _encode(value).decode()
    text = text.replace("\n", " ")
    return text if len(text) <= width else text[: width - 3] + "..."


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: set[int]) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = []
    for row in [header, *rows]:
        cells = [
            cell.rjust(widths[i]) if i in numeric else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        lines.append("  " + "  ".join(cells).rstrip())
    return lines


def _explain_lines(report: StrategyReport) -> list[str]:
    lines = [f"strategy {report.strategy}"]
    actions = report.actions
    if actions is None:
        lines.append("  (no per-message detail from this strategy)")
    elif not actions:
        lines.append("  (no tool messages)")
    else:
        header = ("#", "role", "id", "name", "pos", "action", "chars")
        rows = [
            (
                str(action.index),
                action.role,
                _cell(action.id),
                _cell(action.name),
                str(action.position),
                action.action,
                f"{action.chars_before} -> {action.chars_after}",
            )
            for action in actions
        ]
        lines.extend(_table(header, rows, numeric={0, 4}))
    lines.append("  " + _counts(report))
    return lines


def _cmd_explain(args: argparse.Namespace) -> int:
    from .prepare import prepare

    messages = _read_messages(args.file)
    # No save_file, ever: explaining must not consume an agent's inbox.
    prepared = prepare(
        messages, args.strategies, config=_snapshot(args), detail=True, format=args.format
    )
    _warn(prepared.report)
    if args.json:
        _write_json(prepared.report)
        return EXIT_OK
    lines: list[str] = []
    for report in prepared.report:
        if lines:
            lines.append("")
        lines.extend(_explain_lines(report))
    lines.append("")
    lines.append(
        f"{len(messages)} messages in, {len(prepared.messages)} messages out"
        f" ({prepared.format} format, stable prefix {prepared.stable_prefix})"
    )
    print("\n".join(lines))
    return EXIT_OK


def _cmd_notify(args: argparse.Namespace) -> int:
    from .inbox import write_notice

    if args.text == "-":
        try:
            text = sys.stdin.buffer.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CliError(f"the notice on stdin is not UTF-8: {exc}") from exc
    else:
        text = args.text
    if not text.strip():
        raise CliError("the notice is empty")
    try:
        path = write_notice(args.save_file, text, name=args.name)
    except ValueError as exc:  # a bad --name
        raise CliError(str(exc)) from exc
    print(path)
    return EXIT_OK


def _cmd_abort(args: argparse.Namespace) -> int:
    from .inbox import AbortNotWritten, inbox_removed_dir, record_problem, write_abort

    try:
        print(write_abort(args.save_file, args.reason))
    except AbortNotWritten as exc:
        # Fails closed all the same: the entry already there aborts the agent.
        return _fail(f"{exc.filename!r}: {exc.strerror}; see docs/OPERATIONS.md")
    problem = record_problem(args.save_file)
    if problem is None:
        return EXIT_OK
    # The abort still stops the agent (it fails closed), but the operator must know
    # that its record will not be in the removed directory, and why.
    return _fail(
        f"the abort stops the agent, but its record cannot be written to"
        f" {inbox_removed_dir(args.save_file)!r} ({problem}): it goes to a hidden"
        " .abort-* file in the inbox, or the abort stays in place; see docs/OPERATIONS.md"
    )


def _cmd_inbox(args: argparse.Namespace) -> int:
    """``scoutd inbox SAVE_FILE``: what is pending, listed without taking anything."""
    from .inbox import list_inbox, listing_lines, listing_record

    try:
        listing = list_inbox(args.save_file)
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    except OSError as exc:
        raise CliError(f"cannot list the inbox: {exc}") from exc
    if args.json:
        _write_json(listing_record(listing))
    else:
        print("\n".join(listing_lines(listing)))
    return EXIT_OK


def _flatten(prefix: str, value: Any, out: list[tuple[str, str]]) -> None:
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _flatten(f"{prefix}.{key}" if prefix else str(key), item, out)
    elif isinstance(value, str):
        out.append((prefix, value))
    else:
        out.append((prefix, "-" if value is None else _encode(value).decode()))


def _cmd_status(args: argparse.Namespace) -> int:
    from .client import Client

    with Client(_socket_path(args), timeout=args.timeout) as client:
        status = client.status()
    if args.json:
        _write_json(status)
        return EXIT_OK
    rows: list[tuple[str, str]] = []
    _flatten("", status, rows)
    width = max((len(key) for key, _ in rows), default=0)
    for key, value in rows:
        print(f"{key.ljust(width)}  {value}")
    return EXIT_OK


def _render(key: str, value: Any) -> str:
    """A value as it would be written in the TOML file."""
    if key == "daemon.socket_mode" and isinstance(value, int):
        return format(value, "#o")
    if value is None:
        return "(unset)"
    return _encode(value).decode()


def _effective(config: Config) -> list[tuple[str, Any, str]]:
    """Every (key, value, origin) of a snapshot, in table then field order."""
    rows: list[tuple[str, Any, str]] = []
    tables: list[tuple[str, PromptConfig | DaemonConfig]] = [
        ("prompt", config.prompt),
        ("daemon", config.daemon),
    ]
    for table, struct in tables:
        for field in struct.__struct_fields__:
            key = f"{table}.{field}"
            rows.append((key, getattr(struct, field), config.origins.get(key, "default")))
    for name, target in sorted(config.plugins.items()):
        key = f"plugins.{name}"
        rows.append((key, target, config.origins.get(key, "file")))
    return rows


def _cmd_config_show(args: argparse.Namespace) -> int:
    config = _snapshot(args)
    rows = _effective(config)
    if args.json:
        _write_json(
            {
                "path": config.path,
                "values": {key: {"value": value, "origin": origin} for key, value, origin in rows},
            }
        )
        return EXIT_OK
    source = config.path or "none (built-in defaults and environment)"
    print(f"# config file: {source}")
    for key, value, origin in rows:
        print(f"{key} = {_render(key, value)}  ({origin})")
    return EXIT_OK


def _cmd_config_check(args: argparse.Namespace) -> int:
    # The file alone: environment variables would be a different thing to check.
    from .server import load_daemon_config  # the daemon's modules: loaded only when needed

    load_daemon_config(args.file, environ={})
    print(f"ok: {args.file}")
    return EXIT_OK


def _run_simulate(argv: list[str]) -> int:
    """Hand the rest of the command line to the simulator, which owns its flags."""
    try:
        simulate = importlib.import_module("scoutd.simulate")
    except ModuleNotFoundError as exc:
        if exc.name != "scoutd.simulate":
            raise CliError(f"the simulate command needs a missing module: {exc.name}") from exc
        raise CliError("the simulate command is not available in this installation") from exc
    entry = getattr(simulate, "main", None)
    if not callable(entry):
        raise CliError("the simulate command is not available in this installation")
    return int(entry(argv))


# ---------------------------------------------------------------- parser


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors kept to the usage line and one error line."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _add_config(parser: argparse.ArgumentParser, *, overrides: bool = True) -> None:
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="config file (default: $SCOUTD_CONFIG, else /etc/scoutd/scoutd.toml if present)",
    )
    if overrides:
        parser.add_argument(
            "--set",
            metavar="KEY=VALUE",
            action="append",
            type=_parse_setting,
            help="override a [prompt] key for this call (VALUE as JSON, else a string); repeatable",
        )


def _add_client(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--socket",
        metavar="PATH",
        help="daemon socket (default: $SCOUTD_SOCKET, else [daemon].socket_path)",
    )
    parser.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=_positive_seconds,
        default=60.0,
        help="give up on the daemon after this long (default: %(default)s)",
    )


def _add_strategies(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--strategies",
        metavar="S",
        help="comma-separated strategy names (default: [prompt].prompt_strategies, "
        "else shorten_tools_cost_aware,inbox)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The whole command line (exposed for documentation and tests)."""
    parser = _Parser(
        prog="scoutd",
        description="Prompt strategies, inbox notices and the scoutd daemon.",
        epilog="exit codes: 0 ok, 1 error, 2 usage, 3 aborted",
    )
    parser.add_argument("--version", action="version", version=f"scoutd {__version__}")
    parser.add_argument(
        "--config",
        dest="global_config",
        metavar="FILE",
        help="config file for any command (default: $SCOUTD_CONFIG, else "
        "/etc/scoutd/scoutd.toml if present)",
    )
    verbs = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def verb(name: str, help_text: str, handler: Callable[[argparse.Namespace], int]) -> Any:
        sub = verbs.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(handler=handler)
        return sub

    serve = verb("serve", "run the daemon in the foreground", _cmd_serve)
    _add_config(serve, overrides=False)
    serve.add_argument(
        "--socket", metavar="PATH", help="listen here instead of [daemon].socket_path"
    )

    prep = verb("prepare", "prepare a prompt and print the messages as JSON", _cmd_prepare)
    prep.add_argument(
        "file", nargs="?", default="-", metavar="FILE", help="JSON messages (default: stdin)"
    )
    _add_strategies(prep)
    prep.add_argument("--save-file", metavar="F", help="the chat's save file (enables the inbox)")
    _add_config(prep)
    prep.add_argument("--local", action="store_true", help="run in this process, not the daemon")
    _add_client(prep)
    prep.add_argument("--report", action="store_true", help="print {messages, report}")
    _add_format(prep)

    explain = verb("explain", "show what each strategy does to each tool message", _cmd_explain)
    explain.add_argument("file", metavar="FILE", help="JSON messages ('-' for stdin)")
    _add_strategies(explain)
    _add_config(explain)
    explain.add_argument("--json", action="store_true", help="print the report as JSON")
    _add_format(explain)

    notify = verb("notify", "drop a notice into a chat's inbox", _cmd_notify)
    notify.add_argument("save_file", metavar="SAVE_FILE")
    notify.add_argument("text", metavar="TEXT", help="the notice ('-' reads it from stdin)")
    notify.add_argument("--name", help="file name in the inbox (default: a unique name)")

    abort = verb("abort", "ask the agent of a chat to stop", _cmd_abort)
    abort.add_argument("save_file", metavar="SAVE_FILE")
    abort.add_argument("reason", metavar="REASON", nargs="?", default="")

    pending = verb("inbox", "list a chat's pending notices and abort, taking none", _cmd_inbox)
    pending.add_argument("save_file", metavar="SAVE_FILE", help="the chat's save file")
    pending.add_argument("--json", action="store_true", help="print the listing as JSON")

    status = verb("status", "show the daemon's status", _cmd_status)
    _add_client(status)
    _add_config(status, overrides=False)
    status.add_argument("--json", action="store_true", help="print the status as JSON")

    config = verbs.add_parser("config", help="show or check the configuration")
    config_verbs = config.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    show = config_verbs.add_parser("show", help="every effective value and where it came from")
    show.set_defaults(handler=_cmd_config_show)
    _add_config(show)
    show.add_argument("--json", action="store_true", help="print as JSON")
    check = config_verbs.add_parser("check", help="validate a config file")
    check.set_defaults(handler=_cmd_config_check)
    check.add_argument("file", metavar="FILE")

    simulate = verbs.add_parser(
        "simulate",
        help="simulate a growing conversation (see 'scoutd simulate --help')",
        add_help=False,
    )
    simulate.add_argument("args", nargs=argparse.REMAINDER)
    simulate.set_defaults(handler=lambda args: _run_simulate(list(args.args)))
    return parser


def _simulate_argv(argv: Sequence[str]) -> tuple[list[str], str | None] | None:
    """The simulator's own argv (and a global ``--config``) for ``simulate``, else None.

    Dispatched before argparse so that every flag after the verb, ``--help``
    included, belongs to the simulator.
    """
    rest = list(argv)
    config: str | None = None
    while rest and (rest[0] == "--config" or rest[0].startswith("--config=")):
        if "=" in rest[0]:
            config, rest = rest[0].partition("=")[2], rest[1:]
        elif len(rest) >= 2:
            config, rest = rest[1], rest[2:]
        else:
            return None
    if rest and rest[0] == "simulate":
        return rest[1:], config
    return None


# ---------------------------------------------------------------- entry point


def _fail(message: str, code: int = EXIT_ERROR) -> int:
    print(f"scoutd: {message}", file=sys.stderr)
    return code


def _dispatch(argv: list[str]) -> int:
    simulate = _simulate_argv(argv)
    if simulate is not None:
        simulate_argv, config = simulate
        if config is not None:
            # The simulator reads the config like the library: through the environment.
            os.environ["SCOUTD_CONFIG"] = config
        return _run_simulate(simulate_argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    handler: Callable[[argparse.Namespace], int] = args.handler
    return handler(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``scoutd`` command; return its exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    try:
        return _dispatch(arguments)
    except Aborted as exc:
        return _fail(f"aborted: {exc.reason}", EXIT_ABORTED)
    except (CliError, ScoutdError, FormatError, InvalidMessages) as exc:
        return _fail(str(exc))
    except BrokenPipeError:
        # The reader went away (``scoutd prepare ... | head``): not worth a message.
        _silence_stdout()
        return EXIT_ERROR
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(f"{where}{exc.strerror or exc}")
    except Exception as exc:
        if os.environ.get(DEBUG_ENV):
            traceback.print_exc()
        return _fail(f"unexpected error: {type(exc).__name__}: {exc}")


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
