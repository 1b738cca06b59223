"""What a tool call does, from its name and arguments: read a file, search, run tests, ...

The default's retention (:mod:`.retention`) keeps old outputs by what they
are, and ``scoutd simulate --origins`` counts where hidden facts come from by
the same classes. A named tool (Claude Code's ``Read``, ``Grep``, ``Edit``,
...) is known by its name; a shell call by its command: a test runner that one
of its commands runs makes it a test run (not one a read or a search only
names: ``grep pytest``, ``cat tests/unittest_a.py``), else its first command
that is not ``cd``/``echo`` decides. A file read or an edit also names its
file and, for a read, the lines it covers (:class:`CallKind`). Pure code: no
I/O, deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import msgspec

from .shell_line import (
    SHELLS,
    line_commands,
    program_name,
    program_words,
    without_comments,
    without_heredocs,
)

__all__ = [
    "BUILD",
    "EDIT",
    "GIT",
    "KINDS",
    "OTHER",
    "READ",
    "SCRIPT",
    "SEARCH",
    "TASKS",
    "TEST",
    "WEB",
    "CallKind",
    "call_kind",
    "command_text",
    "tool_kind",
]

READ, SEARCH, TEST, BUILD, EDIT, GIT, SCRIPT, TASKS, WEB, OTHER = (
    "file read",
    "search/listing",
    "test run",
    "build/lint",
    "edit/write",
    "git",
    "script run",
    "agent tasks",
    "web/issues",
    "other",
)
KINDS = (READ, SEARCH, TEST, BUILD, EDIT, GIT, SCRIPT, TASKS, WEB, OTHER)

_READ_TOOLS = frozenset({"read", "read_file", "view", "view_file", "notebookread", "open_file"})
_SEARCH_TOOLS = frozenset(
    {"grep", "glob", "ls", "find", "search", "list_dir", "list_files", "file_search"}
)
_EDIT_TOOLS = frozenset(
    {"edit", "write", "multiedit", "notebookedit", "apply_patch", "write_file", "create_file"}
)
_SHELL_TOOLS = frozenset(
    {"bash", "shell", "execute", "run", "terminal", "exec_command", "run_command"}
)
_TEST = re.compile(
    r"\b(pytest|py\.test|unittest|tox|nox|jest|vitest|runtests|(?:go|cargo|mvn|gradle|mix) test|"
    r"(?:make|just|mise|npm|pnpm|yarn|bun|task)(?: run)? test)"
)
# Every test runner _TEST matches contains one of these hints, starting at most
# _RUNNER_LEAD characters after the runner's start ("pnpm run " before "test") and
# ending at most one character before the runner's end ("runtests"): _TEST is only
# searched around them (_runs_tests).
_TEST_HINTS = ("test", "tox", "nox", "jest")
_RUNNER_LEAD = 9
_BUILD = re.compile(
    r"\b(lint|golangci-lint|staticcheck|go (?:build|vet)|cargo (?:build|check|clippy)|tsc|eslint|"
    r"ruff|mypy|make|(?:mise|just|npm|pnpm|yarn|bun|mix|task) (?:run )?\w+|mix compile)\b"
)
# Redirections that write no file: one stream to another (2>&1, >&2), output thrown away.
_NO_WRITE = re.compile(r"[0-9]*>&[0-9]+|>\s*/dev/null")
_TASK_TOOLS = frozenset({"todowrite", "todoread", "skill", "exitplanmode", "askuserquestion"})
_READERS = frozenset({"cat", "head", "tail", "nl", "less", "more", "bat", "awk"})
_SEARCHERS = frozenset({"grep", "egrep", "rg", "ag", "find", "ls", "tree", "fd", "wc", "locate"})
_SCRIPTS = frozenset({"python", "python3", "node", "go", "ruby", "sh", "bash", "npx", "uv"})
_QUIET = frozenset({"cd", "echo", "true", "export", "source", "set", "pwd"})
# Besides the readers: what a read piped into them prints is still the file's lines.
_KEEP_LINES = frozenset({"sed", "sort", "uniq", "tee"})
# A file argument: a path with a `/` or a name with an extension, not an option.
_FILE = re.compile(r"^[\w.~/@+-]*(?:/[\w.@+-]+|\.[A-Za-z][\w]{0,9})$")
# `sed -n 'a,bp'`, `sed -n a,bp` (also `ap` alone): the lines a read covers.
_SED_RANGE = re.compile(r"^(\d+)(?:,(\d+))?p$")
_COUNT = re.compile(r"^-n?(\d+)$")
# The count after ``-n``: ``tail -n +N`` prints from line N on.
_COUNT_AFTER = re.compile(r"^(\+?)(\d+)$")
# A command is classified from its first characters only: the reads and searches
# that matter are short, and splitting shell words costs more than linear time
# in the text, which a client writes (docs/RELIABILITY.md: linear in the request).
MAX_COMMAND_CHARS = 4096


class CallKind(msgspec.Struct, frozen=True, gc=False):
    """What a call does: its kind, the file it reads or edits, and the lines a read covers.

    ``lines`` is ``(first, last)``, 1-based and inclusive (``last`` None: to
    the end; a negative ``first``: that many lines before the end, ``tail -20``);
    None for the whole file or when unknown. ``key``, a search's
    only, tells apart searches that would print different text (its command
    text); the retention reads it (:mod:`.retention`).
    """

    kind: str
    target: str | None = None
    lines: tuple[int, int | None] | None = None
    key: str = ""


# The kinds with nothing but their name: one value each, shared.
_CONSTANT = {kind: CallKind(kind) for kind in KINDS}


def command_text(arguments: Any) -> str:
    """The command text of a shell call's arguments: the string values of an object, or the text."""
    if isinstance(arguments, dict):
        return "\n".join([v for v in arguments.values() if type(v) is str])
    return arguments if isinstance(arguments, str) else ""


