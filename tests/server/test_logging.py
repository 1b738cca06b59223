"""What the daemon's log tells an operator, read from a real daemon at debug level."""

from __future__ import annotations

import os
import re
from pathlib import Path

from scoutd.strategies.inbox import write_abort, write_notice
from tests.support.daemon import Daemon, InProcessDaemon, conversation, toml_text, wait_for


def test_one_line_per_request_notice_and_abort() -> None:
    with Daemon(daemon={"log_level": "debug"}) as d, d.connect() as c:
        save_file = os.path.join(d.dir, "a.chat")
        write_notice(save_file, "first", name="n1")
        write_notice(save_file, "second\nERROR scoutd.server: forged", name="n2")
        assert "result" in c.call("prepare_prompt", {"messages": conversation(4)}, timeout=30)
        session = c.call("session.open", {"save_file": save_file})["result"]["session"]
        reply = c.call("prepare_prompt", {"session": session, "messages": conversation(2)})
        assert len(reply["result"]["messages"]) == len(conversation(2)) + 2
        write_abort(save_file, "stop\nnow")
        c.notification("session.aborted", timeout=10)
        wait_for(lambda: "abort consumed" in d.log(), 10, "the abort line")
        log = d.log()
    # away from journald every line starts with its timestamp (test_systemd.py: without)
    stamp = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ")
    records = [line for line in log.splitlines() if re.search(r"(DEBUG|INFO|WARNING) scoutd", line)]
    assert records and all(stamp.match(line) for line in records)
    lines = [stamp.sub("", line) for line in log.splitlines()]
    requests = [line for line in lines if line.startswith("DEBUG scoutd.server: request ")]
    # the harness's own `status` calls come first; then the three requests of this test
    methods = [line.split()[3] for line in requests]
    assert methods[-3:] == ["prepare_prompt", "session.open", "prepare_prompt"]
    last = requests[-1]
    match = re.search(r"session='([0-9a-f]{32})' pid=\d+ in=(\d+)B out=(\d+)B ([\d.]+)ms$", last)
    assert match, last
    assert match[1] == session and int(match[2]) > 100 and int(match[3]) > 100
    notices = [line for line in lines if " delivered (" in line]
    assert len(notices) == 2, notices
    assert re.match(r"INFO scoutd\.[a-z.]+: notice 'n1' delivered \(5 bytes\)", notices[0])
    assert "notice 'n2' delivered (34 bytes)" in notices[1]
    aborts = [line for line in lines if "abort consumed" in line]
    assert len(aborts) == 1 and aborts[0].startswith("INFO scoutd.sessions: ")
    assert aborts[0].endswith("(1 session(s)): 'stop\\nnow'")
    assert not any(line.startswith("ERROR scoutd.server: forged") for line in lines)


def test_reload_warns_about_restart_keys_against_the_socket_in_use() -> None:
    with InProcessDaemon() as d, d.connect() as c:
        moved = dict(d.daemon, socket_path=os.path.join(d.dir, "other.sock"))
        d.write_config(toml_text({"daemon": moved}))
        assert c.call("config.reload")["result"]["generation"] >= 2
        wait_for(lambda: d.log().count("socket_path changed") == 1, 5, "one warning")
        d.write_config(toml_text({"daemon": d.daemon}))  # back to the socket in use
        generation = c.call("config.reload")["result"]["generation"]
        wait_for(lambda: f"generation {generation})" in d.log(), 5, "the reload")
        assert d.log().count("socket_path changed") == 1


def test_a_restart_key_change_read_twice_warns_once() -> None:
    """The same changed file reloaded again (a watched write and a ``config.reload``
    at once, or two) holds no news: one warning, at the reload that brought it."""
    with InProcessDaemon() as d, d.connect() as c:
        moved = dict(d.daemon, socket_path=os.path.join(d.dir, "other.sock"))
        d.write_config(toml_text({"daemon": moved}))
        for _ in range(3):
            generation = c.call("config.reload")["result"]["generation"]
        wait_for(lambda: f"generation {generation})" in d.log(), 5, "the reloads")
        assert d.log().count("socket_path changed") == 1


def test_bad_reload_answers_once_and_missing_roots_warn() -> None:
    with InProcessDaemon() as d, d.connect() as c:
        with open(d.config_path, "a", encoding="utf-8") as handle:
            handle.write("max_request_bytes = 'big'\n")
        error = c.call("config.reload")["error"]
        assert error["message"].count("invalid config") == 1, error["message"]
        assert error["message"].startswith("reload refused, keeping generation 1: ")
        missing = os.path.join(d.dir, "no-such-dir")
        d.write_config(toml_text({"daemon": dict(d.daemon, allowed_roots=[d.dir, missing])}))
        assert c.call("config.reload")["result"]["generation"] == 2
        assert f"allowed_roots entry {missing} is not an existing directory" in d.log()


def test_startup_warns_about_a_missing_root(tmp_path: Path) -> None:
    missing = str(tmp_path / "not-mounted-yet")
    with Daemon(directory=str(tmp_path), daemon={"allowed_roots": [str(tmp_path), missing]}) as d:
        assert d.status()["config"]["generation"] == 1
        log = d.log()
    assert f"allowed_roots entry {missing} is not an existing directory" in log


def test_the_same_reload_error_is_logged_once_at_error_level() -> None:
    """A file left broken while it is fixed, or an editor's burst of writes, used to
    log one error line per reload; the next different error is logged again."""
    with Daemon() as d, d.connect() as c:
        with open(d.config_path, "a", encoding="utf-8") as handle:
            handle.write("max_request_bytes = 'big'\n")
        for _ in range(4):
            assert "error" in c.call("config.reload")
        with open(d.config_path, "a", encoding="utf-8") as handle:
            handle.write("[nonsense\n")
        assert "error" in c.call("config.reload")
        errors = [line for line in d.log().splitlines() if "ERROR" in line and "reload" in line]
        assert len(errors) == 2, errors
        assert "max_request_bytes" in errors[0] and "max_request_bytes" not in errors[1]
