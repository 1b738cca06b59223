"""What a tool call does, from its name and arguments: read a file, search, run tests, ...

The default's retention (:mod:`.retention`) keeps old outputs by what they
are, and ``scoutd simulate --origins`` counts where hidden facts come from by
the same classes. A named tool (Claude Code's ``Read``, ``Grep``, ``Edit``,
...) is known by its name; a shell call by its command: a test runner anywhere
makes it a test run, else its first command that is not ``cd``/``echo``
decides. A file read or an edit also names its file and, for a read, the lines
it covers (:class:`CallKind`). Pure code: no I/O, deterministic.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

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
# Every test runner _TEST names contains one of these: a cheap look before the search.
_TEST_HINTS = ("test", "tox", "nox", "jest")
_BUILD = re.compile(
    r"\b(lint|golangci-lint|staticcheck|go (?:build|vet)|cargo (?:build|check|clippy)|tsc|eslint|"
    r"ruff|mypy|make|(?:mise|just|npm|pnpm|yarn|bun|mix|task) (?:run )?\w+|mix compile)\b"
)
_TASK_TOOLS = frozenset({"todowrite", "todoread", "skill", "exitplanmode", "askuserquestion"})
_SPLIT = re.compile(r"&&|\|\||;|\||\n")
_READERS = frozenset({"cat", "head", "tail", "nl", "less", "more", "bat", "awk"})
_SEARCHERS = frozenset({"grep", "egrep", "rg", "ag", "find", "ls", "tree", "fd", "wc", "locate"})
_SCRIPTS = frozenset({"python", "python3", "node", "go", "ruby", "sh", "bash", "npx", "uv"})
_QUIET = frozenset({"cd", "echo", "true", "export", "source", "set", "pwd"})
# A file argument: a path with a `/` or a name with an extension, not an option.
_FILE = re.compile(r"^[\w.~/@+-]*(?:/[\w.@+-]+|\.[A-Za-z][\w]{0,9})$")
# `sed -n 'a,bp'`, `sed -n a,bp` (also `ap` alone): the lines a read covers.
_SED_RANGE = re.compile(r"^(\d+)(?:,(\d+))?p$")
_COUNT = re.compile(r"^-n?(\d+)$")
# A command is classified from its first characters only: the reads and searches
# that matter are short, and splitting shell words costs more than linear time
# in the text, which a client writes (docs/RELIABILITY.md: linear in the request).
MAX_COMMAND_CHARS = 4096


class CallKind(NamedTuple):
    """What a call does: its kind, the file it reads or edits, and the lines a read covers.

    ``lines`` is ``(first, last)``, 1-based and inclusive (``last`` None: to
    the end); None for the whole file or when unknown. ``key``, a search's
    only, tells apart searches that would print different text (its command
    text); the retention reads it (:mod:`.retention`).
    """

    kind: str
    target: str | None = None
    lines: tuple[int, int | None] | None = None
    key: str = ""


def command_text(arguments: Any) -> str:
    """The command text of a shell call's arguments: the string values of an object, or the text."""
    if isinstance(arguments, dict):
        return "\n".join(v for v in arguments.values() if type(v) is str)
    return arguments if isinstance(arguments, str) else ""


# A shell word: unquoted characters, '...', "..." (with backslash escapes) and
# backslash-escaped characters, side by side. Possessive: linear in the text.
_WORD = re.compile(r"""(?:[^\s'"\\]++|'[^']*+'|"(?:[^"\\]++|\\.)*+"|\\.)++""", re.S)
# The quoting inside a word, replaced by what it quotes.
_QUOTING = re.compile(r"""'([^']*+)'|"((?:[^"\\]++|\\.)*+)"|\\(.)""", re.S)
_ESCAPE = re.compile(r"\\(.)", re.S)


def _unquoted(match: re.Match[str]) -> str:
    single, double, escaped = match.groups()
    if single is not None:
        return single
    if double is not None:
        return _ESCAPE.sub(r"\1", double)
    return escaped or ""


def _words(segment: str) -> list[str]:
    """The words of a command as a POSIX shell splits them, quotes removed (a quote left
    open is dropped: the rest still reads as words)."""
    return [_QUOTING.sub(_unquoted, word) for word in _WORD.findall(segment)]


def _program_words(segment: str) -> list[str]:
    """The words of one command, past variable assignments and ``timeout``/``sudo``/``env``."""
    words = _words(segment)
    while words and ("=" in words[0] or words[0] in ("timeout", "sudo", "env")):
        words = words[2:] if words[0] == "timeout" else words[1:]
    return words


