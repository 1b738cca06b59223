"""``scoutd fleet`` and the ``--fleet`` of ``notify`` and ``abort``: a fleet from the shell.

``scoutd notify --fleet TARGET TEXT`` and ``scoutd abort --fleet TARGET
[REASON]`` publish a command to the fleet's Redis instead of writing a file;
TARGET is ``all``, ``host=NAME``, ``label=NAME``, ``chat=GLOB`` or
``session=LABEL``. ``scoutd fleet status`` shows the hosts, their sessions and
backlog; ``scoutd fleet receipts ID`` which hosts answered a command, and
with which chats (docs/OPERATIONS.md, "A fleet"). All of them read ``[fleet]``
from the operator's config file (``--config``).

``fleet receipts`` exits 0 when every known host answered cleanly,
``EXIT_INCOMPLETE`` (4) when an answer says a chat was not reached (a refusal,
an error, an unreadable receipt) and 1 while a known host has not answered.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import ConfigError
from ..paths import printable
from .common import (
    EXIT_ERROR,
    EXIT_INCOMPLETE,
    EXIT_OK,
    CliError,
    UsageError,
    Verb,
    add_config,
    found_config,
    notice_text,
    warn,
    write_json,
)

if TYPE_CHECKING:  # the config code is the verbs' own: not for --help
    from ..config import FleetConfig
    from ..fleet.operator import Receipts

__all__ = ["FLEET", "add_fleet", "publish_command"]

T = TypeVar("T")


def add_fleet(parser: argparse.ArgumentParser) -> None:
    """``--fleet``: the first argument is then a fleet TARGET, not a save file."""
    parser.add_argument(
        "--fleet",
        action="store_true",
        help="publish to the fleet's Redis ([fleet] of the config) instead of writing a file;"
        " SAVE_FILE is then a TARGET: all, host=NAME, label=NAME, chat=GLOB or session=LABEL",
    )


def _fleet_config(args: argparse.Namespace) -> FleetConfig:
    """The ``[fleet]`` table, read alone: another table's mistake cannot stop a fleet verb."""
    from ..config import read_fleet_table

    path, where = found_config(args)
    try:
        fleet = None if path is None else read_fleet_table(path)
    except ConfigError as exc:
        raise UsageError(str(exc)) from exc
    if fleet is None:
        shown = printable(path) if path else "no config file"
        raise UsageError(f"no [fleet] table in {shown} ({where}); see docs/OPERATIONS.md")
    return fleet


def _run(call: Callable[[], Awaitable[T]]) -> T:
    """Run one Redis exchange; an unreachable or refusing Redis is one error line."""
    import anyio

    from ..fleet.link import LinkErrors

    try:
        return anyio.run(call)
    except ConfigError as exc:  # redis-py missing, a password file unreadable
        raise UsageError(str(exc)) from exc
    except LinkErrors.get() as exc:
        raise CliError(f"fleet Redis: {exc}") from exc


def publish_command(args: argparse.Namespace, kind: str, text: str) -> int:
    """``notify --fleet`` / ``abort --fleet``: publish, print the command id."""
    from ..fleet.operator import publish, trim_commands
    from ..fleet.select import TargetError, parse_target

    if getattr(args, "name", None):
        raise UsageError("--name does not apply to --fleet (the notice is named after its id)")
    try:
        selector, value = parse_target(args.save_file)
    except TargetError as exc:
        raise UsageError(str(exc)) from exc
    if kind == "notice":
        text = notice_text(text)
    config = _fleet_config(args)
    import getpass  # the fleet verbs' own: not for the light ones

    by = getpass.getuser()

    async def call() -> Any:
        return await publish(config, kind, selector, value, text, by=by, trim=False)

    try:
        command, entry = _run(call)
    except ValueError as exc:
        raise UsageError(f"invalid fleet command: {exc}") from exc
    print(command.id, flush=True)  # published: said before anything else can fail
    print(
        f"published {kind} {command.id} (entry {printable(entry)}) for"
        f" {printable(args.save_file)}; see: scoutd fleet receipts {command.id}",
        file=sys.stderr,
    )
    try:  # retention only: the command is out, and its id is printed
        _run(lambda: trim_commands(config, entry))
    except CliError as exc:
        warn(f"published, but the command stream was not trimmed by age: {exc}")
    return EXIT_OK


def _status(args: argparse.Namespace) -> int:
    from ..fleet.operator import fleet_view

    config = _fleet_config(args)
    view = _run(lambda: fleet_view(config))
    if args.json:
        write_json(view)
        return EXIT_OK
    backlog = {g.host: g for g in view.groups}
    print(
        f"hosts: {len(view.hosts)} known, {len(view.alive)} alive;"
        f" commands in the stream: {view.commands}"
    )
    for beat in view.hosts:
        group = backlog.get(beat.host)
        state = "alive" if beat.host in view.alive else f"silent {view.at - beat.at:.0f} s"
        pending = "-" if group is None else f"{group.pending} pending, {group.lag} unread"
        labels = printable(",".join(beat.labels)) or "-"
        print(
            f"  {printable(beat.host)}  {state}  sessions {beat.sessions}  labels {labels}"
            f"  commands {pending}"
        )
    for command in view.recent:
        age = view.at - command["issued"]  # both on Redis's clock
        print(
            f"  {command['id']}  {command['kind']}  {printable(command['target'])}"
            f"  {age:.0f} s ago  receipts {command['receipts']}"
        )
    return _conflicted(view.conflicts)


