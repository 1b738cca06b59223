"""An operator's tokenizer, as any client meets it through the daemon.

The tokenizer is the operator's code (``[prompt] tokenizer``), run by every
call of the default strategy. Whatever it raises, at its import or when it
counts (an exit included), is the error of the calls that ran it: the daemon
keeps serving everyone (scoutd/strategies/named_code.py). A tokenizer that
called ``sys.exit`` used to end the daemon, as a plugin strategy did.
"""

from __future__ import annotations

import os
import threading

import pytest

from scoutd.errors import ConfigError
from scoutd.strategies.named_code import Contained, import_named

from ..support.daemon import Daemon, conversation

TOKENIZERS = "import sys\ndef exits(text):\n    sys.exit(3)\n"
EXITS_AT_IMPORT = "import sys\nsys.exit(4)\n"


@pytest.mark.parametrize(
    ("target", "code", "error"),
    [
        ("hostile_tokens:exits", -32603, "internal error"),  # the daemon's log has the rest
        ("hostile_import:count", -32005, "cannot be loaded: SystemExit: 4"),
    ],
)
def test_a_tokenizer_that_exits_never_ends_the_daemon(target: str, code: int, error: str) -> None:
    with Daemon(prompt={"tokenizer": target}) as d:
        for name, text in (("hostile_tokens", TOKENIZERS), ("hostile_import", EXITS_AT_IMPORT)):
            with open(os.path.join(d.dir, f"{name}.py"), "w") as handle:
                handle.write(text)
        messages = conversation(30)
        with d.connect() as c:
            answer = c.call("prepare_prompt", {"messages": messages}, 20)
            served = c.call("prepare_prompt", {"messages": messages, "strategies": ["none"]}, 20)
        assert answer["error"]["code"] == code and error in answer["error"]["message"], answer
        assert served["result"]["messages"] == messages
        assert d.alive()


def test_on_the_main_thread_an_exit_stays_an_exit() -> None:
    """A library caller's Ctrl-C, or its own exit, is its own."""
    with pytest.raises(SystemExit):
        Contained("t", _exit)()
    outcome: list[BaseException] = []

    def worker() -> None:
        try:
            Contained("t", _exit)()
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(10)
    assert [type(e) for e in outcome] == [RuntimeError]


def test_a_name_that_imports_nothing_is_a_config_error() -> None:
    for target in ("", ":x", "no_such_module_xyz:f", "os:no_such_attribute"):
        with pytest.raises(ConfigError, match="cannot be loaded"):
            import_named("thing", target)


def _exit() -> None:
    raise SystemExit(2)
