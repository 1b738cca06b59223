"""The ``scoutd`` command, run as a real subprocess (``python -m scoutd``).

Every test gives the CLI an explicit, empty config file through
``$SCOUTD_CONFIG`` and strips the ``[prompt]`` environment variables, so that
a config installed on the test machine cannot change the outcome.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import msgspec
import pytest

import scoutd
from scoutd.config import PromptConfig, resolve_config

from .support.daemon import Daemon

ROOT = Path(__file__).resolve().parent.parent
CLI_TIMEOUT = 60.0  # seconds for one CLI run: generous for a slow CI machine
DAEMON_START_TIMEOUT = 20.0
TOOL_ROLES = ("function_call", "function_call_output")

# Variables that would change the effective configuration of a run.
_CONFIG_ENV = {
    "SCOUTD_CONFIG",
    "SCOUTD_SOCKET",
    "PROMPT_STRATEGY",
    *(key.upper() for key in PromptConfig.__struct_fields__),
}


# ------------------------------------------------------------------ helpers


def conversation(pairs: int, size: int = 600) -> list[dict[str, Any]]:
    """A system prompt, a task, ``pairs`` tool call/output pairs, a user turn.

    Outputs are ``size`` characters (long enough to be truncated) and carry
    non-ASCII text, which must come out as UTF-8, not ``\\u`` escapes.
    """
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": "Fix the build — vite"},
    ]
    for i in range(pairs):
        call = {"name": "read_file", "arguments": {"path": f"src/f{i}.py"}, "id": f"c{i}"}
        output = {"name": "read_file", "content": f"é{i} " + "x" * size, "id": f"c{i}"}
        messages.append({"role": "function_call", "content": json.dumps(call, ensure_ascii=False)})
        messages.append(
            {"role": "function_call_output", "content": json.dumps(output, ensure_ascii=False)}
        )
    messages.append({"role": "user", "content": "continue"})
    return messages


@pytest.fixture
def home() -> Iterator[Path]:
    """A short private directory with an empty config file in it."""
    path = Path(tempfile.mkdtemp(prefix="sd"))
    (path / "empty.toml").write_text("")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def run(
    home: Path,
    *args: str,
    input: str | bytes | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python -m scoutd ARGS`` with a clean environment; stdout/stderr as text."""
    environ = {k: v for k, v in os.environ.items() if k not in _CONFIG_ENV}
    environ["SCOUTD_CONFIG"] = str(home / "empty.toml")
    environ.update(env or {})
    data = input.encode() if isinstance(input, str) else input
    proc = subprocess.run(
        [sys.executable, "-m", "scoutd", *args],
        input=data,
        capture_output=True,
        env=environ,
        cwd=home,
        timeout=CLI_TIMEOUT,
        check=False,
    )
    return subprocess.CompletedProcess(
        proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode()
    )


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The single stderr line of a failed run (no traceback)."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def write_json(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")
    return path


def empty_snapshot(home: Path) -> scoutd.Config:
    return resolve_config(home / "empty.toml", environ={})


# ------------------------------------------------------------------ basics


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


# ------------------------------------------------------------------ prepare --local


@pytest.mark.parametrize("strategies", [None, "shorten_tools_epoch", "shorten_tools"])
def test_prepare_local_equals_library(home: Path, strategies: str | None) -> None:
    """The CLI prints exactly what prepare_prompt returns, as UTF-8 JSON."""
    messages = conversation(70, size=2000)  # over max_tool_chars, for shorten_tools
    source = write_json(home / "chat.json", messages)
    args = ["prepare", "--local", str(source)]
    if strategies is not None:
        args += ["--strategies", strategies]
    result = run(home, *args)
    assert result.returncode == 0, result.stderr
    expected = scoutd.prepare_prompt(messages, strategies, config=empty_snapshot(home))
    assert json.loads(result.stdout) == expected
    if strategies is not None:  # the default waits until compaction pays (docs/ECONOMY.md)
        assert expected != messages  # the conversation is long enough to be compacted
    assert "é" in result.stdout and "\\u00e9" not in result.stdout
    assert result.stdout.count("\n") == 1  # one document


def test_prepare_reads_stdin_and_messages_object(home: Path) -> None:
    messages = conversation(60)
    expected = scoutd.prepare_prompt(messages, config=empty_snapshot(home))
    for document in (messages, {"messages": messages}):
        for args in (("prepare", "--local"), ("prepare", "--local", "-")):
            result = run(home, *args, input=json.dumps(document))
            assert result.returncode == 0, result.stderr
            assert json.loads(result.stdout) == expected


