"""The command line as a whole: version, usage errors, help, exit codes."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import pytest

import scoutd
from scoutd.cli import build_parser, main
from scoutd.cli.common import Verb
from scoutd.cli.registry import VERBS

from .helpers import run


def test_version(home: Path) -> None:
    result = run(home, "--version")
    assert result.returncode == 0
    assert result.stdout == f"scoutd {scoutd.__version__}\n"


@pytest.mark.parametrize(
    "args",
    [
        (),
        ("frobnicate",),
        ("prepare", "--bogus"),
        ("prepare", "--set", "no-equals-sign"),
        ("config",),
        ("notify",),
        ("status", "--timeout", "-1"),
    ],
)
def test_usage_errors_exit_2(home: Path, args: tuple[str, ...]) -> None:
    result = run(home, *args)
    assert result.returncode == 2, result
    assert "usage: scoutd" in result.stderr
    assert "Traceback" not in result.stderr


# ------------------------------------------------------------------ every verb


def _verb_paths(verbs: tuple[Verb, ...] = VERBS, prefix: tuple[str, ...] = ()) -> list[Any]:
    """Every runnable command of the verb table, as argv prefixes (``config show``, ...)."""
    paths: list[Any] = []
    for verb in verbs:
        path = (*prefix, verb.name)
        if verb.actions:
            paths.extend(_verb_paths(verb.actions, path))
        else:
            paths.append(pytest.param(path, id=" ".join(path)))
    return paths


@pytest.mark.parametrize("path", _verb_paths())
def test_every_verb_help_ends_with_examples(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*path, "--help"]) == 0
    printed = capsys.readouterr().out.rstrip("\n")
    last_block = printed.split("\n\n")[-1].splitlines()
    assert last_block[0] == "examples:", printed
    examples = last_block[1:]
    assert 2 <= len(examples) <= 3, printed
    for line in examples:
        assert re.match(r"  (scoutd|scripts/|echo |cat |socat )", line), line
        assert " ".join(path) in line or line.startswith("  scripts/"), line


@pytest.mark.parametrize("path", _verb_paths())
def test_an_unknown_option_prints_the_verbs_own_usage(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*path, "--no-such-option"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: scoutd {' '.join(path)} "), err
    assert "Traceback" not in err
    # Named, unless a missing positional argument is the first mistake argparse reports.
    assert "--no-such-option" in err or "arguments are required" in err, err


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found.extend(_subparsers(sub))
    return found


def test_a_command_line_builds_only_the_verbs_it_names() -> None:
    """The verbs a command line does not name are listed but not built (a light
    verb would pay for the others' options); the ones it names are whole."""

    def dests(parser: argparse.ArgumentParser) -> dict[str, list[str]]:
        return {sub.prog: [a.dest for a in sub._actions] for sub in _subparsers(parser)}

    whole = dests(build_parser())
    built = dests(build_parser(["notify", "chat", "config"]))
    assert built.keys() <= whole.keys()
    for prog, actions in built.items():
        if prog in ("scoutd", "scoutd notify") or prog.startswith("scoutd config"):
            assert actions == whole[prog], prog
        else:
            assert actions == [] != whole[prog], prog
    assert "scoutd config show" in built  # a named verb's own actions are built
    assert main(["notify", "--name"]) == 2  # and parsed: --name wants a value


def test_every_positional_argument_is_described() -> None:
    checked = 0
    for parser in _subparsers(build_parser()):
        for action in parser._actions:
            if action.option_strings or isinstance(action, argparse._SubParsersAction):
                continue
            assert action.help and action.help != argparse.SUPPRESS, (parser.prog, action.dest)
            checked += 1
    assert checked >= 7  # prepare, explain, notify (2), abort (2), config check, simulate


# ------------------------------------------------------------------ one exit-code rule


def _write(home: Path, name: str, text: str) -> str:
    (home / name).write_text(text)
    return str(home / name)


@pytest.mark.parametrize(
    ("args", "code"),
    [
        # usage and configuration mistakes: 2, whichever verb makes them (but status and
        # metrics, which only warn of a config file they cannot read: test_daemon.py)
        (("prepare", "--local", "--strategies", "nope"), 2),
        (("prepare", "--local", "--set", "epoch_sise=3"), 2),
        (("explain", "-", "--strategies", "nope"), 2),
        (("explain", "-", "--set", "epoch_sise=3"), 2),
        (("config", "show", "--set", "epoch_sise=3"), 2),
        (("simulate", "--calls", "5", "--strategies", "nope"), 2),
        (("simulate", "--calls", "5", "--set", "epoch_sise=3"), 2),
        (("prepare", "--config", "{bad}"), 2),
        (("config", "check", "{bad}"), 2),
        (("notify", "--config", "{roots}", "/etc/agent.chat", "hello"), 2),
        (("notify", "{home}/agent.chat", "   "), 2),
        (("notify", "--name", ".hidden", "{home}/agent.chat", "hello"), 2),
        # runtime failures: 1
        (("prepare", "--local", "{home}/absent.json"), 1),
        (("prepare", "--local", "{home}/broken.json"), 1),
        (("status", "--socket", "{home}/absent.sock", "--timeout", "1"), 1),
        (("explain", "{home}/absent.json"), 1),
    ],
)
def test_one_exit_code_rule(home: Path, args: tuple[str, ...], code: int) -> None:
    names = {
        "home": str(home),
        "bad": _write(home, "bad.toml", "[prompt]\nepoch_sise = 3\n"),
        "roots": _write(home, "roots.toml", f'[daemon]\nallowed_roots = ["{home}"]\n'),
    }
    _write(home, "broken.json", "[{")
    result = run(home, *(arg.format(**names) for arg in args), input="[]")
    assert result.returncode == code, result
    assert "Traceback" not in result.stderr
    assert result.stderr.strip(), "a failure says why on stderr"


@pytest.mark.parametrize(
    "args",
    [
        ("inbox", "agent.chat"),
        ("config", "show"),
        ("explain", "-"),
        ("prepare", "--local", "-"),
    ],
)
def test_a_closed_stdout_is_a_failure_not_a_silent_success(
    home: Path, args: tuple[str, ...]
) -> None:
    """Started with fd 1 closed (``>&-``), a verb that prints fails with one line:
    Python drops ``print`` to a closed stdout without a word, so it exited 0."""
    import subprocess
    import sys

    from .helpers import clean_environ, one_error_line

    result = subprocess.run(
        [sys.executable, "-m", "scoutd", *args],
        input="[]",
        stderr=subprocess.PIPE,
        text=True,
        env={**clean_environ(), "SCOUTD_CONFIG": str(home / "empty.toml")},
        cwd=home,
        timeout=60,
        pass_fds=(),
        preexec_fn=lambda: __import__("os").close(1),
    )
    assert result.returncode == 1
    assert one_error_line(result) == (
        "scoutd: standard output is closed: the output was not written"
    )


def test_help_lists_every_exit_code(home: Path) -> None:
    """docs/OPERATIONS.md lists 0 to 4; ``scoutd --help`` stopped at 3."""
    result = run(home, "--help")
    assert result.returncode == 0
    epilog = " ".join(result.stdout.split("exit codes:")[1].split())
    for code in ("0 ok", "1 runtime failure", "2 usage", "3 aborted", "4 incomplete"):
        assert code in epilog