def _shell_kind(command: str) -> tuple[str, list[str]]:
    """The kind of a shell command and the words of the command that decided it."""
    if any(word in command for word in _TEST_HINTS) and _TEST.search(command):
        return TEST, []
    for segment in _SPLIT.split(command):
        words = _program_words(segment)
        if not words or words[0] in _QUIET:
            if words and words[0] == "echo" and ">" in segment:
                return EDIT, words
            continue
        program = words[0].rsplit("/", 1)[-1]
        writes = ">" in segment.replace("2>&1", "").replace(">/dev/null", "")
        if program in ("sed", "perl") and any(w.startswith("-i") for w in words):
            return EDIT, words
        if program in ("patch", "tee") or (program in ("cat", "printf") and writes):
            return EDIT, words
        if _BUILD.match(" ".join([program, *words[1:3]])):
            return BUILD, words
        if program in _READERS or program == "sed":
            return READ, words
        if program in _SEARCHERS:
            return SEARCH, words
        if program == "git":
            return (SEARCH if words[1:2] in (["grep"], ["ls-files"]) else GIT), words
        if program in ("gh", "curl", "wget"):
            return WEB, words
        if program in _SCRIPTS or program.startswith("python") or program.startswith("./"):
            return SCRIPT, words
        return OTHER, words
    return OTHER, []


def tool_kind(tool: str | None, arguments: Any) -> str:
    """What a call with this tool name and arguments produces: a file read, a search, ..."""
    return call_kind(tool, arguments).kind


def _lines_of(words: list[str]) -> tuple[int, int | None] | None:
    """The lines one ``sed -n``, ``head`` or ``tail`` command prints (None: all or unknown)."""
    program = words[0].rsplit("/", 1)[-1] if words else ""
    if program == "sed":
        for word in words[1:]:
            found = _SED_RANGE.match(word)
            if found:
                first = int(found.group(1))
                return first, int(found.group(2)) if found.group(2) else first
    elif program in ("head", "tail"):
        count = next((int(m.group(1)) for w in words[1:] if (m := _COUNT.match(w))), 10)
        after = words[words.index("-n") + 1] if "-n" in words[:-1] else None
        if after is not None and after.lstrip("+").isdigit():
            count = int(after.lstrip("+"))
        return (1, count) if program == "head" else (-count, None)
    return None


def _shell_read(command: str) -> CallKind:
    """A shell read: its file (the first file-like argument) and the lines it covers.

    In a pipeline (``nl -ba f | sed -n 5,9p``) the file comes from the first
    command that names one, the lines from the first that narrows them.
    """
    target: str | None = None
    lines: tuple[int, int | None] | None = None
    for segment in _SPLIT.split(command):
        words = _program_words(segment)
        if not words or words[0] in _QUIET:
            continue
        if target is None:
            files = [w for w in words[1:] if not w.startswith("-") and _FILE.match(w)]
            target = files[0] if files else None
        if lines is None:
            lines = _lines_of(words)
    return CallKind(READ, target, lines)


def _shell_kind_of(command: str) -> CallKind:
    kind, words = _shell_kind(command)
    if kind == READ:
        return _shell_read(command)
    if kind == EDIT and words:
        files = [w for w in words[1:] if not w.startswith("-") and _FILE.match(w)]
        return CallKind(EDIT, files[-1] if files else None)
    return CallKind(kind, key=command if kind == SEARCH else "")


def _first_int(value: Any) -> int | None:
    return value if type(value) is int else None


def call_kind(tool: str | None, arguments: Any) -> CallKind:
    """What a call does (:class:`CallKind`), from its tool name and arguments.

    ``arguments``: the call's arguments, an object (as scoutd's tool messages
    hold them) or its JSON text (then read as a command text).
    """
    name = tool.lower() if isinstance(tool, str) else ""
    fields = arguments if isinstance(arguments, dict) else {}
    if name in _READ_TOOLS:
        path = fields.get("file_path", fields.get("path"))
        offset, limit = _first_int(fields.get("offset")), _first_int(fields.get("limit"))
        start, end = _first_int(fields.get("start")), _first_int(fields.get("end"))
        lines: tuple[int, int | None] | None = None
        if offset is not None or limit is not None:
            first = offset if offset is not None else 1
            lines = (first, first + limit - 1 if limit is not None else None)
        elif start is not None or end is not None:  # read_file(path, start, end)
            lines = (start if start is not None else 1, end)
        return CallKind(READ, path if isinstance(path, str) else None, lines)
    if name in _SEARCH_TOOLS:
        return CallKind(SEARCH, key=command_text(arguments))
    if name in _EDIT_TOOLS:
        path = fields.get("file_path", fields.get("path"))
        return CallKind(EDIT, path if isinstance(path, str) else None)
    if name in _SHELL_TOOLS:
        return _shell_kind_of(_command(arguments))
    if name in _TASK_TOOLS or name.startswith("task"):
        return CallKind(TASKS)
    if name.startswith(("web", "mcp__")):
        return CallKind(WEB)
    return CallKind(OTHER)


def _command(arguments: Any) -> str:
    """A shell call's command: the ``command`` (or ``cmd``) field, else every string value."""
    command = None
    if isinstance(arguments, dict):
        for field in ("command", "cmd"):
            value = arguments.get(field)
            if type(value) is str:
                command = value
            elif isinstance(value, list) and all(type(v) is str for v in value):
                command = " ".join(value[:MAX_COMMAND_CHARS])
            if command is not None:
                break
    return (command if command is not None else command_text(arguments))[:MAX_COMMAND_CHARS]
