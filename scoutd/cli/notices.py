"""``scoutd notify``, ``scoutd abort`` and ``scoutd inbox``: a chat's inbox from the shell.

All three work on files directly (no daemon needed); the daemon, or the
library in the agent's own process, delivers them (docs/OPERATIONS.md,
"Notices and aborts"). ``notify`` and ``abort`` reach the chat directory
without following a symlink that neither root nor the operator made
(:mod:`scoutd.inbox.walk`), print the real path they wrote, and check the
result against the daemon that serves the chat (:mod:`scoutd.cli.serving`):
outside its roots, or in an inbox its account cannot list, is said on stderr
with a non-zero exit. Every path and name printed goes through
:func:`~scoutd.paths.printable`.
"""

from __future__ import annotations

import argparse
import os
import stat

from ..paths import printable
from .common import (
    EXIT_OK,
    CliError,
    UsageError,
    Verb,
    add_config,
    notice_text,
    save_file_path,
    warn,
    write_json,
)
from .fleet import add_fleet, publish_command
from .serving import Serving, serving

__all__ = ["ABORT", "INBOX", "NOTIFY"]

# The most of a waiting abort's reason shown when a second abort is refused.
_SHOWN_REASON_BYTES = 200


def _where_it_went(save_file: str, written: str) -> None:
    """Say loudly when the file went elsewhere than the path given suggests (a symlink)."""
    from ..inbox import inbox_dir  # the inbox code is the verbs' own: not for --help

    given = inbox_dir(save_file)
    real = os.path.dirname(written)
    if given != real:
        warn(
            f"{printable(given)} leads through symbolic links to {printable(real)}:"
            " the file was written there"
        )


def _warn_doubt(daemon: Serving) -> None:
    """Say what an unreadable configuration left unchecked (the file is written)."""
    doubt = daemon.doubt()
    if doubt is not None:
        warn(f"{doubt} (the file is written)")


def _unseen(daemon: Serving, written: str, what: str) -> None:
    """Fail (exit 1) when the daemon's account cannot list the inbox just written to."""
    problem = daemon.cannot_list(os.path.dirname(written))
    if problem is not None:
        raise CliError(
            f"{what} was written to {printable(written)}, but the daemon cannot list that"
            f" inbox ({problem}): the chat is not served until the inbox is repaired (the"
            " agent is stopped with a generic reason); see docs/OPERATIONS.md"
        )


def _owner_cannot_use(written: str) -> None:
    """Warn when the chat directory's owner (the agent, as a rule) could not empty the inbox.

    Its claims act only as it could (docs/RELIABILITY.md, "An abort fails
    closed", rule 3): in an inbox it may not list, write and search (one root
    made, say) a notice is never delivered. A warning only: the owner of the
    directory is a guess at the agent's account.
    """
    import pwd

    from ..security import groups_of, reach_problem

    inbox = os.path.dirname(written)
    try:
        owner = os.stat(os.path.dirname(inbox))
    except OSError:
        return
    try:
        gid = pwd.getpwuid(owner.st_uid).pw_gid
    except KeyError:  # an account without an entry: grant it the directory's group
        gid = owner.st_gid
    groups = groups_of(owner.st_uid, gid)
    problem = reach_problem(inbox, owner.st_uid, groups, os.R_OK | os.W_OK | os.X_OK)
    if problem is not None:
        warn(
            f"the chat directory's owner (uid {owner.st_uid}) cannot empty the inbox"
            f" ({problem}): an agent running as that account never gets its notices"
            " or takes its abort itself; see docs/OPERATIONS.md"
        )


def _unrecorded(save_file: str, written: str) -> str | None:
    """Where and why files of the inbox ``written`` to cannot be recorded; None: they can.

    Checked against the save file beside the inbox really written to (a
    symlink on the way resolved).
    """
    # not record_problem: the same check, without loading the pickup code (light verbs)
    from ..inbox.entries import removed_dir_problem
    from ..inbox.names import inbox_dir, inbox_removed_dir

    real = os.path.join(os.path.dirname(os.path.dirname(written)), os.path.basename(save_file))
    problem = removed_dir_problem(inbox_dir(real), inbox_removed_dir(real))
    if problem is None:
        return None
    return f"{printable(inbox_removed_dir(real))!r} ({problem})"