def test_prepare_report(home: Path) -> None:
    messages = conversation(70)
    result = run(home, "prepare", "--local", "--report", input=json.dumps(messages))
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    prepared = scoutd.prepare(messages, config=empty_snapshot(home))
    assert printed["messages"] == prepared.messages
    assert printed["report"] == msgspec.to_builtins(prepared.report)
    assert [r["strategy"] for r in printed["report"]] == ["shorten_tools_cost_aware", "inbox"]


def test_prepare_set_overrides(home: Path) -> None:
    """--set overrides a [prompt] key for one call; values are JSON, else strings."""
    messages = conversation(70)
    raised = run(
        home, "prepare", "--local", "--set", "epoch_tool_call_threshold=1000",
        input=json.dumps(messages),
    )  # fmt: skip
    assert raised.returncode == 0, raised.stderr
    assert json.loads(raised.stdout) == messages
    named = run(
        home, "prepare", "--local", "--set", "prompt_strategies=none",
        input=json.dumps(messages),
    )  # fmt: skip
    assert named.returncode == 0, named.stderr
    assert json.loads(named.stdout) == messages
    bad = run(home, "prepare", "--local", "--set", "epoch_sise=3", input="[]")
    assert bad.returncode == 1
    assert "epoch_sise" in one_error_line(bad)


def test_prepare_bad_json_exits_1_with_position(home: Path) -> None:
    result = run(home, "prepare", "--local", input='[{"role": "user",\n  "content": "x"},,]')
    assert result.returncode == 1
    line = one_error_line(result)
    assert "invalid JSON" in line and "line 2, column 19" in line, line
    empty = run(home, "prepare", "--local", input="")
    assert empty.returncode == 1
    assert "empty" in one_error_line(empty)
    wrong = run(home, "prepare", "--local", input='{"role": "user"}')
    assert wrong.returncode == 1
    assert "list of messages" in one_error_line(wrong)
    missing = run(home, "prepare", "--local", str(home / "nope.json"))
    assert missing.returncode == 1
    assert "nope.json" in one_error_line(missing)


def test_unknown_strategy_exits_1_listing_available(home: Path) -> None:
    result = run(home, "prepare", "--local", "--strategies", "shorten_tools,nope", input="[]")
    assert result.returncode == 1
    line = one_error_line(result)
    assert "'nope'" in line
    for name in ("inbox", "none", "shorten_tools", "shorten_tools_epoch_increment"):
        assert name in line


# ------------------------------------------------------------------ inbox: notify, abort


def test_abort_file_makes_prepare_exit_3(home: Path) -> None:
    save_file = home / "agent.chat"
    inbox = Path(scoutd.inbox_dir(str(save_file)))
    inbox.mkdir()
    (inbox / "abort").write_text("  budget exhausted \n")
    result = run(
        home, "prepare", "--local", "--save-file", str(save_file), input=json.dumps(conversation(3))
    )
    assert result.returncode == 3
    assert one_error_line(result) == "scoutd: aborted: budget exhausted"
    assert result.stdout == ""
    assert not (inbox / "abort").exists()
    assert (Path(scoutd.inbox_removed_dir(str(save_file))) / "abort").is_file()