def _runs_tests(command: str) -> bool:
    """Whether ``command`` names a test runner anywhere: ``_TEST.search(command)``,
    searched only in the few characters around each hint (a command of a few
    kilobytes, a heredoc, holds few of them), which is the same answer: every
    match holds a hint and lies in its window, and a search from a position
    still sees the character before it for the word boundary."""
    for hint in _TEST_HINTS:
        at = command.find(hint)
        while at != -1:
            if _TEST.search(command, max(0, at - _RUNNER_LEAD), at + len(hint) + 1):
                return True
            at = command.find(hint, at + 1)
    return False


def _segment_kind(segment: str, words: list[str]) -> str | None:
    """The kind of one command of a shell line from its words; None for one that
    decides nothing (``cd``, ``echo``, ...): the next command decides."""
    writes = ">" in segment and any(">" in piece for piece in _NO_WRITE.split(segment))
    if not words or words[0] in _QUIET:
        return EDIT if words and words[0] == "echo" and writes else None
    program = program_name(words[0])
    if program in ("sed", "perl") and any(w.startswith("-i") for w in words):
        return EDIT
    if program in ("patch", "tee") or (program in ("cat", "printf") and writes):
        return EDIT
    if _BUILD.match(" ".join([program, *words[1:3]])):
        return BUILD
    if program in _READERS or program == "sed":
        return READ
    if program in _SEARCHERS:
        return SEARCH
    if program == "git":
        return SEARCH if words[1:2] in (["grep"], ["ls-files"]) else GIT
    if program in ("gh", "curl", "wget"):
        return WEB
    # ./run.sh: the directory is gone from ``program``, so the word itself tells
    if program in _SCRIPTS or program.startswith("python") or words[0].startswith("./"):
        return SCRIPT
    return OTHER


# What a command of these kinds names is a file, a pattern or a message, never a
# program it runs: ``grep -n "@pytest.fixture" f``, ``cat tests/unittest_nodes.py``.
_NAMES_ONLY = frozenset({READ, SEARCH, EDIT, GIT, WEB})


def _runner_runs(command: str) -> bool:
    """Whether a command of the line that may run programs (not a read, a search,
    an edit, git or a download; not ``cd`` or ``echo``) names a test runner.

    A separator inside quotes splits nothing: ``grep -E "pytest|tox" f`` is one
    search, not a search and a ``tox``.
    """
    return any(_runs_here(segment) for segment, _ in line_commands(command))


def _runs_here(segment: str) -> bool:
    """Whether ``segment``, one command, runs a test runner it names."""
    if not _runs_tests(segment):
        return False
    kind = _segment_kind(segment, program_words(segment))
    return kind is not None and kind not in _NAMES_ONLY


