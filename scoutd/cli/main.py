"""The ``scoutd`` command line: the parser built from the verb table, and ``main``."""

from __future__ import annotations

import argparse
import errno
import io
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from .._version import __version__
from ..errors import Aborted, ConfigError, FormatError, ScoutdError, UnknownStrategy
from ..paths import printable
from .arg_types import path
from .common import (
    EXIT_ABORTED,
    EXIT_ERROR,
    EXIT_USAGE,
    CliError,
    Handler,
    Parser,
    Verb,
    examples_epilog,
)
from .registry import VERBS
from .simulate import run_simulate, simulate_argv

__all__ = ["build_parser", "main", "run"]

# Set to show the traceback of an unexpected error (a bug, or a broken plugin)
# instead of the one-line message.
DEBUG_ENV = "SCOUTD_DEBUG"

_EPILOG = (
    "exit codes: 0 ok, 1 runtime failure, 2 usage or configuration mistake, 3 aborted,\n"
    "  4 incomplete (fleet: a command did not reach every chat it matched)\n"
    "docs: README.md, docs/OPERATIONS.md ('scoutd COMMAND --help' for each command)"
)


def _add_verb(verbs: Any, verb: Verb) -> None:
    """Add ``verb`` (and its actions) under the subparsers action ``verbs``."""
    sub: argparse.ArgumentParser = verbs.add_parser(
        verb.name,
        help=verb.help,
        description=verb.help,
        epilog=examples_epilog(verb.examples),
        add_help=not verb.passthrough,
    )
    # The innermost parser wins: an unknown option is reported with its usage.
    sub.set_defaults(handler=verb.run, verb_parser=sub, logs=verb.logs)
    if verb.passthrough:
        sub.add_argument("args", nargs=argparse.REMAINDER, help="the verb's own arguments")
    if verb.configure is not None:
        verb.configure(sub)
    if verb.actions:
        actions = sub.add_subparsers(dest=f"{verb.name}_action", metavar="ACTION", required=True)
        for action in verb.actions:
            _add_verb(actions, action)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole command line (exposed for documentation and tests).

    Given ``argv``, the command line about to be parsed, only the verbs it
    names get their options: the others are listed, for ``--help``, but not
    built (argparse can only choose a verb named exactly). Building all twelve
    would cost a light verb such as ``scoutd notify`` more than its own work.
    """
    parser = Parser(
        prog="scoutd",
        description="Prompt strategies, inbox notices and the scoutd daemon.",
        epilog=_EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"scoutd {__version__}")
    parser.add_argument(
        "--config",
        dest="global_config",
        metavar="FILE",
        type=path,
        help="config file for any command (default: $SCOUTD_CONFIG, else "
        "/etc/scoutd/scoutd.toml if present, else the running daemon's)",
    )
    parser.set_defaults(verb_parser=parser)
    verbs = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    named = None if argv is None else set(argv)
    for verb in VERBS:
        if named is None or verb.name in named:
            _add_verb(verbs, verb)
        else:
            # never parsed (a verb named is built whole), so without its own --help
            verbs.add_parser(verb.name, help=verb.help, add_help=False)
    return parser


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """Parse ``argv``; an unknown option is reported with the usage of its own verb."""
    args, extras = parser.parse_known_args(argv)
    if extras:
        owner: argparse.ArgumentParser = args.verb_parser
        if args.command in argv and argv.index(extras[0]) < argv.index(args.command):
            owner = parser  # given before the verb: the top level's mistake
        owner.error(f"unrecognized arguments: {' '.join(extras)}")
    return args


def _dispatch(argv: list[str]) -> int:
    simulate = simulate_argv(argv)
    if simulate is not None:
        simulate_args, config = simulate
        if config is not None:
            # The simulator reads the config like the library: through the environment.
            os.environ["SCOUTD_CONFIG"] = config
        from ..daemon_log import command_logging

        with command_logging():
            return run_simulate(simulate_args)
    parser = build_parser(argv)
    try:
        args = _parse(parser, argv)
    except SystemExit as exc:  # --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    handler: Handler = args.handler
    if not args.logs:
        return handler(args)
    from ..daemon_log import command_logging  # here: not for --help nor a light verb

    with command_logging():
        return handler(args)


def _fail(message: str, code: int = EXIT_ERROR) -> int:
    """One error line on stderr, whatever the message holds: a path or an abort's
    reason may be an agent's, with escape sequences or newlines in it."""
    print(f"scoutd: {printable(message)}", file=sys.stderr)
    return code


def run() -> NoReturn:
    """The ``scoutd`` command itself (the console script, ``python -m scoutd``):
    :func:`main`, then the process ends.

    Once the command is done and its output flushed, it ends at once
    (``os._exit``) when nothing is registered to run at exit and no other
    thread runs: the interpreter's teardown of the modules a light verb loaded
    took 4 of its 43 ms (docs/PERFORMANCE.md, "The teardown skipped"). A command that
    logs registers logging's flush, so it exits as usual, as does one whose
    flush fails.
    """
    code = main()
    if _nothing_left_to_run():
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            pass  # the usual exit says what it can
        else:
            os._exit(code)
    sys.exit(code)


