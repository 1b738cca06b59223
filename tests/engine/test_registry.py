"""An operator's plugin strategy, as a hostile client meets it through the daemon.

A plugin is the operator's code; a client only selects it by name. Whatever the
plugin raises, at its import or when it runs (an exit or an interrupt
included), is the error of that one call: the daemon keeps serving everyone.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import scoutd
from scoutd.engine.registry import REGISTRY
from scoutd.errors import ConfigError
from scoutd.strategies.base import PrepareContext

from ..support.daemon import Daemon

PLUGINS = """
import sys
def exits(messages):
    sys.exit(3)
def interrupts(messages):
    raise KeyboardInterrupt
def fails(messages):
    raise ValueError("no")
def passes(messages):
    return list(messages)
"""
EXITS_AT_IMPORT = "import sys\nsys.exit(4)\n"
NAMES = ("exits", "interrupts", "fails", "passes")
MESSAGES = [{"role": "user", "content": "hello"}]
CTX = PrepareContext(config=scoutd.PromptConfig())


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    plugins = {name: f"hostile_plugins:{name}" for name in NAMES}
    plugins["exits_at_import"] = "hostile_exit_at_import:anything"
    with Daemon(plugins=plugins) as started:
        with open(os.path.join(started.dir, "hostile_plugins.py"), "w") as handle:
            handle.write(PLUGINS)
        with open(os.path.join(started.dir, "hostile_exit_at_import.py"), "w") as handle:
            handle.write(EXITS_AT_IMPORT)
        yield started


@pytest.mark.parametrize("name", ["exits", "interrupts", "exits_at_import"])
def test_a_plugin_that_exits_never_ends_the_daemon(daemon: Daemon, name: str) -> None:
    """Before the fix a plugin raising SystemExit or KeyboardInterrupt (in a worker
    thread) ended the daemon for every client: any client could select it."""
    with daemon.connect() as c:
        answer = c.call("prepare_prompt", {"messages": MESSAGES, "strategies": [name]}, 20)
        again = c.call("prepare_prompt", {"messages": MESSAGES, "strategies": ["passes"]}, 20)
    assert answer["error"]["code"] in (-32603, -32005), answer
    if name == "exits_at_import":
        assert "cannot be loaded: SystemExit: 4" in answer["error"]["message"]
    assert again["result"]["messages"] == MESSAGES
    assert daemon.alive() and daemon.status()["counts"]["requests"] >= 2


def test_a_plugin_that_raises_is_one_calls_error(daemon: Daemon) -> None:
    with daemon.connect() as c:
        answer = c.call("prepare_prompt", {"messages": MESSAGES, "strategies": ["fails"]}, 20)
    assert answer["error"]["code"] == -32603
    assert daemon.alive()


def test_in_the_callers_main_thread_an_interrupt_stays_an_interrupt(tmp_path: Any) -> None:
    """The library's caller keeps Ctrl-C: only worker threads turn exits into errors."""
    (tmp_path / "plug_main.py").write_text(PLUGINS)
    config = tmp_path / "scoutd.toml"
    config.write_text('[plugins]\ninterrupts = "plug_main:interrupts"\nbad = "plug_main:nope"\n')
    sys.path.insert(0, str(tmp_path))
    try:
        loaded = scoutd.load_config(config)
        assert threading.current_thread() is threading.main_thread()
        with pytest.raises(KeyboardInterrupt):
            REGISTRY.resolve("interrupts", loaded).run(MESSAGES, CTX)
        with pytest.raises(ConfigError, match="plug_main:nope"):
            REGISTRY.resolve("bad", loaded)
        result: list[BaseException] = []

        def worker() -> None:
            try:
                REGISTRY.resolve("interrupts", loaded).run(MESSAGES, CTX)
            except BaseException as exc:  # what the worker would see
                result.append(exc)

        thread = threading.Thread(target=worker)
        thread.start()
        thread.join(10)
        assert type(result[0]) is RuntimeError
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("plug_main", None)
