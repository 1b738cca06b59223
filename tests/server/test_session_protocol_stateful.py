"""A drawn sequence of session operations against the real daemon, checked by an oracle.

Sessions in every format (scout, OpenAI Chat, Responses, Anthropic) live side by
side in one daemon subprocess, on two connections. Each step draws one
operation: append rounds (with or without ``base``, empty), whole conversations
(shorter, longer, with an earlier message edited), wrong ``base``, refused
rounds, answers the client loses, recalls (own handles, searches, garbage, an
unknown session), a second connection taking the conversation over, pipelined
rounds of two sessions, close and reopen, a third connection that leaves with
a round unanswered. The oracle: every prompt the client
rebuilds equals, as compact JSON, what :func:`scoutd.prepare` gives for the
conversation it believes the daemon holds; every recall answers what an
in-process :class:`scoutd.Session` fed the same conversation answers; a wrong
call gets its documented error and the session goes on after the documented
recovery; ``status`` counts the bytes the live sessions hold
(docs/PROTOCOL.md, "Incremental sessions").
"""

from __future__ import annotations

import copy
import json
import os
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

import scoutd
from scoutd.config import Config, PromptConfig
from scoutd.delta import DeltaDecoder, DeltaMismatch
from scoutd.engine.held import held_bytes
from scoutd.engine.incremental import json_size
from scoutd.formats import FormatError
from scoutd.testing import conversation

from ..formats.conversations import anthropic, chat, responses
from ..support.daemon import Daemon, LineClient, wait_for

PROMPT: dict[str, Any] = {
    "epoch_tool_call_threshold": 2,
    "epoch_full_tool_calls": 1,
    "epoch_compacted_tool_calls": 2,
    "epoch_size": 1,
    "max_tool_calls": 3,
    "full_tool_outputs": 1,
    "context_window": 3_000,
    "recall": True,
}
CONFIG = Config(prompt=PromptConfig(**PROMPT))
STRATEGIES: list[str | None] = [
    None,
    "shorten_tools_epoch",
    "shorten_tools_epoch_increment",
    "shorten_tools",
]
FORMATS = ["scout", "openai-chat", "openai-responses", "anthropic"]
STEPS = 300
LIMIT = 120  # max_session_messages


def compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def source(fmt: str, rng: random.Random, turns: int = 8) -> list[dict[str, Any]]:
    """A long conversation in ``fmt`` that rounds take slices of."""
    output = "\n".join(f"line {k} of a long output é" for k in range(rng.choice([3, 40])))
    if fmt == "openai-chat":
        return chat(turns, parallel=rng.choice([1, 2]), output=output)
    if fmt == "openai-responses":
        return responses(turns, output=output)
    if fmt == "anthropic":
        return anthropic(turns, output=output)
    size = rng.choice([40, 400])
    return conversation(turns + 6, output_size=size, user_every=4, repeat_every=3)


def _edited(message: Any, tag: str) -> Any:
    """A copy of ``message`` whose longest string gets ``tag`` appended."""
    copied = copy.deepcopy(message)
    best: tuple[int, Any, Any] | None = None
    stack: list[Any] = [copied]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            if isinstance(value, str) and (best is None or len(value) > best[0]):
                best = (len(value), node, key)
            elif isinstance(value, (dict, list)):
                stack.append(value)
    if best is not None:
        best[1][best[2]] += tag
    return copied


def _held(messages: list[Any]) -> int:
    return held_bytes(messages, json_size(messages)) if messages else 0


@dataclass
class Model:
    """What a client knows of one session."""

    id: str
    name: str
    fmt: str
    strategies: str | None
    source: list[dict[str, Any]]
    owner: int  # the connection that set the conversation last
    held: list[Any] = field(default_factory=list)
    decoder: DeltaDecoder | None = None
    form: bool | None = None  # the daemon's last delta form (replacing?), None: none since
    edits: int = 0
    overrides: dict[str, Any] = field(default_factory=dict)  # per-call [prompt] keys
    call_format: str | None = None  # per-call format, None: the session's
    cache: bool | None = None  # per-call cache_control
    confirmed: list[Any] = field(default_factory=list)  # the last conversation the daemon took
    mixed: bool = False  # holds a message of another format (rounds may be refused)
    declared: str = "auto"  # the format given to session.open


