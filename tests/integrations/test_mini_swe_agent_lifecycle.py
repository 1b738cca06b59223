"""A mini-swe-agent run that an abort ends ends its daemon session (docs/INTEGRATIONS.md).

mini-swe-agent never tells a model that a run is over, so ``ScoutdModel``
keeps a run's session until the next run or :meth:`~ScoutdModel.close`. An
abort is different: the wrapper itself ends the run, and every later query is
refused, so its session has no further use and must end at once (it stayed
open, on the daemon, until ``close()`` or the end of the process).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
os.environ.setdefault("MSWEA_GLOBAL_CONFIG_DIR", tempfile.mkdtemp(prefix="mswea-config-"))
pytest.importorskip("minisweagent", reason="needs the extra scoutd[mini-swe-agent]")

from minisweagent.agents.default import DefaultAgent
from minisweagent.environments.local import LocalEnvironment
from minisweagent.models import get_model
from minisweagent.models.test_models import make_toolcall_output

import scoutd
from scoutd.inbox.names import ABORT_NAME, inbox_dir
from tests.support.daemon import Daemon, session_count, sessions_settled


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with Daemon() as running:
        yield running


def answer(n: int, command: str) -> dict[str, Any]:
    """The scripted model's answer: one ``bash`` call."""
    call = {
        "id": f"c{n}",
        "type": "function",
        "function": {"name": "bash", "arguments": json.dumps({"command": command})},
    }
    return make_toolcall_output("", [call], [{"command": command, "tool_call_id": f"c{n}"}])


def agent_of(model: Any) -> DefaultAgent:
    return DefaultAgent(
        model,
        LocalEnvironment(cwd=tempfile.gettempdir()),
        cost_limit=0,
        system_template="You are a careful agent.",
        instance_template="{{task}}",
    )


def test_an_aborted_run_ends_its_session_and_stays_aborted(daemon: Daemon, tmp_path: Any) -> None:
    """The run's second command drops an ``abort``: the run ends ``Aborted`` before its
    third query, its daemon session is gone without ``close()``, and the next run of
    the model is aborted too without reaching the model."""
    save_file = os.path.join(daemon.dir, f"{tmp_path.name}.chat")
    abort = os.path.join(inbox_dir(save_file), ABORT_NAME)
    commands = [
        "echo one",
        f"printf 'stop now' > {abort}",
        "echo three",
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",
    ]
    os.makedirs(inbox_dir(save_file))
    before = session_count(daemon)  # those of other tests' runs
    model: Any = get_model(
        "lifecycle",
        {
            "model_class": "scoutd.integrations.mini_swe_agent.ScoutdModel",
            "wrapped_model_class": "minisweagent.models.test_models.DeterministicToolcallModel",
            "outputs": [answer(n, c) for n, c in enumerate(commands)],
            "scoutd": {"save_file": save_file, "socket": daemon.socket_path},
        },
    )
    try:
        info = agent_of(model).run("Run the commands.")
        assert (info["exit_status"], info["reason"]) == ("Aborted", "stop now")
        assert model.wrapped.current_index == 1  # queries 0 and 1, never 2
        assert sessions_settled(daemon, before) <= before
        assert model.preparer is not None and model.preparer.aborted == "stop now"
        again = agent_of(model).run("Run the commands.")
        assert (again["exit_status"], again["reason"]) == ("Aborted", "stop now")
        assert model.wrapped.current_index == 1  # queries 0 and 1, never 2
        assert sessions_settled(daemon, before) <= before
    finally:
        model.close()
        scoutd.inbox.aborted.clear(save_file)
