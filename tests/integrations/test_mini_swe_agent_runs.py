"""One ``ScoutdModel`` shared by two mini-swe-agent runs at once (docs/INTEGRATIONS.md).

The wrapper tells runs apart by their first message and gives each its own
scoutd session. A query of one run must never close the session another run's
query is using at that moment: it did, so that run died with ``HookClosed``.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Sequence
from typing import Any

import pytest

os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
os.environ.setdefault("MSWEA_GLOBAL_CONFIG_DIR", tempfile.mkdtemp(prefix="mswea-config-"))
pytest.importorskip("minisweagent", reason="needs the extra scoutd[mini-swe-agent]")

import scoutd
from scoutd.integrations import mini_swe_agent
from scoutd.integrations._run import RunPreparer
from scoutd.integrations.mini_swe_agent import ScoutdModel

WAIT = 10.0  # seconds: a bound on every wait, never reached when the code is right


class Echo:
    """The wrapped model: records the prompts it gets, answers a fixed message."""

    config = None

    def __init__(self) -> None:
        self.seen: list[list[dict[str, Any]]] = []

    def query(self, messages: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        self.seen.append(messages)
        return {"role": "assistant", "content": "ok"}


def conversation(run: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": "s"}, {"role": "user", "content": f"task {run}"}]


def test_a_query_of_another_run_never_closes_a_session_in_use(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run A's query is between picking its session and preparing when run B's query
    comes: B gets a session of its own, and A's query is prepared by A's session."""
    in_window, b_done = threading.Event(), threading.Event()

    class Gated(RunPreparer):
        """Holds run A's first round until run B's query has been answered."""

        def prepare(self, messages: Sequence[Any]) -> scoutd.Prepared:
            if "task A" in str(messages) and not in_window.is_set():
                in_window.set()
                assert b_done.wait(WAIT)
            return super().prepare(messages)

    monkeypatch.setattr(mini_swe_agent, "RunPreparer", Gated)
    wrapped = Echo()
    model = ScoutdModel(scoutd={"save_file": str(tmp_path / "run.chat")}, wrapped=wrapped)
    a, b = conversation("A"), conversation("B")
    failures: list[BaseException] = []

    def run_a() -> None:
        try:
            model.query(a)
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=run_a)
    thread.start()
    try:
        assert in_window.wait(WAIT)
        model.query(b)
    finally:
        b_done.set()
        thread.join(WAIT)
    assert not thread.is_alive()
    assert failures == []
    # Each query reached the model with its own run's prompt, B's first.
    assert [str(m[-1]["content"]) for m in wrapped.seen] == ["task B", "task A"]
    # Both runs go on; each later round is prepared, then the model ends what is left.
    model.query([*a, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "go"}])
    model.query([*b, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "go"}])
    assert len(wrapped.seen) == 4
    model.close()
    assert model.preparer is None
