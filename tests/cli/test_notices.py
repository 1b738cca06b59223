"""``scoutd notify`` and ``scoutd abort``: real files in real inboxes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import scoutd
from scoutd.testing import conversation

from .helpers import (
    CLI_TIMEOUT,
    break_record,
    clean_environ,
    one_error_line,
    run,
)


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
    assert hidden.returncode == 2
    assert ".hidden" in one_error_line(hidden)
    too_long = run(home, "notify", "--name", "n" * 250, str(save_file), "x")
    assert too_long.returncode == 2
    assert "250 bytes, at most 249" in one_error_line(too_long)
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
    break_record(save_file, sabotage)
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


def test_a_second_abort_keeps_the_waiting_one_and_says_so(home: Path) -> None:
    """Documented: while an abort waits, another ``scoutd abort`` keeps it, says so, exits 0."""
    save_file = home / "agent.chat"
    first = run(home, "abort", str(save_file), "first")
    assert first.returncode == 0 and first.stderr == "", first.stderr
    second = run(home, "abort", str(save_file), "second")
    assert second.returncode == 0
    assert first.stdout == second.stdout
    warning = one_error_line(second)
    assert warning.startswith("scoutd: warning: an abort is already waiting in ")
    assert "'first'" in warning and "yours was not written" in warning
    same = run(home, "abort", str(save_file), "first")  # the same reason: nothing to say
    assert same.returncode == 0 and same.stderr == ""
    stopped = run(home, "prepare", "--local", "--save-file", str(save_file), input="[]")
    assert stopped.stderr.strip().splitlines()[-1] == "scoutd: aborted: first"
    # Consumed, it keeps the chat aborted with its reason until an operator clears it.
    still = run(home, "prepare", "--local", "--save-file", str(save_file), input="[]")
    assert still.stderr.strip().splitlines()[-1] == "scoutd: aborted: first"
    assert run(home, "clear", str(save_file)).returncode == 0
    # Then the next abort is written with its own reason, without a warning.
    third = run(home, "abort", str(save_file), "third")
    assert third.returncode == 0 and third.stderr == ""
    again = run(home, "prepare", "--local", "--save-file", str(save_file), input="[]")
    assert again.stderr.strip().splitlines()[-1] == "scoutd: aborted: third"


def test_notify_refuses_a_chat_outside_the_daemons_roots(home: Path) -> None:
    """Checked against the config's allowed_roots before any directory is created."""
    allowed = home / "agents"
    config = home / "roots.toml"
    config.write_text(f'[daemon]\nallowed_roots = ["{allowed}"]\n')
    outside = home / "elsewhere" / "deep" / "agent.chat"
    refused = run(home, "notify", "--config", str(config), str(outside), "hello")
    assert refused.returncode == 2
    line = one_error_line(refused)
    assert "outside allowed_roots" in line and str(allowed) in line, line
    assert not (home / "elsewhere").exists()  # nothing created
    # The same through the environment's config, and with a relative path that escapes.
    via_env = run(home, "notify", "agents/../elsewhere/agent.chat", "hi",
                  env={"SCOUTD_CONFIG": str(config)})  # fmt: skip
    assert via_env.returncode == 2 and not (home / "elsewhere").exists()

    inside = allowed / "a1" / "agent.chat"
    accepted = run(home, "notify", "--config", str(config), str(inside), "hello")
    assert accepted.returncode == 0, accepted.stderr
    assert Path(accepted.stdout.strip()).read_text() == "hello"


def test_abort_outside_the_roots_is_written_with_a_warning(home: Path) -> None:
    """An abort always aborts: in-process agents see it, so it is written, with a warning."""
    config = home / "roots.toml"
    config.write_text(f'[daemon]\nallowed_roots = ["{home / "agents"}"]\n')
    save_file = home / "elsewhere" / "agent.chat"
    result = run(home, "abort", "--config", str(config), str(save_file), "stop")
    assert result.returncode == 0
    assert "will not push this abort" in one_error_line(result)
    assert Path(result.stdout.strip()).read_text() == "stop"


