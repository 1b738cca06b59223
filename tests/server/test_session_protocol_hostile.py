"""The session attack of ``test_session_protocol_stateful`` with hostile operations.

Besides the operations there, the client changes what it asks for between rounds
(strategies, ``[prompt]`` overrides, the call's format, the cache hint), sends
its conversation with a message dropped, repeated or moved, passes
``max_session_messages``, queues several rounds of one session before reading
an answer, races a whole conversation from its other connection against its own
append, and appends a message of another format. The oracle is the same:
:func:`scoutd.prepare` of the conversation the client believes the daemon holds
(a round it refuses leaves the daemon's as it was), in-process recall answers,
and the bytes ``status`` counts.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ..formats.conversations import anthropic, chat, responses
from ..support.daemon import Daemon
from .test_session_protocol_stateful import (
    FORMATS,
    LIMIT,
    OPERATIONS,
    PROMPT,
    STRATEGIES,
    Attack,
    Model,
    compact,
    play,
)


class Hostile(Attack):
    """The attack, with the operations of a client that changes its mind or errs."""

    def op_vary(self, model: Model) -> None:
        """The client changes what it asks for from now on: strategies, overrides,
        the call's format or cache hint."""
        what = self.rng.choice(["strategies", "config", "format", "cache"])
        if what == "strategies":
            model.strategies = self.rng.choice(STRATEGIES)
        elif what == "config":
            model.overrides = self.rng.choice(
                [
                    {},
                    {"epoch_size": 2},
                    {"context_window": 6_000},
                    {"recall": False},
                    {"max_tool_calls": 2, "epoch_compacted_tool_calls": 1},
                ]
            )
        elif what == "format":
            model.call_format = self.rng.choice([None, "auto", model.fmt])
        else:
            model.cache = self.rng.choice([None, True, False])
        self.seen[f"vary {what}"] += 1
        self.op_append(model)

    def op_hostile(self, model: Model) -> None:
        """The whole conversation with a message dropped, repeated or moved."""
        held = list(model.held)
        if len(held) < 2:
            return self.op_append(model)
        at = self.rng.randrange(len(held))
        kind = self.rng.choice(["drop", "repeat", "move"])
        if kind == "drop":
            del held[at]
        elif kind == "repeat":
            held.insert(at, held[at])
        else:
            held.append(held.pop(at))
        model.held = held
        self.seen[f"hostile {kind}"] += 1
        self.round(model, messages=held)

    def op_too_large(self, model: Model) -> None:
        """A round past max_session_messages is refused; the session is unchanged."""
        filler = [{"role": "user", "content": "x"}] * (LIMIT + 1 - len(model.held))
        if self.rng.random() < 0.5:
            params = self.params(model, append=filler, base=len(model.held))
        else:
            params = self.params(model, messages=model.held + filler)
        error = self.clients[model.owner].call("prepare_prompt", params)["error"]
        assert error["code"] == -32004, error
        self.seen["too large"] += 1

    def op_queued(self, model: Model) -> None:
        """Rounds of one session sent one after the other before any answer is read:
        they queue, in order (each delta of the one before)."""
        if model.mixed:
            return self.op_whole(model)
        client = self.clients[model.owner]
        sent = []
        for _ in range(self.rng.randint(2, 3)):
            new = model.source[len(model.held) : len(model.held) + self.rng.randint(0, 2)]
            params = self.params(model, append=new, base=len(model.held))
            model.held = model.held + new
            sent.append((list(model.held), params, client.request("prepare_prompt", params)))
        answers = [(held, params, client.response(rid)) for held, params, rid in sent]
        for held, params, answer in answers:
            assert "result" in answer, answer
            model.held = held
            self.absorb(model, params, answer["result"])
        self.seen["queued"] += 1

    def op_race(self, model: Model) -> None:
        """The owner's append and the other connection's whole conversation at once:
        either order leaves the other connection the writer, each answer right."""
        if model.mixed:
            return self.op_whole(model)
        owner, other = self.clients[model.owner], self.clients[1 - model.owner]
        new = model.source[len(model.held) : len(model.held) + 1]
        mine = self.params(model, append=new, base=len(model.held))
        theirs = self.params(model, messages=model.held, delta=False)
        first = owner.request("prepare_prompt", mine)
        second = other.request("prepare_prompt", theirs)
        answer, whole = owner.response(first), other.response(second)
        before = model.held
        if "result" in answer:
            model.held = before + new
            self.absorb(model, mine, answer["result"])
            self.seen["race owner first"] += 1
        else:
            assert answer["error"]["data"]["path"] == "$.params.base", answer
            self.seen["race other first"] += 1
        model.held, model.owner = before, 1 - model.owner
        got = self.whole(model, whole["result"]["messages"])
        assert compact(got) == compact(self.expected(model))
        model.confirmed = model.held

    def op_mixed(self, model: Model) -> None:
        """An append in another format than the session's declared one is refused or
        prepared like the whole conversation would be; either way the session goes on."""
        foreign = {"scout": responses, "openai-chat": anthropic}.get(model.fmt, chat)(1)[-1:]
        params = self.params(model, append=foreign, base=len(model.held))
        answer = self.clients[model.owner].call("prepare_prompt", params)
        if "error" in answer:
            assert answer["error"]["code"] == -32602, answer
            self.seen["mixed refused"] += 1
            return
        model.held, model.mixed = model.held + foreign, True
        self.absorb(model, params, answer["result"])
        self.seen["mixed prepared"] += 1


HOSTILE = {
    **OPERATIONS,
    "vary": 2,
    "hostile": 2,
    "too_large": 1,
    "queued": 2,
    "race": 1,
    "mixed": 1,
}


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with Daemon(prompt=PROMPT, daemon={"max_session_messages": LIMIT}) as running:
        yield running


@pytest.mark.parametrize("seed", range(8))
def test_hostile_session_operations_match_the_oracle(daemon: Daemon, seed: int) -> None:
    seen = play(Hostile, daemon, seed, HOSTILE)
    assert all(seen[f"round {fmt}"] >= 20 for fmt in FORMATS), seen
    assert sum(seen[f"vary {what}"] for what in ("strategies", "config", "format", "cache")) >= 8
    assert sum(seen[f"hostile {kind}"] for kind in ("drop", "repeat", "move")) >= 5, seen
    assert seen["queued"] >= 5 and seen["too large"] >= 2, seen
    assert seen["race owner first"] + seen["race other first"] >= 2, seen
    assert seen["mixed prepared"] + seen["mixed refused"] >= 2, seen