def _unwritten(what: str, save_file: str, exc: OSError) -> CliError | None:
    """Why ``what`` could not be written into the inbox of ``save_file``, naming the
    inbox; None when ``exc`` names a path of its own (a symlink on the way, a file
    where a directory goes), which says more. The name it carries otherwise is
    the temporary file's (``.inbox-123-...``), which tells the operator nothing."""
    if isinstance(exc.filename, str) and os.path.isabs(exc.filename):
        return None
    from ..inbox import inbox_dir

    return CliError(
        f"cannot write {what} into {printable(inbox_dir(save_file))}:"
        f" {exc.strerror or printable(str(exc))}"
    )


def _notify(args: argparse.Namespace) -> int:
    from ..inbox import write_notice

    if args.fleet:
        return publish_command(args, "notice", args.text)
    save_file = save_file_path(args.save_file)
    daemon = serving(args)
    problem = daemon.outside(save_file)
    if problem is not None:
        raise UsageError(f"refusing to write a notice the daemon would never deliver: {problem}")
    text = notice_text(args.text)
    if not text.strip():
        raise UsageError("the notice is empty")
    try:
        path = write_notice(save_file, text, name=args.name)
    except ValueError as exc:  # a bad --name
        raise UsageError(str(exc)) from exc
    except OSError as exc:
        unwritten = _unwritten("the notice", save_file, exc)
        if unwritten is None:
            raise
        raise unwritten from exc
    print(printable(path))
    _where_it_went(save_file, path)
    _warn_doubt(daemon)
    _unseen(daemon, path, "the notice")
    _owner_cannot_use(path)
    problem = _unrecorded(save_file, path)
    if problem is not None:
        # A notice is moved to its record before it is read: none is ever delivered.
        raise CliError(
            f"the notice was written to {printable(path)}, but its record cannot be written"
            f" to {problem}: every prepare leaves it in the inbox, undelivered, until that"
            " is repaired; see docs/OPERATIONS.md"
        )
    return EXIT_OK


def _configure_notify(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "save_file",
        metavar="SAVE_FILE",
        help="the agent's chat file; the notice goes to the inbox beside it "
        "(SAVE_FILE without its extension, plus .inbox/)",
    )
    parser.add_argument("text", metavar="TEXT", help="the notice ('-' reads it from stdin)")
    parser.add_argument(
        "--name",
        help="file name in the inbox (default: a unique name that sorts in drop order)",
    )
    add_fleet(parser)
    add_config(parser, overrides=False)


NOTIFY = Verb(
    name="notify",
    help="drop a notice into a chat's inbox",
    examples=(
        'scoutd notify ~/chats/a1/agent.chat "Please wrap up and write the summary."',
        'scoutd notify --name 01-priority.txt ~/chats/a1/agent.chat "Read this first."',
        'scoutd notify --fleet label=team-a "Wrap up within ten minutes."',
    ),
    configure=_configure_notify,
    run=_notify,
    logs=False,
)


def _waiting_reason(path: str, reason: str) -> str | None:
    """The start of the reason in the regular ``abort`` file at ``path``, to show.

    None when it cannot be read, or when it is ``reason`` itself (the same
    reason again is not worth a warning), however long. Opened without
    following symlinks and without blocking, as the inbox is the agent's to
    tamper with.
    """
    mine = reason.encode("utf-8", "surrogateescape")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, max(_SHOWN_REASON_BYTES, len(mine)) + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if data == mine:
        return None
    text = data[:_SHOWN_REASON_BYTES].decode("utf-8", "replace")
    return text + ("..." if len(data) > _SHOWN_REASON_BYTES else "")