# A config the verbs cannot read, each way an operator may meet one: a file named but
# missing, a directory where the file should be, a file caught mid-write (not TOML),
# a key the verbs use with a wrong value.
_UNREADABLE = {
    "missing": ("{home}/absent.toml", "cannot read config file"),
    "directory": ("{home}", "cannot read config file"),
    "mid-write": ("{home}/cut.toml", "invalid config file"),
    "roots": ("{home}/roots.toml", "`daemon.allowed_roots` is not an array of strings"),
    "socket": ("{home}/socket.toml", "socket_path '' is not a path"),
}


@pytest.mark.parametrize("verb", ["abort", "notify"])
@pytest.mark.parametrize("case", sorted(_UNREADABLE))
def test_a_config_that_cannot_be_read_never_stops_the_file(
    home: Path, verb: str, case: str
) -> None:
    """The file is written, the command succeeds, and stderr says what was not checked."""
    (home / "cut.toml").write_text(f'[daemon]\nallowed_roots = ["{home}"')
    (home / "roots.toml").write_text(f'[daemon]\nallowed_roots = "{home}"\n')
    (home / "socket.toml").write_text('[daemon]\nsocket_path = ""\n')
    config, named = _UNREADABLE[case]
    save_file = home / "agent.chat"
    result = run(
        home, verb, str(save_file), "stop", env={"SCOUTD_CONFIG": config.format(home=home)}
    )
    assert result.returncode == 0, result.stderr
    written = Path(result.stdout.strip())
    assert written.parent == Path(scoutd.inbox_dir(str(save_file)))
    assert written.read_text() == "stop"
    assert (written.name == "abort") is (verb == "abort")
    warning = one_error_line(result)
    assert warning.startswith("scoutd: warning: ") and named in warning
    assert "no daemon answered at /" in warning and "(the file is written)" in warning


@pytest.mark.parametrize("mistake", ["typo", "variable"])
def test_with_no_daemon_the_verbs_read_only_the_keys_they_use(home: Path, mistake: str) -> None:
    """No daemon answers: a mistake outside ``[daemon]``'s paths (a typo in ``[prompt]``,
    a bad ``[prompt]`` environment variable) is not the verbs' to find. The file's
    roots still decide: outside them a notice is refused, inside it is written."""
    served = home / "served"
    config = home / "scoutd.toml"
    typo = "[prompt]\nepoch_sise = 3\n" if mistake == "typo" else ""
    config.write_text(f'[daemon]\nallowed_roots = ["{served}"]\n{typo}')
    env = {"SCOUTD_CONFIG": str(config)}
    if mistake == "variable":
        env["EPOCH_SIZE"] = "many"
    outside = run(home, "notify", str(home / "elsewhere" / "agent.chat"), "hi", env=env)
    assert outside.returncode == 2, outside.stderr
    assert "outside allowed_roots" in one_error_line(outside) and str(served) in outside.stderr
    inside = run(home, "notify", str(served / "agent.chat"), "hi", env=env)
    assert inside.returncode == 0 and inside.stderr == "", inside
    assert Path(inside.stdout.strip()).read_text() == "hi"


def test_an_abort_is_written_before_the_daemon_is_asked(home: Path) -> None:
    """A daemon that accepts and never answers holds ``scoutd abort`` up to its status
    timeout, but the abort is in the inbox already when the daemon is asked."""
    save_file = home / "agent.chat"
    abort = Path(scoutd.inbox_dir(str(save_file))) / "abort"
    path = str(home / "hung.sock")
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(path)
        listener.listen(1)
        listener.settimeout(CLI_TIMEOUT)
        environ = clean_environ()
        environ["SCOUTD_SOCKET"] = path
        with subprocess.Popen(
            [sys.executable, "-m", "scoutd", "abort", str(save_file), "stop"],
            env=environ,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        ) as process:
            try:
                connection, _ = listener.accept()  # the status request, left unanswered
                with connection:
                    assert abort.read_text() == "stop"
            finally:
                _, err = process.communicate(timeout=CLI_TIMEOUT)
    assert process.returncode == 0, err
