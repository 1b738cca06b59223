"""``scoutd prepare`` and ``scoutd explain``, in-process and through a real daemon."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
from pathlib import Path

import msgspec
import pytest

import scoutd
from scoutd.testing import conversation

from ..support.daemon import Daemon
from ..support.nesting import too_deep
from .helpers import (
    CLI_TIMEOUT,
    TOOL_ROLES,
    empty_snapshot,
    one_error_line,
    run,
    write_json,
)

# ------------------------------------------------------------------ prepare --local


@pytest.mark.parametrize("strategies", [None, "shorten_tools_epoch", "shorten_tools"])
def test_prepare_local_equals_library(home: Path, strategies: str | None) -> None:
    """The CLI prints exactly what prepare_prompt returns, as UTF-8 JSON."""
    # outputs over max_tool_chars, for shorten_tools; non-ASCII text written as itself
    messages = conversation(70, output_size=2000, ensure_ascii=False)
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
    assert bad.returncode == 2
    assert "epoch_sise" in one_error_line(bad)


def test_prepare_bad_json_exits_1_with_position(home: Path) -> None:
    result = run(home, "prepare", "--local", input='[{"role": "user",\n  "content": "x"},,]')
    assert result.returncode == 1
    line = one_error_line(result)
    assert "invalid JSON" in line and "line 2, column 19" in line, line


def test_json_nested_too_deeply_is_invalid_input_not_an_unexpected_error(home: Path) -> None:
    """Read by the CLI (prepare, explain) and by simulate: one line that says why."""
    deep = "[" * too_deep() + "]" * too_deep()  # past this interpreter's decoder
    result = run(home, "prepare", "--local", input=deep)
    assert result.returncode == 1
    assert one_error_line(result) == "scoutd: invalid JSON in <stdin>: nested too deeply"
    chat = home / "deep.json"
    chat.write_text(deep)
    result = run(home, "simulate", "--chat", str(chat))
    assert result.returncode == 1, result.stderr  # as for any chat that cannot be read
    assert result.stderr == f"scoutd simulate: chat {chat} is JSON nested too deeply\n"
    empty = run(home, "prepare", "--local", input="")
    assert empty.returncode == 1
    assert "empty" in one_error_line(empty)
    wrong = run(home, "prepare", "--local", input='{"role": "user"}')
    assert wrong.returncode == 1
    assert "list of messages" in one_error_line(wrong)
    missing = run(home, "prepare", "--local", str(home / "nope.json"))
    assert missing.returncode == 1
    assert "nope.json" in one_error_line(missing)


def test_unknown_strategy_exits_2_listing_available(home: Path) -> None:
    result = run(home, "prepare", "--local", "--strategies", "shorten_tools,nope", input="[]")
    assert result.returncode == 2
    line = one_error_line(result)
    assert "'nope'" in line
    for name in ("inbox", "none", "shorten_tools", "shorten_tools_epoch_increment"):
        assert name in line


# ------------------------------------------------------------------ explain

_ROW = re.compile(r"^\s+(\d+)\s+(function_call|function_call_output)\s+(\S+)\s+(\S+)\s+(\d+)\s+"
                  r"(kept|protected|truncated|dropped)\s+(\d+) -> (\d+)\s+(\S.*)$")  # fmt: skip


def test_explain_prints_a_row_per_tool_message(home: Path) -> None:
    messages = conversation(120, user_every=0)  # pair n's call is message 2 + 2 * n
    # Pair 30 repeats pair 5's call: its latest occurrence is protected from truncation.
    repeat, original = 2 + 2 * 30, 2 + 2 * 5
    call = json.loads(messages[original]["content"])
    assert call["id"] == "c5"
    messages[repeat] = {**messages[repeat], "content": json.dumps({**call, "id": "c30"})}
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
        assert row.group(9) == action.why  # the reason of each row, as the report gives it
    assert {row.group(6) for row in found} == {"kept", "protected", "truncated", "dropped"}
    # only the repeated call and its output are protected: the repeat is what the rows show
    assert [int(row.group(1)) for row in found if row.group(6) == "protected"] == [
        repeat,
        repeat + 1,
    ]

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
    assert unknown.returncode == 2
    assert "'nope'" in one_error_line(unknown)
    typo = run(home, "prepare", "--socket", daemon.socket_path, "--set", "epoch_sise=3",
               input="[]")  # fmt: skip
    assert typo.returncode == 2  # the daemon's answer is the same mistake as --local's
    assert "epoch_sise" in one_error_line(typo)


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


def test_set_may_not_name_code(home: Path, daemon: Daemon) -> None:
    """``--set tokenizer=os:mkdir`` would make the witness directory: refused (exit 2)
    with one line naming the key, in this process and through the daemon alike
    (docs/RELIABILITY.md, "What a client may configure")."""
    witness = home / "ran"
    messages = [{"role": "user", "content": str(witness)}, *conversation(3, user_every=0)[2:]]
    source = str(write_json(home / "chat.json", messages))
    for command in (
        ("prepare", "--local", source),
        ("prepare", "--socket", daemon.socket_path, source),
        ("explain", source),
        ("config", "show"),
    ):
        result = run(home, *command, "--set", "tokenizer=os:mkdir")
        assert result.returncode == 2, (command, result.stderr)
        assert "per-call override of tokenizer refused" in one_error_line(result)
    assert not witness.exists()
    # the operator's environment may name one: it is not an override
    allowed = run(home, "prepare", "--local", source, env={"TOKENIZER": "builtins:len"})
    assert allowed.returncode == 0, allowed.stderr


def test_set_naming_code_is_never_sent(home: Path) -> None:
    """Refused before the request is written: a daemon of an older version would run it.
    The listener here records what it receives and never answers."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path = str(home / "fake.sock")
    listener.bind(path)
    listener.listen(1)
    received: list[bytes] = []

    def record() -> None:
        listener.settimeout(CLI_TIMEOUT)
        with contextlib.suppress(OSError):
            peer, _ = listener.accept()
            with peer:
                peer.settimeout(CLI_TIMEOUT)
                while chunk := peer.recv(65536):
                    received.append(chunk)

    thread = threading.Thread(target=record, daemon=True)
    thread.start()
    try:
        result = run(home, "prepare", "--socket", path, "--timeout", "5",
                     "--set", "tokenizer=builtins:len", input="[]")  # fmt: skip
    finally:
        listener.close()
        thread.join(CLI_TIMEOUT)
    assert result.returncode == 2, result.stderr
    assert "per-call override of tokenizer refused" in one_error_line(result)
    assert b"tokenizer" not in b"".join(received)
