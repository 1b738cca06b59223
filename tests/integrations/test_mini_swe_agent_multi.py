"""Two mini-swe-agent agents sharing one ``ScoutdModel``: in turn and one after the other.

Each agent's query must be prepared from its own messages, in its own run's
scoutd session, kept from query to query while the other agent queries in
between (a session per run, not one per query); a notice reaches one query;
an abort ends both agents' runs, and a run of either after it. mini-swe-agent's
own ``DefaultAgent`` steps, its ``DeterministicToolcallModel`` and a real
``LocalEnvironment``; in process and through a real daemon subprocess.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

import pytest

os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
os.environ.setdefault("MSWEA_GLOBAL_CONFIG_DIR", tempfile.mkdtemp(prefix="mswea-config-"))
pytest.importorskip("minisweagent", reason="needs the extra scoutd[mini-swe-agent]")

from minisweagent.agents.default import DefaultAgent
from minisweagent.environments.local import LocalEnvironment
from minisweagent.exceptions import InterruptAgentFlow
from minisweagent.models.test_models import DeterministicToolcallModel, make_toolcall_output

import scoutd
from scoutd.inbox.aborted import clear
from scoutd.integrations._run import HookClosed
from scoutd.integrations.mini_swe_agent import MAX_RUNS, ScoutdModel
from scoutd.strategies.inbox import write_abort, write_notice
from tests.integrations.replay import CONFIG, contains, daemon_sessions
from tests.support.daemon import wait_for

STEPS = 12  # queries of each agent
NOTICE = "operator notice 2b9d: the staging database is read-only"


def answer(tag: str, n: int) -> dict[str, Any]:
    """Agent ``tag``'s ``n``-th answer: one command with a long output."""
    command = f"seq 1 3000  # {tag} step {n}"
    call = {
        "id": f"{tag}{n}",
        "type": "function",
        "function": {"name": "bash", "arguments": json.dumps({"command": command})},
    }
    return make_toolcall_output("", [call], [{"command": command, "tool_call_id": f"{tag}{n}"}])


class Recording(DeterministicToolcallModel):
    """The scripted model: answers in the given order, records the prompts it got."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # type: ignore[no-untyped-call]
        self.seen: list[list[dict[str, Any]]] = []

    def query(self, messages: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        self.seen.append(messages)
        found: dict[str, Any] = super().query(messages, **kwargs)
        return found


def started(model: ScoutdModel, task: str) -> DefaultAgent:
    """An agent with its run's first messages, as ``DefaultAgent.run`` makes them."""
    agent = DefaultAgent(
        model,
        LocalEnvironment(cwd=tempfile.gettempdir()),
        cost_limit=0,
        system_template="You are a careful agent.",
        instance_template="{{task}}",
    )
    agent.extra_template_vars |= {"task": task}
    agent.add_messages(
        model.format_message(role="system", content="You are a careful agent."),
        model.format_message(role="user", content=task),
    )
    return agent


def step(agent: DefaultAgent) -> list[dict[str, Any]]:
    """One step of the agent, as its ``run`` loop makes it; returns the messages queried."""
    queried = [{k: v for k, v in m.items() if k != "extra"} for m in agent.messages]
    try:
        agent.step()
    except InterruptAgentFlow as exc:
        agent.add_messages(*exc.messages)
    return queried


def test_agents_in_turn_keep_their_own_sessions(socket: tuple[str | None, str]) -> None:
    """A and B query in turn, 12 times each: every prompt is the prepared prompt of the
    querying agent's own messages; through the daemon the two runs use two sessions,
    not one per query; a notice dropped mid-run reaches the next query only."""
    socket_path, directory = socket
    save_file = os.path.join(directory, "shared.chat")
    outputs = [answer(tag, n) for n in range(STEPS) for tag in "AB"]
    inner = Recording(outputs=outputs)
    model = ScoutdModel.wrapping(inner, save_file=save_file, socket=socket_path, config=CONFIG)
    with model:
        agents = [started(model, "task A"), started(model, "task B")]
        queried: list[list[dict[str, Any]]] = []
        preparers: list[Any] = []  # the run preparers the queries went through, held
        for n in range(STEPS):
            if n == 5:
                write_notice(save_file, NOTICE, name="note.txt")
            for agent in agents:
                queried.append(step(agent))
                preparers.append(model.preparer)
        assert len({id(p) for p in preparers}) == 2  # one per run, not one per query
        noticed = [contains(prompt, NOTICE) for prompt in inner.seen]
        assert noticed.count(True) == 1 and noticed.index(True) == 10  # A's 6th query
        compacted = 0
        for k, (messages, prompt) in enumerate(zip(queried, inner.seen, strict=True)):
            mine = "task A" if k % 2 == 0 else "task B"
            assert contains(messages, mine) and not contains(prompt, "task " + "AB"[1 - k % 2])
            expected = scoutd.prepare(messages, config=CONFIG, format="openai-chat").messages
            shown = [m for m in prompt if not contains(m, NOTICE)]
            assert shown == expected, f"query {k}"
            compacted += len(json.dumps(shown)) < len(json.dumps(messages))
        assert compacted >= 8
    if socket_path is not None:
        settled = lambda: daemon_sessions(directory)[0] == daemon_sessions(directory)[1]  # noqa: E731
        wait_for(settled, 10, "every session closed")
        assert daemon_sessions(directory) == (2, 2)


def test_an_abort_ends_both_agents_and_their_later_runs(socket: tuple[str | None, str]) -> None:
    """An abort dropped while A's query is answered ends B's next query and A's, and
    every later run of either agent on this model, without reaching the model."""
    socket_path, directory = socket
    save_file = os.path.join(directory, "shared.chat")
    inner = Recording(outputs=[answer(tag, n) for n in range(4) for tag in "AB"])
    model = ScoutdModel.wrapping(inner, save_file=save_file, socket=socket_path, config=CONFIG)
    try:
        with model:
            a, b = started(model, "task A"), started(model, "task B")
            step(a), step(b)
            write_abort(save_file, "operator abort 6e0f: stop")
            step(a), step(b)
            assert len(inner.seen) == 2
            for agent in (a, b):
                assert agent.messages[-1]["role"] == "exit"
                assert agent.messages[-1]["extra"]["exit_status"] == "Aborted"
            again = started(model, "task A").run("task A")
            assert again["exit_status"] == "Aborted" and len(inner.seen) == 2
    finally:
        clear(save_file)


def test_a_model_keeps_a_bounded_number_of_runs(tmp_path: Any) -> None:
    """Past ``MAX_RUNS`` runs the least recently queried idle run's session ends; its
    next query opens a new one and is prepared as before."""
    inner = Recording(outputs=[answer("R", n) for n in range(MAX_RUNS + 3)])
    model = ScoutdModel.wrapping(inner, save_file=str(tmp_path / "runs.chat"), config=CONFIG)
    runs = [
        [{"role": "system", "content": "s"}, {"role": "user", "content": f"task {n}"}]
        for n in range(MAX_RUNS + 1)
    ]
    with model:
        preparers = []
        for messages in runs:
            model.query(messages)
            preparers.append(model.preparer)
        ended = []
        for preparer in preparers:
            assert preparer is not None
            try:
                preparer.recall("#1")
            except HookClosed:
                ended.append(preparer)
        assert ended == preparers[:1]
        model.query(runs[0])  # its session was ended: a new one
        assert model.preparer is not preparers[0] and len(inner.seen) == MAX_RUNS + 2
        assert inner.seen[-1] == inner.seen[0]
    assert model.preparer is None
