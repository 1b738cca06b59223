"""Where scoutd's LangChain middleware stands among retry and fallback middleware.

LangChain nests the model-call wrappers in ``middleware=[...]`` order, the
first outermost. A retry or fallback middleware listed after scoutd's runs
inside it: the further attempts it makes of one model call never pass
scoutd's check, so an abort that appeared during the first attempt does not
stop them (docs/INTEGRATIONS.md, LangChain). Listed before scoutd's, every
attempt is checked. The agent loop, the scripted model and the recorder are
those of tests/integrations/test_langchain.py.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain.agents", reason="needs the extra scoutd[langchain]")

from langchain.agents.middleware import (
    AgentMiddleware,
    ModelFallbackMiddleware,
    ModelRetryMiddleware,
)
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult

import scoutd
from scoutd.inbox import write_abort
from scoutd.integrations.langchain import ScoutdMiddleware
from tests.integrations.replay import ABORT_REASON, CONFIG, Events, load_replay
from tests.integrations.test_langchain import (
    ABORT_AT,
    AbortDropper,
    ScriptedChatModel,
    run_replay,
)

LOGGER = "scoutd.integrations.langchain"


class FailingOnce(ScriptedChatModel):
    """Fails model call ``fail_at`` once, as a provider's 500 does, after the operator's
    abort arrived during it; answers with the replay's turns otherwise."""

    save_file: str
    fail_at: int
    attempts: int = 0

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.attempts += 1
        if self.attempts == self.fail_at + 1:
            write_abort(self.save_file, ABORT_REASON)
            raise RuntimeError("provider error 500: the first attempt of this call failed")
        return super()._generate(messages, stop, run_manager, **kwargs)


def second_attempt(kind: str, model: FailingOnce) -> AgentMiddleware:  # type: ignore[type-arg]
    """A middleware that makes a second attempt of the failed call: a retry of the same
    model, or a fallback model that goes on with the same replay."""
    if kind == "retry":
        return ModelRetryMiddleware(max_retries=1, initial_delay=0, jitter=False)
    fallback = ScriptedChatModel(replay=model.replay, events=model.events)
    return ModelFallbackMiddleware(fallback)


def failing_model(save_file: str) -> FailingOnce:
    replay = load_replay()
    return FailingOnce(
        replay=replay, events=Events(save_file), save_file=save_file, fail_at=ABORT_AT
    )


def order_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == LOGGER and r.levelno == logging.WARNING and "listed after" in r.message
    ]


@pytest.mark.parametrize("use_async", [False, True], ids=["invoke", "ainvoke"])
@pytest.mark.parametrize("kind", ["retry", "fallback"])
def test_a_retry_or_fallback_inside_scoutds_middleware_is_warned_of(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, kind: str, use_async: bool
) -> None:
    """``middleware=[ScoutdMiddleware(...), ModelRetryMiddleware()]``: the second attempt
    of the failed call reaches the model although the abort appeared during the first
    (the run stops only at the next model call). The middleware cannot check what runs
    inside it, so it says so, once, naming the middleware to move."""
    caplog.set_level(logging.WARNING, logger=LOGGER)
    save_file = str(tmp_path / "run.chat")
    model = failing_model(save_file)
    middleware = ScoutdMiddleware(save_file=save_file, config=CONFIG)
    wrapper = second_attempt(kind, model)
    result, _, _ = run_replay(
        middleware, model.replay, model.events, use_async, inside=[wrapper], model=model
    )
    assert isinstance(result, scoutd.Aborted) and result.reason == ABORT_REASON
    assert model.events.calls == ABORT_AT + 1  # the attempt after the abort was answered
    warned = order_warnings(caplog)
    assert len(warned) == 1, warned
    assert type(wrapper).__name__ in warned[0] and "ScoutdMiddleware last" in warned[0]
    middleware.preparer.close()


@pytest.mark.parametrize("kind", ["retry", "fallback"])
def test_listed_last_scoutds_middleware_checks_every_attempt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    """``middleware=[ModelRetryMiddleware(), ScoutdMiddleware(...)]``, as documented: the
    second attempt passes scoutd's ``wrap_model_call``, meets the abort and never reaches
    a model. A wrapper inside scoutd's that calls its handler once is no reason for a
    warning."""
    caplog.set_level(logging.WARNING, logger=LOGGER)
    save_file = str(tmp_path / "run.chat")
    model = failing_model(save_file)
    middleware = ScoutdMiddleware(save_file=save_file, config=CONFIG)
    result, _, _ = run_replay(
        middleware,
        model.replay,
        model.events,
        False,
        between=[second_attempt(kind, model)],
        inside=[AbortDropper(save_file, at=-1)],  # drops nothing: it only passes the call on
        model=model,
    )
    assert isinstance(result, scoutd.Aborted) and result.reason == ABORT_REASON
    assert model.events.calls == ABORT_AT  # calls 0 .. ABORT_AT - 1; no answer after the abort
    assert order_warnings(caplog) == []
    middleware.preparer.close()