def test_notify_and_abort_write_into_inbox(home: Path) -> None:
    """notify/abort create the inbox; the next prepare delivers, then aborts."""
    save_file = home / "chats" / "agent.chat"
    save_file.parent.mkdir()
    inbox = Path(scoutd.inbox_dir(str(save_file)))
    assert not inbox.exists()

    first = run(home, "notify", str(save_file), "Please wrap up — soon.")
    assert first.returncode == 0, first.stderr
    first_path = Path(first.stdout.strip())
    assert first_path.parent == inbox and first_path.is_file()
    assert first_path.read_text(encoding="utf-8") == "Please wrap up — soon."

    second = run(home, "notify", str(save_file), "-", input="from stdin\n")
    assert second.returncode == 0, second.stderr
    named = run(home, "notify", "--name", "note.txt", str(save_file), "named")
    assert named.returncode == 0, named.stderr
    assert Path(named.stdout.strip()) == inbox / "note.txt"
    hidden = run(home, "notify", "--name", ".hidden", str(save_file), "x")
    assert hidden.returncode == 1
    assert ".hidden" in one_error_line(hidden)
    assert len(list(inbox.iterdir())) == 3

    messages = [{"role": "user", "content": "start"}]
    delivered = run(home, "prepare", "--local", "--save-file", str(save_file), "--report",
                    input=json.dumps(messages))  # fmt: skip
    assert delivered.returncode == 0, delivered.stderr
    printed = json.loads(delivered.stdout)
    contents = [m["content"] for m in printed["messages"]]
    assert contents[0] == "start"
    assert sorted(contents[1:]) == sorted(["Please wrap up — soon.", "from stdin\n", "named"])
    assert printed["report"][-1]["inbox_delivered"] == 3
    assert list(inbox.iterdir()) == []

    again = run(
        home, "prepare", "--local", "--save-file", str(save_file), input=json.dumps(messages)
    )
    assert json.loads(again.stdout) == messages  # at most once

    aborted = run(home, "abort", str(save_file), "operator says stop")
    assert aborted.returncode == 0, aborted.stderr
    assert Path(aborted.stdout.strip()) == inbox / "abort"
    stopped = run(home, "prepare", "--local", "--save-file", str(save_file), input="[]")
    assert stopped.returncode == 3
    assert "operator says stop" in one_error_line(stopped)


@pytest.mark.parametrize("sabotage", ["regular-file", "dangling-symlink"])
def test_abort_says_when_its_record_cannot_be_written(home: Path, sabotage: str) -> None:
    """The abort is written and still stops the agent; exit 1 tells the operator to act."""
    save_file = home / "agent.chat"
    removed = Path(scoutd.inbox_removed_dir(str(save_file)))
    if sabotage == "regular-file":
        removed.write_text("planted by the agent")
    else:
        removed.symlink_to(home / "nowhere")
    aborted = run(home, "abort", str(save_file), "stop anyway")
    assert aborted.returncode == 1
    assert Path(aborted.stdout.strip()) == Path(scoutd.inbox_dir(str(save_file))) / "abort"
    message = one_error_line(aborted)
    assert "the abort stops the agent" in message and "inbox_removed" in message
    stopped = run(home, "prepare", "--local", "--save-file", str(save_file), input="[]")
    assert stopped.returncode == 3 and "Traceback" not in stopped.stderr
    logged, last = stopped.stderr.strip().splitlines()
    assert "could not be moved" in logged and "recorded as" in logged  # loudly
    assert last == "scoutd: aborted: stop anyway"


def test_abort_says_when_an_abort_that_is_not_a_file_is_already_waiting(home: Path) -> None:
    """The agent made ``abort`` a directory: it still stops, but the reason is not written."""
    save_file = home / "agent.chat"
    planted = Path(scoutd.inbox_dir(str(save_file))) / "abort"
    planted.mkdir(parents=True)
    aborted = run(home, "abort", str(save_file), "my reason")
    assert aborted.returncode == 1 and aborted.stdout == ""
    message = one_error_line(aborted)
    assert "is a directory" in message and "could not be written" in message
    assert "aborted with a generic reason" in message
    stopped = run(home, "prepare", "--local", "--save-file", str(save_file), input="[]")
    assert stopped.returncode == 3 and "Traceback" not in stopped.stderr
    last = stopped.stderr.strip().splitlines()[-1]
    assert last == "scoutd: aborted: aborted by operator (the abort entry is a directory; not read)"
    assert planted.is_dir() is False
    assert (Path(scoutd.inbox_removed_dir(str(save_file))) / "abort").is_dir()


def test_a_second_abort_keeps_the_waiting_one(home: Path) -> None:
    """Documented: while an abort waits, another ``scoutd abort`` changes nothing (exit 0)."""
    save_file = home / "agent.chat"
    first = run(home, "abort", str(save_file), "first")
    second = run(home, "abort", str(save_file), "second")
    assert first.returncode == second.returncode == 0
    assert first.stdout == second.stdout
    stopped = run(home, "prepare", "--local", "--save-file", str(save_file), input="[]")
    assert stopped.stderr.strip().splitlines()[-1] == "scoutd: aborted: first"


# ------------------------------------------------------------------ config show / check