def _shell_kind_of(command: str) -> CallKind:
    """A shell call's :class:`CallKind`: a test runner in a command that runs it, else
    its first command that decides. The commands of a line are split once, and once
    more in a line that names a runner (its commands' kinds tell whether one runs it).
    Comment lines are no commands: they are left out first, from the search's key too
    (a comment changes nothing the search prints). Nor is a here-document's body:
    it is left out of what is read as commands, not of the key (it may change
    what the search prints)."""
    if "#" in command:
        command = without_comments(command)
    text = without_heredocs(command)
    if _runs_tests(text) and _runner_runs(text):
        return _CONSTANT[TEST]
    segments = line_commands(text)
    for segment, _ in segments:
        words = program_words(segment)
        kind = _segment_kind(segment, words)
        if kind is None:
            continue
        if kind == READ:
            return _shell_read(words, segments, command)
        if kind == EDIT:
            files = _patched(words) if program_name(words[0]) == "patch" else _files(words)
            return CallKind(EDIT, files[-1] if files else None)
        return CallKind(kind, None, None, command) if kind == SEARCH else _CONSTANT[kind]
    return _CONSTANT[OTHER]


def tool_kind(tool: str | None, arguments: Any) -> str:
    """What a call with this tool name and arguments produces: a file read, a search, ..."""
    return call_kind(tool, arguments).kind


def _lines_of(words: list[str]) -> tuple[int, int | None] | None:
    """The lines one ``sed -n``, ``head`` or ``tail`` command prints (None: all or unknown);
    ``words`` is not empty."""
    program = program_name(words[0])
    if program == "sed":
        for word in words[1:]:
            found = _SED_RANGE.match(word)
            if found:
                first = int(found.group(1))
                return first, int(found.group(2)) if found.group(2) else first
    elif program in ("head", "tail"):
        count = next((int(m.group(1)) for w in words[1:] if (m := _COUNT.match(w))), 10)
        after = _COUNT_AFTER.match(words[words.index("-n") + 1]) if "-n" in words[:-1] else None
        if after is not None:
            count = int(after.group(2))
            if after.group(1) and program == "tail":
                return count, None  # tail -n +N: from line N to the end
        return (1, count) if program == "head" else (-count, None)
    return None


def _files(words: list[str]) -> list[str]:
    """The file-like arguments of a command's words (not its options)."""
    return [w for w in words[1:] if not w.startswith("-") and _FILE.match(w)]


def _patched(words: list[str]) -> list[str]:
    """The file a ``patch`` command changes, when its words name it: its first operand
    (``patch [options] [file [patchfile]]``). The patch it reads (``-i f.diff``,
    ``< f.diff``) names the files it changes inside, which are not read here."""
    after_input = False
    for word in words[1:]:
        if after_input:
            after_input = False
        elif word in ("-i", "--input", "<"):
            after_input = True
        elif not word.startswith(("-", "<")) and _FILE.match(word):
            return [word]
    return []


def _shell_read(words: list[str], later: Iterator[tuple[str, bool]], command: str) -> CallKind:
    """A shell read from the words of its deciding command and the commands after it:
    its file (the first file-like argument) and the lines it covers.

    In a pipeline (``nl -ba f | sed -n 5,9p``) the file comes from the first
    command that names one, the lines from the first that narrows them. A
    read piped into a search (``cat f | grep -n x``) before any narrows it
    prints what the search finds: it is that search (``grep -n x f``), not a
    read of the whole file, which a later read of the file would supersede;
    piped into another program that prints text of its own (``| jq``,
    ``| python x.py``, ``| xargs grep x``) it is what that program does. A
    pipe that ends a line feeds the next line's command (the shell reads on):
    the empty commands between them carry it on.
    """
    files = _files(words)
    target, lines = files[0] if files else None, _lines_of(words)
    carried = False  # pragma: no mutate (only truth-tested: None is the same)
    for segment, piped in later:
        if target is not None and lines is not None:
            break
        words = program_words(segment)
        if not words:
            carried = carried or piped
            continue
        piped, carried = piped or carried, False
        if words[0] in _QUIET:
            continue
        if piped and lines is None:
            program = program_name(words[0])
            if program in _SEARCHERS:
                return CallKind(SEARCH, None, None, command)
            if program not in _READERS and program not in _KEEP_LINES:
                # jq, a script, xargs: it prints its own text, not the file
                kind = _segment_kind(segment, words) or OTHER
                return CallKind(kind, None, None, command) if kind == SEARCH else _CONSTANT[kind]
        if target is None:
            files = _files(words)
            target = files[0] if files else None
        if lines is None:
            lines = _lines_of(words)
    return CallKind(READ, target, lines)


