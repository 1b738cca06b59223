"""``scoutd clear``: lift a chat's abort, so that its agent may run again.

An aborted chat stays aborted (docs/OPERATIONS.md, "An aborted chat stays
aborted"): consuming its ``abort`` left a marker beside it that every later
prepare honours. This verb removes that marker and an ``abort`` still waiting
in the inbox, never following a symlink; it works on files directly (no
daemon needed), as ``scoutd abort`` does.
"""

from __future__ import annotations

import argparse

from ..paths import printable
from .common import EXIT_OK, CliError, UsageError, Verb, save_file_path, warn

__all__ = ["CLEAR"]


def _clear(args: argparse.Namespace) -> int:
    from ..inbox.aborted import clear

    try:
        cleared = clear(save_file_path(args.save_file))
    except ValueError as exc:  # a save file without a name
        raise UsageError(str(exc)) from exc
    for path in cleared.removed:
        print(printable(path))
    for path, problem in cleared.failed:
        warn(f"{printable(path)} could not be removed: {printable(problem)}")
    if cleared.still is not None:
        raise CliError(f"the chat is still aborted: {printable(cleared.still)}")
    if not cleared.removed:
        warn("the chat was not aborted: nothing to clear")
    return EXIT_OK


def _configure_clear(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "save_file",
        metavar="SAVE_FILE",
        help="the agent's chat file; its abort marker and waiting abort are removed",
    )


CLEAR = Verb(
    name="clear",
    help="lift a chat's abort: its next run is served again",
    examples=(
        "scoutd clear ~/chats/a1/agent.chat",
        "scoutd clear /srv/agents/run-1.chat && scoutd inbox /srv/agents/run-1.chat",
    ),
    configure=_configure_clear,
    run=_clear,
)