def test_config_show_lists_origins(home: Path) -> None:
    config = home / "scoutd.toml"
    config.write_text('[prompt]\nfull_tool_calls = 2\n[daemon]\nlog_level = "debug"\n')
    result = run(
        home, "config", "show", "--config", str(config), "--set", "epoch_full_tool_calls=5",
        env={"EPOCH_SIZE": "7", "FULL_TOOL_CALLS": "9"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"# config file: {config}"
    assert "prompt.epoch_size = 7  (env:EPOCH_SIZE)" in lines
    assert "prompt.full_tool_calls = 2  (file)" in lines  # the file wins over the env
    assert "prompt.epoch_full_tool_calls = 5  (override)" in lines
    assert "prompt.epoch_increment_max_size = 60  (default)" in lines
    assert 'daemon.log_level = "debug"  (file)' in lines
    assert "daemon.socket_mode = 0o660  (default)" in lines
    keys = {line.split(" = ")[0] for line in lines[1:]}
    expected = {f"prompt.{k}" for k in PromptConfig.__struct_fields__}
    expected |= {f"daemon.{k}" for k in scoutd.DaemonConfig.__struct_fields__}
    assert keys == expected

    as_json = run(home, "config", "show", "--json", env={"EPOCH_SIZE": "7"})
    assert as_json.returncode == 0, as_json.stderr
    values = json.loads(as_json.stdout)["values"]
    assert values["prompt.epoch_size"] == {"value": 7, "origin": "env:EPOCH_SIZE"}
    assert values["daemon.allowed_roots"] == {"value": ["/"], "origin": "default"}


def test_config_show_bad_env_exits_1(home: Path) -> None:
    result = run(home, "config", "show", env={"EPOCH_SIZE": "lots"})
    assert result.returncode == 1
    assert "EPOCH_SIZE" in one_error_line(result)


def test_config_check(home: Path) -> None:
    good = home / "good.toml"
    good.write_text("[prompt]\nepoch_size = 30\n[daemon]\nidle_timeout = 12.5\n")
    ok = run(home, "config", "check", str(good))
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout == f"ok: {good}\n"

    cases = {
        "[prompt]\nepoch_sise = 30\n": "epoch_sise",
        "[prompt]\nepoch_size = -1\n": "epoch_size",
        '[daemon]\nwatch_mode = "sometimes"\n': "watch_mode",
        "[prompt\n": "bad.toml",
    }
    for text, named in cases.items():
        bad = home / "bad.toml"
        bad.write_text(text)
        result = run(home, "config", "check", str(bad))
        assert result.returncode == 1, text
        line = one_error_line(result)
        assert named in line and "bad.toml" in line, line
        assert result.stdout == ""
    missing = run(home, "config", "check", str(home / "absent.toml"))
    assert missing.returncode == 1
    assert "absent.toml" in one_error_line(missing)


# ------------------------------------------------------------------ explain

_ROW = re.compile(r"^\s+(\d+)\s+(function_call|function_call_output)\s+(\S+)\s+(\S+)\s+(\d+)\s+"
                  r"(kept|protected|truncated|dropped)\s+(\d+) -> (\d+)$")  # fmt: skip


def test_explain_prints_a_row_per_tool_message(home: Path) -> None:
    messages = conversation(120)
    # Pair 30 repeats pair 5's call: its latest occurrence is protected from truncation.
    repeat = 2 + 2 * 30
    messages[repeat] = {"role": "function_call", "content": json.dumps(
        {"name": "read_file", "arguments": {"path": "src/f5.py"}, "id": "c30"})}  # fmt: skip
    source = write_json(home / "chat.json", messages)
    result = run(home, "explain", str(source), "--strategies", "shorten_tools_epoch,none")
    assert result.returncode == 0, result.stderr
    prepared = scoutd.prepare(
        messages, "shorten_tools_epoch,none", config=empty_snapshot(home), detail=True
    )
    epoch, _none = prepared.report
    assert epoch.actions is not None

    sections = result.stdout.split("\n\n")
    assert sections[0].splitlines()[0] == "strategy shorten_tools_epoch"
    rows = [_ROW.match(line) for line in sections[0].splitlines()]
    found = [row for row in rows if row is not None]
    tool_indexes = [i for i, m in enumerate(messages) if m["role"] in TOOL_ROLES]
    assert [int(row.group(1)) for row in found] == tool_indexes
    for row, action in zip(found, epoch.actions, strict=True):
        assert row.group(2) == action.role
        assert row.group(3) == action.id
        assert row.group(6) == action.action
        assert (int(row.group(7)), int(row.group(8))) == (action.chars_before, action.chars_after)
    assert {row.group(6) for row in found} == {"kept", "protected", "truncated", "dropped"}

    summary = sections[0].splitlines()[-1].strip()
    assert summary.startswith(
        f"calls: {epoch.calls_kept} kept, {epoch.calls_protected} protected, "
        f"{epoch.calls_truncated} truncated, {epoch.calls_dropped} dropped; "
        f"outputs: {epoch.outputs_kept} kept, {epoch.outputs_protected} protected, "
        f"{epoch.outputs_truncated} truncated, {epoch.outputs_dropped} dropped; "
        f"chars: {epoch.chars_before} -> {epoch.chars_after}; notice: inserted"
    ), summary
    assert sections[1].splitlines()[0] == "strategy none"

    as_json = run(home, "explain", str(source), "--strategies", "shorten_tools_epoch", "--json")
    assert as_json.returncode == 0, as_json.stderr
    alone = scoutd.prepare(
        messages, "shorten_tools_epoch", config=empty_snapshot(home), detail=True
    )
    assert json.loads(as_json.stdout) == msgspec.to_builtins(alone.report)
    # the whole call's figures (format, stable prefix) sit on its last entry only
    assert msgspec.structs.replace(alone.report[0], stable_prefix=None) == epoch


def test_explain_never_consumes_an_inbox(home: Path) -> None:
    """explain has no save file: a notice waiting beside the chat stays where it is."""
    save_file = home / "chat.json"
    write_json(save_file, conversation(5))
    inbox = Path(scoutd.inbox_dir(str(save_file)))
    inbox.mkdir()
    (inbox / "abort").write_text("stop")
    result = run(home, "explain", str(save_file))
    assert result.returncode == 0, result.stderr
    assert "strategy inbox" in result.stdout
    assert (inbox / "abort").read_text() == "stop"
    assert run(home, "explain", str(save_file), "--save-file", "x").returncode == 2


# ------------------------------------------------------------------ simulate


def test_simulate_hands_over_its_arguments(home: Path) -> None:
    """Every flag after ``simulate`` belongs to the simulator, --help included."""
    result = run(home, "simulate", "--help")
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout
    assert "scoutd prepare" not in result.stdout


# ------------------------------------------------------------------ against a real daemon


@pytest.fixture
def daemon(home: Path) -> Iterator[Daemon]:
    """A real daemon (``python -m scoutd serve``) with its socket and config in ``home``."""
    started = Daemon(directory=str(home), daemon={"shutdown_timeout": 2.0})
    try:
        started.start(timeout=DAEMON_START_TIMEOUT)
        yield started
    finally:
        started.cleanup()


def test_prepare_through_the_daemon(home: Path, daemon: Daemon) -> None:
    messages = conversation(70)
    source = write_json(home / "chat.json", messages)
    local = run(home, "prepare", "--local", str(source))
    remote = run(home, "prepare", str(source), "--socket", daemon.socket_path)
    assert remote.returncode == 0, remote.stderr
    assert json.loads(remote.stdout) == json.loads(local.stdout)
    # The socket also comes from $SCOUTD_SOCKET, or from [daemon].socket_path of --config.
    via_env = run(home, "prepare", str(source), env={"SCOUTD_SOCKET": daemon.socket_path})
    assert via_env.stdout == remote.stdout, via_env.stderr
    via_config = run(home, "prepare", str(source), "--config", daemon.config_path)
    assert via_config.stdout == remote.stdout, via_config.stderr

    report = run(home, "prepare", str(source), "--socket", daemon.socket_path, "--report",
                 "--set", "epoch_size=5")  # fmt: skip
    assert report.returncode == 0, report.stderr
    printed = json.loads(report.stdout)
    expected = scoutd.prepare(messages, config={"epoch_size": 5}).report
    assert printed["report"] == msgspec.to_builtins(expected)

    unknown = run(home, "prepare", "--socket", daemon.socket_path, "--strategies", "nope",
                  input="[]")  # fmt: skip
    assert unknown.returncode == 1
    assert "'nope'" in one_error_line(unknown)


def test_prepare_through_the_daemon_aborts_with_3(home: Path, daemon: Daemon) -> None:
    """A relative --save-file is made absolute; the daemon consumes the abort file."""
    (home / "work").mkdir()
    dropped = run(home, "abort", "work/agent.chat", "halt")
    assert dropped.returncode == 0, dropped.stderr
    result = run(home, "prepare", "--socket", daemon.socket_path, "--save-file",
                 "work/agent.chat", input="[]")  # fmt: skip
    assert result.returncode == 3, result.stderr
    assert one_error_line(result) == "scoutd: aborted: halt"
    outside = run(home, "prepare", "--socket", daemon.socket_path, "--save-file",
                  "/etc/agent.chat", input="[]")  # fmt: skip
    assert outside.returncode == 1
    assert "Traceback" not in outside.stderr


def test_status(home: Path, daemon: Daemon) -> None:
    readable = run(home, "status", "--socket", daemon.socket_path)
    assert readable.returncode == 0, readable.stderr
    lines = readable.stdout.splitlines()
    assert any(re.fullmatch(rf"version\s+{re.escape(scoutd.__version__)}", ln) for ln in lines)
    assert any(line.startswith("counts.requests ") for line in lines), readable.stdout

    as_json = run(home, "status", "--json", "--socket", daemon.socket_path)
    assert as_json.returncode == 0, as_json.stderr
    status = json.loads(as_json.stdout)
    assert status["version"] == scoutd.__version__
    assert status["config"]["path"] == daemon.config_path


def test_daemon_unavailable_exits_1(home: Path) -> None:
    for args in (("status",), ("prepare",)):
        result = run(home, *args, "--socket", str(home / "absent.sock"), input="[]")
        assert result.returncode == 1
        assert "absent.sock" in one_error_line(result)


# ------------------------------------------------------------------ scripts/serve


def test_serve_script_config_is_valid(home: Path) -> None:
    run_dir = home / "run"
    result = subprocess.run(
        [str(ROOT / "scripts" / "serve"), "--print-config"],
        capture_output=True, text=True, timeout=CLI_TIMEOUT, check=False,
        env={**os.environ, "SCOUTD_RUN_DIR": str(run_dir), "HOME": str(home)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    written = home / "written.toml"
    written.write_text(result.stdout)
    config = resolve_config(written, environ={})
    assert config.daemon.socket_path == str(run_dir / "scoutd.sock")
    assert config.daemon.allowed_roots == (str(run_dir), str(home))
    assert config.daemon.log_level == "info"


def _checkout_venv_ready() -> bool:
    """Whether scripts/serve would run without installing anything (no network)."""
    python = ROOT / ".venv" / "bin" / "python"
    if not (ROOT / ".venv" / "bin" / "scoutd").exists() or not python.exists():
        return False
    probe = subprocess.run(
        [str(python), "-c", "import scoutd, anyio, watchdog, msgspec; "
         "print(scoutd.__file__)"],
        capture_output=True, text=True, timeout=CLI_TIMEOUT, check=False,
    )  # fmt: skip
    return probe.returncode == 0 and probe.stdout.strip().startswith(str(ROOT))


def test_serve_script_runs_the_daemon(home: Path) -> None:
    """scripts/serve writes its config, prints the socket and serves until SIGTERM."""
    if not (ROOT / "scoutd" / "server" / "__init__.py").exists():
        pytest.fail("scoutd/server/ is missing: scripts/serve cannot serve")
    if not _checkout_venv_ready():
        pytest.skip("the checkout's .venv does not hold this checkout: the script would install")
    run_dir = home / "r"
    sock = run_dir / "scoutd.sock"
    out = (home / "serve.out").open("w+")
    proc = subprocess.Popen(
        [str(ROOT / "scripts" / "serve")],
        stdout=out, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "SCOUTD_RUN_DIR": str(run_dir), "HOME": str(home)},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + DAEMON_START_TIMEOUT
        status = None
        while time.monotonic() < deadline and proc.poll() is None:
            if sock.exists():
                status = run(home, "status", "--json", "--socket", str(sock))
                if status.returncode == 0:
                    break
            time.sleep(0.1)
        assert status is not None and status.returncode == 0, (home / "serve.out").read_text()
        assert json.loads(status.stdout)["config"]["path"] == str(run_dir / "scoutd.toml")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # exec'd: this is the daemon itself
        try:
            code = proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait(timeout=15)
        out.seek(0)
        printed = out.read()
        out.close()
    assert f"scoutd: socket {sock}" in printed
    assert f"scoutd status --socket {sock}" in printed
    assert code == 0, printed
    assert not sock.exists()  # removed on graceful shutdown