# The file a freeform patch (Codex CLI's apply_patch input) changes first.
_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (\S[^\n]*)$", re.M)


def _argv(words: list[str]) -> str:
    """An argv's command: a shell's ``-c`` script alone, else its words joined."""
    # a shell's ``-c`` script is the command an argv runs (Codex CLI: ``bash -lc '...'``)
    if len(words) == 3 and program_name(words[0]) in SHELLS and words[1] in ("-c", "-lc"):
        return words[2]
    return " ".join(words[:MAX_COMMAND_CHARS])


def _command(arguments: Any) -> str:
    """A shell call's command: the ``command`` (or ``cmd``) field (an argv: its words,
    a shell's ``-c`` script alone), a Responses shell call's ``commands`` one a line,
    else every string value."""
    command = None
    if isinstance(arguments, dict):
        for field in ("command", "cmd", "commands"):
            value = arguments.get(field)
            if type(value) is str:
                command = value
            elif isinstance(value, list) and all(type(v) is str for v in value):
                lines = value[:MAX_COMMAND_CHARS]
                command = "\n".join(lines) if field == "commands" else _argv(lines)
            if command is not None:
                break
    return (command if command is not None else command_text(arguments))[:MAX_COMMAND_CHARS]


def _read_call(arguments: Any) -> CallKind:
    get = (arguments if isinstance(arguments, dict) else {}).get
    offset, limit, start, end = get("offset"), get("limit"), get("start"), get("end")
    lines: tuple[int, int | None] | None = None
    if type(offset) is int or type(limit) is int:
        first = offset if type(offset) is int else 1
        lines = (first, first + limit - 1 if type(limit) is int else None)
    elif type(start) is int or type(end) is int:  # read_file(path, start, end)
        lines = (start if type(start) is int else 1, end if type(end) is int else None)
    path = get("file_path", get("path"))
    return CallKind(READ, path if isinstance(path, str) else None, lines)


def _search_call(arguments: Any) -> CallKind:
    return CallKind(SEARCH, None, None, command_text(arguments))


def _edit_call(arguments: Any) -> CallKind:
    """An edit of its ``file_path`` or ``path``, or of the first file a freeform
    patch (``input``) names."""
    get = (arguments if isinstance(arguments, dict) else {}).get
    path, given = get("file_path", get("path")), get("input")
    if not isinstance(path, str) and type(given) is str:
        found = _PATCH_FILE.search(given[:MAX_COMMAND_CHARS])
        path = found.group(1).strip() if found else None
    return CallKind(EDIT, path if isinstance(path, str) else None)


def _shell_call(arguments: Any) -> CallKind:
    return _shell_kind_of(_command(arguments))


def _task_call(arguments: Any) -> CallKind:
    return _CONSTANT[TASKS]


# How each named tool is classified; a name in two of the sets is taken by the
# first of read, search, edit, shell, tasks.
_BY_TOOL: dict[str, Callable[[Any], CallKind]] = {
    **dict.fromkeys(_TASK_TOOLS, _task_call),
    **dict.fromkeys(_SHELL_TOOLS, _shell_call),
    **dict.fromkeys(_EDIT_TOOLS, _edit_call),
    **dict.fromkeys(_SEARCH_TOOLS, _search_call),
    **dict.fromkeys(_READ_TOOLS, _read_call),
}


def call_kind(tool: str | None, arguments: Any) -> CallKind:
    """What a call does (:class:`CallKind`), from its tool name and arguments.

    ``arguments``: the call's arguments, an object (as scoutd's tool messages
    hold them) or its JSON text (then read as a command text).
    """
    if not isinstance(tool, str):
        return _CONSTANT[OTHER]
    name = tool.lower()
    by_tool = _BY_TOOL.get(name)
    if by_tool is not None:
        return by_tool(arguments)
    if name.startswith("task"):
        return _CONSTANT[TASKS]
    if name.startswith(("web", "mcp__")):
        return _CONSTANT[WEB]
    return _CONSTANT[OTHER]