def _abort(args: argparse.Namespace) -> int:
    from ..inbox import AbortNotWritten
    from ..inbox.writers import place_abort

    if args.fleet:
        return publish_command(args, "abort", args.reason)
    save_file = save_file_path(args.save_file)
    # Written before anything is asked of the configuration or the daemon: nothing
    # they could fail with may stop an abort (docs/OPERATIONS.md).
    try:
        path, written = place_abort(save_file, args.reason)
    except AbortNotWritten as exc:
        # Fails closed all the same: the entry already there aborts the agent.
        shown = printable(str(exc.filename))
        raise CliError(f"{shown}: {exc.strerror}; see docs/OPERATIONS.md") from exc
    except OSError as exc:
        unwritten = _unwritten("the abort", save_file, exc)
        if unwritten is None:
            raise
        raise unwritten from exc
    print(printable(path))
    daemon = serving(args)
    problem = daemon.outside(save_file)
    if problem is not None:
        # Written all the same: an agent using the library in its own process sees it.
        warn(f"the daemon will not push this abort to a session: {problem}")
    _where_it_went(save_file, path)
    _warn_doubt(daemon)
    _unseen(daemon, path, "the abort")
    _owner_cannot_use(path)
    waiting = None if written else _waiting_reason(path, args.reason)
    if waiting is not None:
        # An abort was already waiting: it is kept, with its reason (docs/OPERATIONS.md).
        warn(
            f"an abort is already waiting in {printable(os.path.dirname(path))!r} with the"
            f" reason {waiting!r}: the agent will be aborted with that reason; yours was not"
            " written"
        )
    if daemon.cannot_read(path):
        warn(
            f"the daemon (uid {daemon.uid}) cannot read {printable(path)}: the agent is"
            " stopped with a generic reason instead of yours"
        )
    problem = _unrecorded(save_file, path)
    if problem is not None:
        # The abort still stops the agent (it fails closed), but the operator must know
        # that its record will not be in the removed directory, and why.
        raise CliError(
            f"the abort stops the agent, but its record cannot be written to {problem}: it goes"
            " to a hidden"
            " .abort-* file in the inbox, or the abort stays in place; see docs/OPERATIONS.md"
        )
    return EXIT_OK


def _configure_abort(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "save_file",
        metavar="SAVE_FILE",
        help="the agent's chat file; the abort goes to the inbox beside it",
    )
    parser.add_argument(
        "reason",
        metavar="REASON",
        nargs="?",
        default="",
        help="why, shown to the agent as Aborted(REASON) (default: empty)",
    )
    add_fleet(parser)
    add_config(parser, overrides=False)


ABORT = Verb(
    name="abort",
    help="ask the agent of a chat to stop (a second abort keeps the first reason)",
    examples=(
        'scoutd abort ~/chats/a1/agent.chat "Runaway loop, stopping."',
        "scoutd abort ~/chats/a1/agent.chat",
        'scoutd abort --fleet "chat=/srv/agents/job-42/*.chat" "Job 42 cancelled."',
    ),
    configure=_configure_abort,
    run=_abort,
    logs=False,
)


def _inbox(args: argparse.Namespace) -> int:
    from ..inbox import list_inbox, listing_lines, listing_record

    try:
        listing = list_inbox(save_file_path(args.save_file))
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    except OSError as exc:
        raise CliError(f"cannot list the inbox: {exc}") from exc
    if args.json:
        write_json(listing_record(listing))
    else:
        print("\n".join(listing_lines(listing)))
    return EXIT_OK


def _configure_inbox(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "save_file", metavar="SAVE_FILE", help="the agent's chat file; its inbox is listed"
    )
    parser.add_argument("--json", action="store_true", help="print the listing as JSON")


INBOX = Verb(
    name="inbox",
    help="list a chat's pending notices and abort, taking none",
    examples=(
        "scoutd inbox ~/chats/fix.chat",
        "scoutd inbox --json ~/chats/fix.chat",
    ),
    configure=_configure_inbox,
    run=_inbox,
)
