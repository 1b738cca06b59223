"""``scoutd prepare`` and ``scoutd explain``: run the strategies on a message list."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import DaemonUnavailable
from ..paths import printable
from .common import (
    EXIT_OK,
    CliError,
    Verb,
    add_client,
    add_config,
    add_format,
    add_strategies,
    client_socket,
    overrides,
    read_messages,
    save_file_path,
    snapshot,
    warn,
    write_json,
)
from .explain_table import explain_lines

if TYPE_CHECKING:
    from ..protocol.report import StrategyReport

__all__ = ["EXPLAIN", "PREPARE"]

_CONVERSATION = "the conversation: a JSON list of messages, or an object with a 'messages' list"


def warn_foreign(report: Sequence[StrategyReport]) -> None:
    """Foreign tool traffic is never a silent no-op: say so on stderr."""
    for entry in report:
        for warning in entry.warnings or ():
            warn(warning)


def _prepare(args: argparse.Namespace) -> int:
    messages = read_messages(args.file)
    if args.local:
        from ..engine.prepare import prepare

        prepared = prepare(
            messages,
            args.strategies,
            save_file=None if args.save_file is None else save_file_path(args.save_file),
            config=snapshot(args),
            format=args.format,
        )
        result_messages: list[Any] = prepared.messages
        report: Any = prepared.report
    else:
        from ..client import Client

        # The daemon runs elsewhere: it needs the absolute path, not ours relative to our cwd.
        save_file = None if args.save_file is None else save_file_path(args.save_file)
        try:
            with Client(client_socket(args), timeout=args.timeout) as client:
                remote = client.prepare(
                    messages,
                    args.strategies,
                    save_file=save_file,
                    config=overrides(args) or None,
                    format=args.format,
                )
        except DaemonUnavailable as exc:
            raise CliError(f"{exc}; or prepare in this process with --local") from exc
        result_messages, report = remote.messages, remote.report
    warn_foreign(report)
    if args.report:
        write_json({"messages": result_messages, "report": report})
    else:
        write_json(result_messages)
    return EXIT_OK


def _configure_prepare(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file",
        nargs="?",
        default="-",
        metavar="FILE",
        help=f"{_CONVERSATION} ('-' or nothing: stdin)",
    )
    add_strategies(parser)
    parser.add_argument("--save-file", metavar="F", help="the chat's save file (enables its inbox)")
    add_config(parser)
    parser.add_argument("--local", action="store_true", help="run in this process, not the daemon")
    add_client(parser)
    parser.add_argument("--report", action="store_true", help="print {messages, report}")
    add_format(parser)


PREPARE = Verb(
    name="prepare",
    help="prepare a prompt and print the messages as JSON",
    examples=(
        "scoutd prepare --local examples/chats/scout.json",
        "scoutd prepare chat.json --save-file ~/chats/a1/agent.chat --report",
        "cat chat.json | scoutd prepare --local --set epoch_size=40 --strategies "
        "shorten_tools_epoch",
    ),
    configure=_configure_prepare,
    run=_prepare,
)


def _explain(args: argparse.Namespace) -> int:
    from ..engine.prepare import prepare

    messages = read_messages(args.file)
    # No save_file, ever: explaining must not consume an agent's inbox.
    prepared = prepare(
        messages, args.strategies, config=snapshot(args), detail=True, format=args.format
    )
    warn_foreign(prepared.report)
    if args.json:
        write_json(prepared.report)
        return EXIT_OK
    lines: list[str] = []
    for report in prepared.report:
        if lines:
            lines.append("")
        lines.extend(explain_lines(report))
    lines.append("")
    # Traffic of another format than the one named is passed through and counted nowhere
    # (a reason above may then say there is no tool output): the table says so too, not
    # only stderr, so that it reads true on its own (stdout saved to a file, say).
    lines.extend(f"warning: {printable(warning)}" for warning in prepared.warnings)
    lines.append(_footer(messages, prepared.messages, prepared.format, prepared.stable_prefix))
    print("\n".join(lines))
    return EXIT_OK


def _footer(messages: list[Any], out: list[Any], fmt: str, stable_prefix: int) -> str:
    """The last line of ``explain``: counts in and out, the format, the stable prefix.

    In a provider format the rows number the scout view (one message per tool
    call and per output), which holds more messages than the input: both
    counts are given, so that a row numbered past the input's count is not a
    surprise.
    """
    counts = f"{len(messages)} messages in, {len(out)} messages out"
    if fmt != "scout":
        from ..formats import scout_view

        view = len(scout_view(messages, fmt))
        if view != len(messages):
            counts += f" (the # column numbers the {view} of the scout view)"
    return f"{counts}; {fmt} format, stable prefix {stable_prefix}"


def _configure_explain(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file",
        metavar="FILE",
        help=f"{_CONVERSATION} ('-' for stdin)",
    )
    add_strategies(parser)
    add_config(parser)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    add_format(parser)


EXPLAIN = Verb(
    name="explain",
    help="show what each strategy does to each tool message (never touches an inbox)",
    examples=(
        "scoutd explain examples/chats/scout.json",
        "scoutd explain examples/chats/anthropic.json --strategies shorten_tools_epoch "
        "--set epoch_tool_call_threshold=2 --set epoch_full_tool_calls=2 --set epoch_size=2",
        "scoutd explain --json examples/chats/anthropic.json",
    ),
    configure=_configure_explain,
    run=_explain,
)
