"""mini-swe-agent's own agent loop with scoutd's model wrapper (docs/INTEGRATIONS.md).

mini-swe-agent's ``DeterministicToolcallModel`` replays a recorded real run of
mini-swe-agent (tests/integrations/replay.py), and a ``LocalEnvironment``
answers each recorded command with its recorded output and runs the final
``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` for real, so ``DefaultAgent.run``
goes through its loop as with a provider, without network. Each scenario runs
in process and through a real daemon subprocess.
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
from typing import Any

import pytest

# mini-swe-agent prints a banner and keeps its global config in the user's
# config directory when imported: neither for a test run.
os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
os.environ.setdefault("MSWEA_GLOBAL_CONFIG_DIR", tempfile.mkdtemp(prefix="mswea-config-"))
pytest.importorskip("minisweagent", reason="needs the extra scoutd[mini-swe-agent]")

import yaml  # type: ignore[import-untyped]
from minisweagent.agents.default import DefaultAgent
from minisweagent.config import get_config_from_spec
from minisweagent.environments.local import LocalEnvironment
from minisweagent.models import get_model, get_model_class
from minisweagent.models.test_models import DeterministicToolcallModel, make_toolcall_output

import scoutd
from scoutd.inbox.aborted import clear
from scoutd.integrations.mini_swe_agent import ScoutdModel
from tests.integrations.replay import (
    ABORT_REASON,
    CONFIG,
    NOTICE,
    Events,
    Replay,
    check_one_daemon_session,
    check_rounds,
    contains,
    load_replay,
)
from tests.integrations.test_docs_samples import TEXT

NOTICE_AT = 8
ABORT_AT = 5
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
# The observation is the recorded output as it is (the run rendered it already).
OBSERVATION = "{{ output.output }}"


def outputs(replay: Replay) -> list[dict[str, Any]]:
    """The model's answers: the replay's turns, the last one submitting."""
    answers = []
    for index, turn in enumerate(replay.turns):
        calls = turn.calls or [(f"submit-{index}", "bash", json.dumps({"command": SUBMIT}))]
        tool_calls = [
            {"id": i, "type": "function", "function": {"name": name, "arguments": arguments}}
            for i, name, arguments in calls
        ]
        actions = [
            {"command": json.loads(arguments)["command"], "tool_call_id": i}
            for i, _, arguments in calls
        ]
        answers.append(make_toolcall_output(turn.text, tool_calls, actions))
    return answers


class RecordingModel(DeterministicToolcallModel):
    """The wrapped model: answers with the replay; records the messages it was given."""

    def __init__(self, events: Events, **config: Any) -> None:
        super().__init__(**config)  # type: ignore[no-untyped-call]
        self.events = events
        self.seen: list[list[dict[str, Any]]] = []

    def query(self, messages: list[dict[str, str]], **kwargs: Any) -> dict[str, Any]:
        self.seen.append(copy.deepcopy(messages))
        self.events.model_called()
        answer: dict[str, Any] = super().query(messages, **kwargs)
        return answer


class RecordingScoutd(ScoutdModel):
    """The wrapper as the agent calls it: keeps the agent's messages at each query."""

    full: list[list[dict[str, Any]]]

    def query(self, messages: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        self.full.append(copy.deepcopy(messages))
        return super().query(messages, **kwargs)


class ReplayEnvironment(LocalEnvironment):
    """A local environment: recorded outputs for recorded calls, anything else run for real."""

    def __init__(self, replay: Replay, cwd: str) -> None:
        super().__init__(cwd=cwd)
        self.replay = replay

    def execute(self, action: dict[str, Any], cwd: str = "", **kwargs: Any) -> dict[str, Any]:
        recorded = self.replay.outputs.get(action.get("tool_call_id", ""))
        if recorded is None:
            return super().execute(action, cwd, **kwargs)
        return {"output": recorded, "returncode": 0, "exception_info": ""}


def run_replay(
    replay: Replay, events: Events, socket_path: str | None, directory: str, **options: Any
) -> tuple[dict[str, Any], DefaultAgent, RecordingScoutd]:
    """Run ``DefaultAgent`` to its end; return its exit info, the agent and the model."""
    inner = RecordingModel(events, outputs=outputs(replay), observation_template=OBSERVATION)
    model = RecordingScoutd(
        scoutd={"save_file": events.save_file, "socket": socket_path, **options},
        wrapped=inner,
    )
    model.full = []
    agent = DefaultAgent(
        model,
        ReplayEnvironment(replay, directory),
        system_template=replay.system,
        instance_template="{{ task }}",
        cost_limit=0,
    )
    with model:
        info = agent.run(replay.task)
    return info, agent, model


def without_extra(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in m.items() if k != "extra"} for m in messages]