class Attack:
    """The sessions, connections and counts of one drawn run."""

    def __init__(self, daemon: Daemon, rng: random.Random, clients: list[LineClient]) -> None:
        self.daemon, self.rng, self.clients = daemon, rng, clients
        self.sessions: list[Model] = []
        self.closed: list[str] = []
        self.seen: Counter[str] = Counter()
        self.opened = 0

    # --- helpers ----------------------------------------------------------------------

    def open(self, conn: int, fmt: str, messages: list[Any] | None = None) -> Model:
        self.opened += 1
        name = f"chat{self.opened}.json"
        declared = self.rng.choice([fmt, "auto"]) if fmt == "scout" else fmt
        params: dict[str, Any] = {
            "save_file": os.path.join(self.daemon.dir, name),
            "format": declared,
        }
        if messages:
            params["messages"] = messages
        answer = self.clients[conn].call("session.open", params)
        assert "result" in answer, answer
        model = Model(
            id=answer["result"]["session"],
            name=name,
            fmt=fmt,
            strategies=self.rng.choice(STRATEGIES),
            source=source(fmt, self.rng),
            owner=conn,
            held=list(messages or []),
            confirmed=list(messages or []),
            declared=declared,
        )
        self.sessions.append(model)
        return model

    def params(self, model: Model, **extra: Any) -> dict[str, Any]:
        params: dict[str, Any] = {"session": model.id, "delta": True, **extra}
        if model.strategies is not None:
            params["strategies"] = model.strategies
        if model.overrides:
            params["config"] = model.overrides
        if model.call_format is not None:
            params["format"] = model.call_format
        if model.cache is not None:
            params["cache_control"] = model.cache
        replacing = model.decoder.replacing if model.decoder else self.rng.random() < 0.5
        if params["delta"] and replacing:
            params["delta_replace"] = True
        return params

    def expected(self, model: Model) -> list[Any]:
        config = Config(prompt=PromptConfig(**{**PROMPT, **model.overrides}))
        return scoutd.prepare(
            model.held,
            model.strategies,
            format=model.call_format or model.declared,
            config=config,
            cache_control=model.cache,
        ).messages

    def absorb(self, model: Model, params: dict[str, Any], result: dict[str, Any]) -> None:
        """Apply an answer as a client does; on a mismatch, ask again whole."""
        if "messages" in result:
            got = self.whole(model, result["messages"])
        else:
            replacing = bool(params.get("delta_replace"))
            if model.form != replacing:
                assert result["keep"] == 0, (params, result["keep"])  # a form switch
            model.form = replacing
            if model.decoder is None or model.decoder.replacing != replacing:
                model.decoder = DeltaDecoder(replacing=replacing)
            try:
                got = model.decoder.apply(result)
            except DeltaMismatch:
                self.seen["mismatch recovered"] += 1
                whole = self.params(model, messages=model.held, delta=False)
                answer = self.clients[model.owner].call("prepare_prompt", whole)
                assert "result" in answer, answer
                got = self.whole(model, answer["result"]["messages"])
        assert compact(got) == compact(self.expected(model)), (model.fmt, model.strategies)
        model.confirmed = model.held
        self.seen[f"round {model.fmt}"] += 1

    def whole(self, model: Model, prompt: list[Any]) -> list[Any]:
        """Take a whole answer as a client does: its decoder holds it, in its form."""
        model.decoder = DeltaDecoder(replacing=bool(model.form))
        return model.decoder.full(prompt)

    def round(self, model: Model, **extra: Any) -> None:
        """One round; refused (``-32602``) exactly when ``scoutd.prepare`` refuses its
        conversation, which then leaves the daemon's as it was."""
        params = self.params(model, **extra)
        answer = self.clients[model.owner].call("prepare_prompt", params)
        if "error" in answer:
            assert model.mixed, answer
            with pytest.raises(FormatError):
                self.expected(model)
            assert answer["error"]["code"] == -32602, answer
            model.held = model.confirmed
            self.seen["format refused"] += 1
            return
        self.absorb(model, params, answer["result"])

    def append(self, model: Model, count: int, base: bool = True) -> None:
        new = model.source[len(model.held) : len(model.held) + count]
        extra: dict[str, Any] = {"append": new}
        if base:
            extra["base"] = len(model.held)
        model.held = model.held + new
        self.round(model, **extra)

    def bytes_held(self) -> int:
        count: int = self.clients[0].call("status")["result"]["counts"]["session_bytes"]
        return count

    # --- operations -------------------------------------------------------------------

    def op_append(self, model: Model) -> None:
        self.append(model, self.rng.randint(1, 4), base=self.rng.random() < 0.8)

    def op_empty(self, model: Model) -> None:
        self.append(model, 0)

    def op_whole(self, model: Model) -> None:
        model.held = model.source[: self.rng.randint(0, len(model.source))]
        model.mixed = False
        self.round(model, messages=model.held, delta=self.rng.random() < 0.8)

    def op_edit(self, model: Model) -> None:
        if not model.held:
            return self.op_append(model)
        at = self.rng.randrange(len(model.held))
        model.edits += 1
        model.held = list(model.held)
        model.held[at] = _edited(model.held[at], f" edit{model.edits}")
        self.seen["edit"] += 1
        self.round(model, messages=model.held)

    def op_wrong_base(self, model: Model) -> None:
        wrong = len(model.held) + self.rng.choice([1, 2, -1 if model.held else 3])
        params = self.params(model, append=model.source[:1], base=wrong)
        error = self.clients[model.owner].call("prepare_prompt", params)["error"]
        assert error["code"] == -32602 and error["data"]["path"] == "$.params.base", error
        assert error["data"]["messages"] == len(model.held), error
        self.seen["wrong base"] += 1

    def op_refused(self, model: Model) -> None:
        kind = self.rng.choice(["strategy", "config", "both"])
        extra: dict[str, Any] = {"append": model.source[:1], "base": len(model.held)}
        if kind == "strategy":
            extra["strategies"] = "no_such_strategy"
        elif kind == "config":
            extra["config"] = {"epoch_size": -1}
        else:
            extra = {"messages": [], "append": []}
        params = {**self.params(model), **extra}
        error = self.clients[model.owner].call("prepare_prompt", params)["error"]
        assert error["code"] in (-32002, -32602), error
        self.seen["refused"] += 1

    def op_lost(self, model: Model) -> None:
        """A round whose answer the client never applied: it sends the conversation
        whole (delta of the prompt the daemon last answered), as documented."""
        if model.mixed:
            return self.op_whole(model)
        new = model.source[len(model.held) : len(model.held) + self.rng.randint(0, 3)]
        lost = self.params(model, append=new, base=len(model.held))
        assert "result" in self.clients[model.owner].call("prepare_prompt", lost)
        model.form = bool(lost.get("delta_replace"))
        model.held = model.held + new
        self.seen["lost"] += 1
        self.round(model, messages=model.held)

    def op_recall(self, model: Model) -> None:
        """A recall answers what an in-process session fed the same rounds answers."""
        with scoutd.Session(
            format=model.call_format or model.declared,
            strategies=model.strategies,
            config=Config(prompt=PromptConfig(**{**PROMPT, **model.overrides})),
            cache_control=model.cache,
        ) as s:
            if model.held:
                s.prepare(model.held)
            choice = self.rng.random()
            query: dict[str, Any]
            if choice < 0.5:
                query = {"handle": self.rng.choice([1, 2, 3, "#2", "4", 40, "#x", ""])}
            else:
                query = {"search": self.rng.choice(["line 1", "ls c0", "é", "nothing here"])}
            expected = s.recall(**query)
        answer = self.clients[model.owner].call("session.recall", {"session": model.id, **query})
        if not model.held:  # documented: the daemon says that it holds nothing yet
            assert answer["result"]["found"] is False, answer
            assert answer["result"]["text"].startswith("no conversation is stored"), answer
            return
        assert answer["result"]["text"] == expected, (query, model.fmt)
        self.seen["recall found" if answer["result"]["found"] else "recall not found"] += 1

    def op_takeover(self, model: Model) -> None:
        """The other connection's ``append`` is refused; its whole conversation is
        answered whole (``keep`` 0) and makes it the writer."""
        other = 1 - model.owner
        if model.decoder is not None or model.held:
            params = self.params(model, append=[], base=len(model.held))
            error = self.clients[other].call("prepare_prompt", params)["error"]
            assert error["data"]["path"] == "$.params.base", error
            self.seen["takeover refused"] += 1
        model.owner, model.decoder = other, None
        self.round(model, messages=model.held)
        self.seen["takeover"] += 1

    def op_pipelined(self, model: Model) -> None:
        """Rounds of two sessions of one connection sent before either answer is read."""
        if model.mixed:
            return self.op_whole(model)
        mates = [
            m for m in self.sessions if m.owner == model.owner and m is not model and not m.mixed
        ]
        if not mates:
            return self.op_append(model)
        mate = self.rng.choice(mates)
        client = self.clients[model.owner]
        sent = []
        for each in (model, mate):
            new = each.source[len(each.held) : len(each.held) + self.rng.randint(1, 3)]
            params = self.params(each, append=new, base=len(each.held))
            each.held = each.held + new
            sent.append((each, params, client.request("prepare_prompt", params)))
        for each, params, rid in reversed(sent):
            answer = client.response(rid)
            assert "result" in answer, answer
            self.absorb(each, params, answer["result"])
        self.seen["pipelined"] += 1

    def op_reopen(self, model: Model) -> None:
        """Close, check the id is gone everywhere, reopen with the same conversation."""
        client = self.clients[model.owner]
        assert client.call("session.close", {"session": model.id})["result"] == {}
        self.sessions.remove(model)
        self.closed.append(model.id)
        for method, params in [
            ("prepare_prompt", self.params(model, append=[], base=len(model.held))),
            ("session.recall", {"session": model.id, "handle": 1}),
            ("session.close", {"session": model.id}),
        ]:
            error = self.clients[self.rng.randrange(2)].call(method, params)["error"]
            assert error["code"] == -32006, (method, error)
        again = self.open(model.owner, model.fmt, model.held if self.rng.random() < 0.7 else None)
        again.source, again.strategies = model.source, model.strategies
        again.overrides, again.call_format, again.cache = (
            model.overrides,
            model.call_format,
            model.cache,
        )
        again.mixed = model.mixed
        if not again.held:
            again.held = model.held
            self.round(again, messages=again.held)
        else:
            self.append(again, self.rng.randint(0, 2))
        self.seen["reopen"] += 1

    def op_garbage(self, model: Model) -> None:
        bad = self.rng.choice(["0" * 32, "", "x" * 300, *self.closed[-1:]])
        params = {"session": bad, "handle": 1}
        assert self.clients[0].call("session.recall", params)["error"]["code"] == -32006
        self.seen["garbage"] += 1

    def op_disconnect(self, model: Model) -> None:
        """A third connection opens a session, sends a round and goes away unread."""
        with self.daemon.connect() as gone:
            save = os.path.join(self.daemon.dir, f"gone{self.opened}.json")
            self.opened += 1
            sid = gone.call("session.open", {"save_file": save})["result"]["session"]
            gone.request("prepare_prompt", {"session": sid, "messages": model.source})
        self.seen["disconnect"] += 1

    def check_counts(self) -> None:
        expected = sum(_held(m.held) for m in self.sessions)
        wait_for(lambda: self.bytes_held() == expected, 10.0, "the session bytes to settle")


