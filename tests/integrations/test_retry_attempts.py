"""What scoutd checks when a framework makes a further attempt of one model call.

docs/INTEGRATIONS.md ("Retries and fallbacks") says, per framework, which
attempts pass scoutd's abort check and what to do about the others. These
tests hold it to that with the frameworks' own retry and fallback machinery:
a scripted model whose attempt at call ``FAIL_AT`` fails, as a provider's 500
does, after the operator's abort arrived during it. Unchecked, the further
attempt reaches a model; checked, the run ends with :class:`scoutd.Aborted`
and no model answers after the abort. The scripted models, tools and replay
are those of tests/integrations/test_openai_agents.py and test_pydantic_ai.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("agents", reason="needs the extra scoutd[openai-agents]")
pytest.importorskip("pydantic_ai", reason="needs the extra scoutd[pydantic-ai]")

from agents import Agent as AgentsAgent
from agents import ModelResponse as AgentsResponse
from agents import ModelSettings, RunConfig, Runner, retry_policies
from agents.retry import ModelRetrySettings, RetryPolicy, RetryPolicyContext
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import ModelFallback
from pydantic_ai.exceptions import ModelAPIError
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.fallback import FallbackModel
from pydantic_ai.models.function import AgentInfo, FunctionModel

import scoutd
from scoutd.inbox import write_abort
from scoutd.integrations.openai_agents import ScoutdInputFilter
from scoutd.integrations.pydantic_ai import ScoutdCapability
from tests.integrations.replay import ABORT_REASON, CONFIG, Events, Replay, load_replay
from tests.integrations.test_openai_agents import ScriptedModel, bash_tool
from tests.integrations.test_pydantic_ai import LIMITS, Scripted

FAIL_AT = 5  # the model call whose first attempt fails, the abort having arrived


class FailingOnce(ScriptedModel):
    """The Agents SDK's scripted model, whose first attempt at call ``FAIL_AT`` fails."""

    def __init__(self, replay: Replay, events: Events) -> None:
        super().__init__(replay, events)
        self.failed = False

    async def get_response(self, *args: Any, **kwargs: Any) -> AgentsResponse:
        if self.events.calls == FAIL_AT and not self.failed:
            self.failed = True
            write_abort(self.events.save_file, ABORT_REASON)
            raise ConnectionError("provider error 500: the first attempt of this call failed")
        return await super().get_response(*args, **kwargs)


def retry_every_failure(context: RetryPolicyContext) -> bool:
    """The application's own retry policy: here, every failure is worth one retry."""
    return True


@pytest.mark.parametrize("checked", [False, True], ids=["policy", "policy-checking-scoutd"])
def test_an_agents_sdk_retry_is_checked_only_by_a_policy_that_asks(
    tmp_path: Path, checked: bool
) -> None:
    """``ModelSettings(retry=...)`` retries inside one model call, after the input filter
    ran: the retry is answered although the abort arrived during the failed attempt, and
    the run stops only at the next model call (or ends, had that answer been the last). A
    policy that asks ``preparer.check()`` first ends the run with ``Aborted`` before it."""
    save_file = str(tmp_path / "run.chat")
    replay = load_replay()
    model = FailingOnce(replay, Events(save_file))

    async def main() -> Any:
        with ScoutdInputFilter(save_file=save_file, config=CONFIG) as scoutd_filter:
            policy: RetryPolicy = retry_every_failure
            if checked:

                async def scoutd_check(context: RetryPolicyContext) -> bool:
                    await anyio.to_thread.run_sync(scoutd_filter.preparer.check)
                    return True

                policy = retry_policies.all(scoutd_check, policy)
            settings = ModelSettings(retry=ModelRetrySettings(max_retries=1, policy=policy))
            agent = AgentsAgent(
                name="coder",
                instructions=replay.system,
                model=model,
                tools=[bash_tool(replay)],
                model_settings=settings,
            )
            config = RunConfig(call_model_input_filter=scoutd_filter, tracing_disabled=True)
            try:
                return await Runner.run(agent, replay.task, run_config=config, max_turns=200)
            except scoutd.Aborted as exc:
                return exc

    result = anyio.run(main)
    assert isinstance(result, scoutd.Aborted) and result.reason == ABORT_REASON
    assert model.failed
    # Checked: no answer after the abort. Unchecked: the retry's, then the next filter.
    assert model.events.calls == (FAIL_AT if checked else FAIL_AT + 1)


@pytest.mark.parametrize("fallback", ["FallbackModel", "ModelFallback"])
def test_a_pydantic_ai_fallback_is_checked_as_a_capability_only(
    tmp_path: Path, fallback: str
) -> None:
    """``FallbackModel`` tries its models inside one model request, after scoutd's hook
    ran: the other model answers although the abort arrived during the failed attempt.
    The ``ModelFallback`` capability makes each attempt one that scoutd's
    ``prepare_model_request`` checks: the run ends with ``Aborted`` before it."""
    save_file = str(tmp_path / "run.chat")
    replay = load_replay()
    scripted = Scripted(replay, Events(save_file))
    failed: list[int] = []

    def primary(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if scripted.events.calls == FAIL_AT and not failed:
            failed.append(FAIL_AT)
            write_abort(save_file, ABORT_REASON)
            raise ModelAPIError("primary", "provider error 500: the first attempt failed")
        return scripted(messages, info)

    first, other = FunctionModel(primary), FunctionModel(scripted)
    hook = ScoutdCapability(save_file=save_file, config=CONFIG, recall=False)
    if fallback == "FallbackModel":
        agent = Agent(FallbackModel(first, other), system_prompt=replay.system, capabilities=[hook])
    else:
        agent = Agent(first, system_prompt=replay.system, capabilities=[hook, ModelFallback(other)])

    @agent.tool
    def bash(ctx: RunContext[None], command: str) -> str:
        """Run a shell command and return its output."""
        assert ctx.tool_call_id is not None
        return replay.outputs[ctx.tool_call_id]

    async def main() -> Any:
        try:
            return await agent.run(replay.task, usage_limits=LIMITS)
        except scoutd.Aborted as exc:
            return exc

    result = anyio.run(main)
    assert isinstance(result, scoutd.Aborted) and result.reason == ABORT_REASON
    assert failed == [FAIL_AT]
    answered = FAIL_AT + 1 if fallback == "FallbackModel" else FAIL_AT
    assert scripted.events.calls == answered  # FallbackModel's other model answered
