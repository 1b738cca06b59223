"""The daemon's log: one line a record, whatever a client wrote (docs/OPERATIONS.md, "Logs").

A traceback follows its record on lines of its own; an exception's message may
quote what a client sent (a plugin's ``ValueError`` naming a message), so each
traceback line is indented and escaped: no line a client writes can read as a
record (which starts with its time, or under journald with its level).
"""

from __future__ import annotations

import io
import logging
import os
import re

import pytest

from scoutd.daemon_log import configure_logging

from .support.daemon import Daemon

FORGED = "INFO scoutd.inbox: notice 'forged.txt' delivered (1 bytes)"
# A record as the daemon writes it outside journald: its time, then its level.
RECORD = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) ")

PLUGIN = '''
def quoting(messages):
    """An operator's strategy whose error quotes the message it could not use."""
    raise ValueError("cannot use " + str(messages[-1].get("content")))
'''


def test_a_clients_text_in_a_traceback_forges_no_record() -> None:
    daemon = Daemon(plugins={"quoting": "quoting:quoting"})
    with open(os.path.join(daemon.dir, "quoting.py"), "w") as handle:
        handle.write(PLUGIN)
    text = f"x\n{FORGED}\r\x1b[2Jcleared\u2028{FORGED}"
    with daemon, daemon.connect() as client:
        params = {"messages": [{"role": "user", "content": text}], "strategies": "quoting"}
        reply = client.call("prepare_prompt", params)
        assert reply["error"]["message"] == "internal error"
        assert daemon.stop() == 0
        lines = daemon.log().splitlines()
    assert "  ValueError: cannot use x" in lines  # the traceback is there, indented
    assert lines.count(f"  {FORGED}") == 2
    assert "  \\x1b[2Jcleared" in lines  # escaped: no terminal control reaches the reader
    for line in lines:
        assert RECORD.match(line) or line.startswith("  "), line


def test_a_stack_and_an_exception_are_indented_under_journald_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    logger = logging.getLogger("scoutd")  # as the daemon sets it up, put back after
    monkeypatch.setattr(logger, "handlers", [])
    monkeypatch.setattr(logger, "propagate", logger.propagate)
    monkeypatch.setattr(logger, "level", logger.level)
    configure_logging("info", journal=True)
    log = logging.getLogger("scoutd.test")
    try:
        raise ValueError(f"quoted\n{FORGED}")
    except ValueError:
        log.exception("failed with %s", "a\nb")
    log.warning("here", stack_info=True)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "ERROR scoutd.test: failed with a\\x0ab"
    assert f"  {FORGED}" in lines and "WARNING scoutd.test: here" in lines
    assert "  Stack (most recent call last):" in lines
    for line in lines:
        assert line.startswith(("ERROR scoutd.test: ", "WARNING scoutd.test: ", "  ")), line
