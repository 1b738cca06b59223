"""Named code in process (the daemon's side is in test_named_code.py): what its import
raises, said as the operator needs it, and its calls, contained off the main thread."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scoutd.errors import ConfigError
from scoutd.strategies.named_code import Contained, import_named

from ..support.threads import raised_in_a_worker

LABEL = "tokenizer 'x'"


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    (tmp_path / "named_raises.py").write_text("raise RuntimeError('boom')\n")
    (tmp_path / "named_exits.py").write_text("raise SystemExit(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for name in ("named_raises", "named_exits"):
        sys.modules.pop(name, None)


@pytest.mark.usefixtures("modules")
def test_what_an_import_raises_is_said_with_the_label() -> None:
    for target, why in [
        ("no_such_module_here:f", "No module named 'no_such_module_here'"),
        ("os:no_such_attribute", "module 'os' has no attribute 'no_such_attribute'"),
        ("named_raises:f", "RuntimeError: boom"),
    ]:
        with pytest.raises(ConfigError) as raised:
            import_named(LABEL, target)
        assert str(raised.value) == f"{LABEL} cannot be loaded: {why}"
    assert import_named(LABEL, " os : path.join ") is __import__("os").path.join


@pytest.mark.usefixtures("modules")
def test_an_exit_at_import_is_the_callers_on_the_main_thread_only() -> None:
    with pytest.raises(SystemExit):
        import_named(LABEL, "named_exits:f")
    sys.modules.pop("named_exits", None)
    raised = raised_in_a_worker(lambda: import_named(LABEL, "named_exits:f"))
    assert type(raised) is ConfigError
    assert str(raised) == f"{LABEL} cannot be loaded: SystemExit: 3"


def _exits(*args: Any, **kwargs: Any) -> Any:
    raise SystemExit(kwargs.get("code", 1))


def test_a_contained_call_passes_everything_on_and_keeps_the_name() -> None:
    def joined(a: str, b: str = "?") -> str:
        return a + b

    call = Contained(LABEL, joined)
    assert call("x", b="y") == "xy"
    assert call.__name__ == "joined" and call.__wrapped__ is joined  # type: ignore[attr-defined]
    with pytest.raises(SystemExit):
        Contained(LABEL, _exits)(code=4)  # the main thread keeps its exit
    raised = raised_in_a_worker(lambda: Contained(LABEL, _exits)(code=4))
    assert type(raised) is RuntimeError and str(raised) == f"{LABEL} raised SystemExit"
    with pytest.raises(ValueError, match=r"^own$"):
        Contained(LABEL, _raises_own)()
    raised = raised_in_a_worker(Contained(LABEL, _raises_own))  # an error is its own anywhere
    assert type(raised) is ValueError and str(raised) == "own"


def _raises_own() -> None:
    raise ValueError("own")