def test_whole_run_sees_prepared_prompts(socket: tuple[str | None, str]) -> None:
    socket_path, directory = socket
    replay = load_replay()
    save_file = os.path.join(directory, "run.chat")
    events = Events(save_file, notice_at=NOTICE_AT)
    info, agent, model = run_replay(replay, events, socket_path, directory, config=CONFIG)
    assert info["exit_status"] == "Submitted", info
    inner = model.wrapped
    assert len(inner.seen) == len(replay.turns) == len(model.full)
    full = [without_extra(h) for h in model.full]
    expected = [scoutd.prepare(h, config=CONFIG, format="openai-chat").messages for h in full]
    check_rounds(full, inner.seen, expected, NOTICE_AT)
    # The agent's own messages (its trajectory) are whole: every recorded output,
    # no notice, and each query's messages as they were, metadata included.
    assert agent.messages[: len(model.full[-1])] == model.full[-1]
    tools = [m["content"] for m in agent.messages if m["role"] == "tool"]
    assert tools == [replay.outputs[c[0]] for t in replay.turns for c in t.calls]
    assert not contains(agent.messages, NOTICE)
    assert not contains(agent.messages, "[Context compaction]")
    # The wrapped model's cost reached the agent as without scoutd.
    assert agent.cost == len(replay.turns) * inner.config.cost_per_call
    check_one_daemon_session(socket_path, directory)


def test_abort_ends_the_run_with_its_exit_status(socket: tuple[str | None, str]) -> None:
    socket_path, directory = socket
    replay = load_replay()
    save_file = os.path.join(directory, "run.chat")
    events = Events(save_file, abort_at=ABORT_AT)
    info, agent, model = run_replay(replay, events, socket_path, directory, config=CONFIG)
    assert info == {"exit_status": "Aborted", "submission": "", "reason": ABORT_REASON}
    assert agent.messages[-1]["role"] == "exit"
    assert agent.messages[-1]["content"] == ABORT_REASON
    # The model answered queries 0..ABORT_AT; the next one never reached it.
    assert len(model.wrapped.seen) == ABORT_AT + 1
    assert len(model.full) == ABORT_AT + 2
    assert agent.serialize()["info"]["exit_status"] == "Aborted"
    with pytest.raises(scoutd.Aborted, match="budget exceeded"):  # it stays so
        model.query(model.full[-1])
    check_one_daemon_session(socket_path, directory)


def test_an_aborted_chat_stays_aborted_at_the_next_run(socket: tuple[str | None, str]) -> None:
    socket_path, directory = socket
    replay = load_replay()
    save_file = os.path.join(directory, "run.chat")
    info, _, _ = run_replay(replay, Events(save_file, abort_at=ABORT_AT), socket_path, directory)
    assert info["exit_status"] == "Aborted"
    info, _, model = run_replay(replay, Events(save_file), socket_path, directory)
    assert info == {"exit_status": "Aborted", "submission": "", "reason": ABORT_REASON}
    assert model.wrapped.seen == [] and len(model.full) == 1
    clear(save_file)  # the operator lifts it: the next run goes to its end
    info, _, model = run_replay(replay, Events(save_file), socket_path, directory)
    assert info["exit_status"] == "Submitted", info
    assert len(model.wrapped.seen) == len(replay.turns)


def test_one_config_line_selects_the_wrapper(tmp_path: Any) -> None:
    """mini-swe-agent's ``get_model`` builds the wrapper from a config, as ``mini -c`` does."""
    replay = load_replay()
    save_file = str(tmp_path / "run.chat")
    config = {
        "model_class": "scoutd.integrations.mini_swe_agent.ScoutdModel",
        "wrapped_model_class": "minisweagent.models.test_models.DeterministicToolcallModel",
        "scoutd": {"save_file": save_file, "config": CONFIG},
        "outputs": outputs(replay),
        "observation_template": OBSERVATION,
    }
    model = get_model("deterministic", config)
    assert isinstance(model, ScoutdModel)
    assert isinstance(model.wrapped, DeterministicToolcallModel)
    agent = DefaultAgent(
        model,
        ReplayEnvironment(replay, str(tmp_path)),
        system_template=replay.system,
        instance_template="{{ task }}",
        cost_limit=0,
    )
    with model:
        info = agent.run(replay.task)
        assert model.preparer is not None and model.preparer.last is not None
        assert contains(model.preparer.last.messages, "[Context compaction]")
    assert info["exit_status"] == "Submitted"
    recorded = agent.serialize()["info"]["config"]  # the trajectory records the options
    assert recorded["scoutd"] == {"save_file": save_file, "config": CONFIG}
    assert recorded["model_type"].endswith(".DeterministicToolcallModel")


def test_a_mistyped_option_is_refused_when_the_model_is_built() -> None:
    with pytest.raises(
        ValueError, match=r"unknown scoutd option\(s\) save_fiel \(known: save_file"
    ):
        ScoutdModel(scoutd={"save_fiel": "run.chat"}, model_name="gpt-4.1")


def test_the_docs_config_selects_the_wrapper() -> None:
    """docs/INTEGRATIONS.md: its YAML and its ``mini -c`` line give the documented config."""
    section = TEXT[TEXT.index("## mini-swe-agent\n") :]
    block = section[section.index("```yaml\n") + len("```yaml\n") : section.index("```\n", 10)]
    model = yaml.safe_load(block)["model"]
    assert get_model_class(model["model_name"], model["model_class"]) is ScoutdModel
    assert model["scoutd"] == {"save_file": "~/chats/run-1.chat"}
    line = next(text for text in section.split("`") if text.startswith("mini -c"))
    specs = [arg for arg in line.split()[1:] if arg != "-c" and "=" in arg]
    config: dict[str, Any] = {}
    for spec in specs:
        config.setdefault("model", {}).update(get_config_from_spec(spec)["model"])
    assert config["model"]["model_class"] == model["model_class"]
    assert config["model"]["scoutd"] == model["scoutd"]