OPERATIONS = {
    "append": 8,
    "empty": 1,
    "whole": 2,
    "edit": 2,
    "wrong_base": 1,
    "refused": 1,
    "lost": 2,
    "recall": 2,
    "takeover": 1,
    "pipelined": 2,
    "reopen": 1,
    "garbage": 1,
    "disconnect": 1,
}


def play(kind: type[Attack], daemon: Daemon, seed: int, operations: dict[str, int]) -> Counter[str]:
    """Draw ``STEPS`` operations (by weight) over sessions of every format; checks the
    bytes the sessions hold now and then; returns how often each case was reached."""
    rng = random.Random(seed)
    names, weights = list(operations), list(operations.values())
    with daemon.connect() as first, daemon.connect() as second:
        attack = kind(daemon, rng, [first, second])
        for fmt in FORMATS:
            attack.open(rng.randrange(2), fmt)
        for step in range(STEPS):
            model = rng.choice(attack.sessions)
            getattr(attack, f"op_{rng.choices(names, weights)[0]}")(model)
            if step % 15 == 14:
                attack.check_counts()
        attack.check_counts()
    return attack.seen


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with Daemon(prompt=PROMPT, daemon={"max_session_messages": LIMIT}) as running:
        yield running


@pytest.mark.parametrize("seed", range(8))
def test_drawn_session_operations_match_the_oracle(daemon: Daemon, seed: int) -> None:
    seen = play(Attack, daemon, seed, OPERATIONS)
    assert sum(v for k, v in seen.items() if k.startswith("round ")) >= 150, seen
    assert all(seen[f"round {fmt}"] >= 20 for fmt in FORMATS), seen
    assert seen["lost"] + seen["wrong base"] + seen["refused"] >= 20, seen
    assert seen["mismatch recovered"] >= 3 and seen["takeover"] >= 3, seen
    assert seen["reopen"] >= 3 and seen["pipelined"] >= 5, seen