def _nothing_left_to_run() -> bool:
    """Whether no exit callback is registered (logging's flush, a temporary
    directory's cleanup) and no thread but this one runs."""
    import atexit

    callbacks = getattr(atexit, "_ncallbacks", None)  # CPython's count; else assume some
    if callbacks is None or callbacks() != 0:
        return False
    threading = sys.modules.get("threading")
    return threading is None or threading.active_count() == 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``scoutd`` command; return its exit code (docs/OPERATIONS.md)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if sys.stdout is None:  # started with fd 1 closed (``scoutd status >&-``)
        sys.stdout = _closed_stdout()
    if sys.stderr is None:  # started with fd 2 closed (``scoutd prepare F 2>&-``)
        # ``print(file=None)`` writes to stdout: a warning would land in the JSON a
        # script reads. The messages are lost instead; the exit code still tells.
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
    if sys.stdout is sys.__stdout__ and isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout = _whole_writes(sys.stdout)
    try:
        code = _dispatch(arguments)
        sys.stdout.flush()  # here, not at exit: a reader gone is answered below
        return code
    except Aborted as exc:
        return _fail(f"aborted: {exc.reason}", EXIT_ABORTED)
    except CliError as exc:
        return _fail(str(exc), exc.exit_code)
    except (ConfigError, UnknownStrategy) as exc:
        # A mistake in what was asked, whether found here or by the daemon.
        return _fail(str(exc), EXIT_USAGE)
    except (ScoutdError, FormatError) as exc:
        return _fail(str(exc))
    except BrokenPipeError:
        # The reader went away (``scoutd prepare ... | head``): not worth a message.
        _silence_stdout()
        return EXIT_ERROR
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except MemoryError:  # a memory limit (ulimit -v, a cgroup's) under a large input
        return _fail("not enough memory (decoded JSON takes up to some 40 times its bytes)")
    except OSError as exc:
        return _fail(_os_error(exc))
    except Exception as exc:
        if os.environ.get(DEBUG_ENV):
            import traceback  # only here: a light verb never pays for it

            traceback.print_exc()
        return _fail(f"unexpected error: {type(exc).__name__}: {printable(str(exc))}")


def _os_error(exc: OSError) -> str:
    """``exc`` in one line, its file names escaped: an agent may have chosen them
    (docs/RELIABILITY.md, "An abort fails closed", rule 7)."""
    names = [
        printable(name if isinstance(name, (str, bytes)) else str(name))
        for name in (exc.filename, exc.filename2)
        if name is not None and name != ""
    ]
    where = f"{' -> '.join(names)}: " if names else ""
    if exc.strerror:
        return f"{where}{exc.strerror}"
    return f"{where}{printable(str(exc))}"


class _ClosedOutput(io.RawIOBase):
    """Standard output when fd 1 was closed: every write fails, so that a verb whose
    output is lost ends in an error (exit 1) instead of a silent success."""

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        raise OSError(errno.EBADF, "standard output is closed: the output was not written")


def _closed_stdout() -> io.TextIOWrapper:
    """A ``sys.stdout`` for a closed fd 1 (Python leaves it None: ``print`` then drops
    everything without a word), failing at the first write."""
    return io.TextIOWrapper(_ClosedOutput(), encoding="utf-8", write_through=True)  # type: ignore[arg-type]


class _WholeWrites(io.BufferedIOBase):
    """Standard output's buffer, each write finished or failed.

    A blocked write to a pipe whose reader then goes away returns the bytes
    already taken, and a buffered writer hands that short count back without
    an error; the text layer above it drops the rest. The output was then lost
    with exit 0, or 1, as the timing fell. Here the rest is written again, and
    the next write meets the broken pipe.
    """

    def __init__(self, inner: Any) -> None:
        super().__init__()
        self._inner = inner

    @property
    def name(self) -> Any:
        return self._inner.name

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        total = len(view)
        while view:
            done = self._inner.write(view)
            if not done:  # a non-blocking fd that would block: not ours to wait on
                raise BlockingIOError(errno.EAGAIN, "standard output would block")
            view = view[done:]
        return total

    def flush(self) -> None:
        self._inner.flush()

    def fileno(self) -> int:
        return int(self._inner.fileno())

    def isatty(self) -> bool:
        return bool(self._inner.isatty())


def _whole_writes(out: io.TextIOWrapper) -> io.TextIOWrapper:
    """``out`` with its buffer behind :class:`_WholeWrites`, encoded as before."""
    out.flush()
    return io.TextIOWrapper(
        _WholeWrites(out.buffer),
        encoding=out.encoding,
        errors=out.errors,
        line_buffering=out.line_buffering,
    )


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