def _conflicted(hosts: list[str]) -> int:
    """Warn of each host name two daemons share; EXIT_INCOMPLETE if any (else EXIT_OK)."""
    for host in hosts:
        warn(
            f"two daemons beat as host {printable(host)}: each command reaches only one of"
            " them (give each daemon its own [fleet] host; one name, one daemon)"
        )
    return EXIT_INCOMPLETE if hosts else EXIT_OK


def _when(at: float) -> str:
    """A receipt's time as UTC text; a host wrote it, so any float: one out of range says so."""
    try:
        moment = time.gmtime(at)
    except (OverflowError, OSError, ValueError):  # past time_t, or NaN
        return f"time out of range ({at!r})"
    if not 1 <= moment.tm_year <= 9999:
        return f"time out of range ({at!r})"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", moment)


def _print_receipts(found: Receipts) -> None:
    """The text form: a summary line, then each answer with its chats, every name escaped."""
    answered = len(found.receipts) + len(found.unreadable)
    print(
        f"command {found.command}: {answered} host(s) answered,"
        f" {found.chats} chat(s) reached; no answer yet from: "
        + (", ".join(printable(h) for h in found.missing) or "none")
        + "; refused, failed or unreadable on: "
        + (", ".join(printable(h) for h in found.incomplete) or "none")
    )
    for receipt in found.receipts:
        print(
            f"  {printable(receipt.host)}  {_when(receipt.at)}  written {len(receipt.chats)}"
            f"  already {len(receipt.already)}  refused {len(receipt.refused)}"
            + (f"  error {printable(receipt.error)}" if receipt.error is not None else "")
        )
        for chat in receipt.chats + receipt.already:
            print(f"    {printable(chat)}")
        for refusal in receipt.refused:
            print(f"    refused: {printable(refusal)}")
    for bad in found.unreadable:
        print(f"  {printable(bad.host)}  unreadable receipt: {printable(bad.reason)}")


def _command_id(text: str) -> str:
    """``text`` if it is a command id as publishing makes them, else a usage error: a
    mistyped id has no receipts, and would read as "no host answered yet" forever
    (exit 1) or, with no host beating, as a command every host answered (exit 0)."""
    import msgspec

    from ..fleet.wire import CommandId

    try:
        return msgspec.convert(text, CommandId)
    except msgspec.ValidationError:
        raise UsageError(
            f"'{printable(text)}' is not a command id (the 32 hex digits that"
            " notify --fleet or abort --fleet printed)"
        ) from None


def _receipts(args: argparse.Namespace) -> int:
    from ..fleet.operator import receipts

    command = _command_id(args.command)
    config = _fleet_config(args)
    found = _run(lambda: receipts(config, command))
    if args.json:
        write_json(found)
    else:
        _print_receipts(found)
    # a chat not reached is final news; a host not answered yet may still answer
    if _conflicted(found.conflicts) or found.incomplete:
        return EXIT_INCOMPLETE
    return EXIT_ERROR if found.missing else EXIT_OK


def _configure_status(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the view as JSON")
    add_config(parser, overrides=False)


def _configure_receipts(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "command", metavar="ID", help="the command id that notify/abort --fleet printed"
    )
    parser.add_argument("--json", action="store_true", help="print the receipts as JSON")
    add_config(parser, overrides=False)


FLEET = Verb(
    name="fleet",
    help="the fleet's hosts, sessions and command receipts (through its Redis)",
    examples=(
        "scoutd fleet status --config ops.toml",
        "scoutd fleet receipts 5f0c...e1 --config ops.toml",
    ),
    actions=(
        Verb(
            name="status",
            help="hosts alive, sessions per host, commands pending, recent commands"
            f" (exit {EXIT_INCOMPLETE} when two daemons beat under one host name)",
            examples=("scoutd fleet status", "scoutd fleet status --json"),
            configure=_configure_status,
            run=_status,
        ),
        Verb(
            name="receipts",
            help="which hosts answered a command and which chats it reached"
            f" (exit {EXIT_INCOMPLETE} when an answer lists a refused chat or an error, or"
            " cannot be read, or two daemons beat under one host name; else"
            f" {EXIT_ERROR} while a known host has not answered)",
            examples=("scoutd fleet receipts 5f0c...e1", "scoutd fleet receipts --json 5f0c...e1"),
            configure=_configure_receipts,
            run=_receipts,
        ),
    ),
)
