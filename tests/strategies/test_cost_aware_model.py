"""``shorten_tools_cost_aware`` against a plain reference of its cost model.

The reference below is written from docs/ECONOMY.md and is slow and obvious on
purpose: every round's prompt is summed message by message under the bands of
the moment, every candidate compaction is tried by summing the prefix again,
pairing and rewriting come from ``oracle``. The properties check the strategy
against it on generated conversations and configurations, and record with
``event()`` which kinds of decision an example reached;
``test_the_generator_reaches_every_kind_of_decision`` fails when one is rare.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from scoutd.config import DEFAULT_NOTICE, PromptConfig
from scoutd.formats import SCOUT
from scoutd.strategies.cost_aware import shorten_tools_cost_aware
from scoutd.strategies.cost_rounds import CostPlanner
from scoutd.strategies.tool_messages import index_tools

from . import oracle
from .conversations import agent_conversations, call, output

# Model constants of docs/ECONOMY.md ("Tokens"): a message costs 4 tokens
# beyond its content; a shortened tool message is estimated as 520 characters
# (an output's 400 kept characters, or two arguments of 200, plus about 120 of
# marker, JSON keys and id).
OVERHEAD = 4
SHORTENED_CHARS = 520
NOTICE = (
    "[Context compaction]\n"
    "This conversation was compacted to fit the model's context window: {compacted} older"
    ' tool messages are shown shortened (marked "Truncated (<original length>): ...") and'
    " {removed} were removed.\n"
    "A tool call that is no longer visible may still have run: do not repeat a call only"
    " because its earlier result is missing."
)


def text_of(message: Any) -> str:
    """What the token count reads: a string content, else its compact JSON, else nothing."""
    content = message.get("content") if isinstance(message, dict) else message
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    return json.dumps(content, separators=(",", ":"), ensure_ascii=False)


def estimate(chars_per_token: float) -> Callable[[str], int]:
    return lambda text: math.ceil(len(text) / chars_per_token)


@dataclass
class Decision:
    """What the replay did at one round where a compaction was possible."""

    round: int
    taken: str  # "forced", "paid" or "declined"
    bands: tuple[int, int]
    rewrite: float  # its extra cost


@dataclass
class Outcome:
    """The final bands (oldest-first pair numbers) and every decision on the way."""

    dropped: int = 0
    shortened: int = 0
    decisions: list[Decision] = field(default_factory=list)
    remarks: dict[int, int] = field(default_factory=dict)  # message index -> pair number
    carried: float = 0.0  # read cost paid since the last decision, at the end
    billed: float = 0.0  # the estimated bill of the whole replay, at the end


class Model:
    """The cost model over one conversation."""

    def __init__(
        self,
        messages: list[Any],
        config: PromptConfig,
        count: Callable[[str], int],
        write: float,
        read: float,
    ) -> None:
        self.messages, self.config = messages, config
        self.write, self.read = write, read
        # the notice as the limit counts it: its text, room for its two counts (20
        # digits each), a message's overhead (recall, which adds a sentence, is off)
        template = config.compaction_notice
        text = NOTICE if template == DEFAULT_NOTICE else template
        self.notice = count(text + "x" * 40) + OVERHEAD
        self.pairing = oracle.pair(messages)
        self.tokens = [count(text_of(m)) + OVERHEAD for m in messages]
        self.short = count("x" * SHORTENED_CHARS) + OVERHEAD
        tools = self.pairing.tools
        # A shortened tool message as the limit counts it (docs/STRATEGIES.md): at most
        # the bound, but a call whose rewrite sends more than the bound (three long
        # arguments, none over the argument limit, say) at what the rewrite sends.
        self.shortened: dict[int, int] = {}
        for tool in tools:
            whole = self.tokens[tool.at]
            if whole <= self.short or not tool.is_call:
                self.shortened[tool.at] = min(whole, self.short)
            else:
                sent = oracle.rewritten(tool) or text_of(messages[tool.at])
                self.shortened[tool.at] = max(self.short, count(sent) + OVERHEAD)
        # the pair each message belongs to (tool messages, then assistant remarks)
        self.owner: dict[int, int] = {
            t.at: t.number for t in tools if t.number <= self.pairing.outputs
        }
        self.is_tool = {t.at for t in tools}
        self.remarks: dict[int, int] = {}
        if tools:
            for at in range(tools[0].at + 1, tools[-1].at):
                message = messages[at]
                if isinstance(message, dict) and message.get("role") == "assistant":
                    following = next(t for t in tools if t.at > at).number
                    if following <= self.pairing.outputs:
                        self.remarks[at] = following
        self.ends = {t.number: t.at + 1 for t in tools if not t.is_call}
        self.head = sum(self.tokens[: tools[0].at]) if tools else sum(self.tokens)

    def prompt(self, round_: int | None, dropped: int, shortened: int) -> int:
        """Tokens of the prompt at ``round_`` (through that output; None: every message,
        as sent) under the bands."""
        total = 0
        for at in range(len(self.messages) if round_ is None else self.ends[round_]):
            pair = self.remarks.get(at, self.owner.get(at))
            if pair is not None and pair <= dropped:
                continue
            if at in self.is_tool and pair is not None and pair <= shortened:
                total += self.shortened[at]
            else:
                total += self.tokens[at]
        return total

    def fit(self, round_: int, full: int, limit: float, sent: bool = False) -> tuple[int, int]:
        """Shorten all but ``full`` outputs, then more, then drop, until it fits (``sent``:
        the whole prompt with the notice, else the round's prompt)."""
        band = self.config.cost_compacted_tool_calls
        shortened = max(0, round_ - full)
        dropped = max(0, shortened - band)

        def size(dropped: int, shortened: int) -> int:
            if sent:
                return self.prompt(None, dropped, shortened) + self.notice
            return self.prompt(round_, dropped, shortened)

        while size(dropped, shortened) > limit and shortened < round_:
            shortened += 1
            dropped = max(0, shortened - band)
        while size(dropped, shortened) > limit and dropped < round_:
            dropped += 1
        return dropped, shortened

    def replay(self) -> Outcome:
        """The decision of every round, from the first on (docs/ECONOMY.md, "The model")."""
        c = self.config
        trigger = c.compaction_trigger_share * c.context_window
        limit = c.compaction_limit_share * c.context_window
        premium = max(self.write - self.read, 0.0)
        out = Outcome(remarks=self.remarks)
        carried = billed = 0.0
        previous = 0
        for n in range(1, self.pairing.outputs + 1):
            prompt = self.prompt(n, out.dropped, out.shortened)
            billed += min(previous, prompt) * self.read + max(prompt - previous, 0) * self.write
            previous = prompt
            forced = prompt + (self.notice if out.shortened else 0) > limit
            full = max(
                c.cost_full_tool_outputs, min(int(n * c.cost_full_share), c.cost_full_share_cap)
            )
            if n - full <= out.shortened and not forced:
                continue  # nothing beyond the current bands to compact
            bands = self.fit(n, full, limit - self.notice)  # a compacted prompt holds it
            if bands <= (out.dropped, out.shortened):
                continue
            after = self.prompt(n, *bands)
            removed = prompt - after
            carried += removed * self.read
            rewrite = max(after - self.head, 0) * premium
            repays = removed * self.read * (n * c.expected_horizon) >= rewrite
            pays = (
                prompt >= trigger
                # verbatim rounds valued at cost_verbatim_value of their read cost
                and carried >= 1.0 / (1.0 - c.cost_verbatim_value) * rewrite
                and repays
                and rewrite <= c.compaction_risk_share * billed
            )
            taken = "forced" if forced else "paid" if pays else "declined"
            out.decisions.append(Decision(n, taken, bands, rewrite))
            if taken != "declined":
                out.dropped, out.shortened = bands
                carried = 0.0
                billed += rewrite - removed * self.read
                previous = after
        out.carried, out.billed = carried, billed
        # The prompt sent holds what follows the last output, and the notice once
        # compacted: past the limit, the least further compaction that fits, outside
        # the replay (the next round weighs this one without them).
        n = self.pairing.outputs
        notice = self.notice if out.shortened else 0
        if n and self.prompt(None, out.dropped, out.shortened) + notice > limit:
            full = max(
                c.cost_full_tool_outputs, min(int(n * c.cost_full_share), c.cost_full_share_cap)
            )
            dropped, shortened = self.fit(n, full, limit, sent=True)
            bands = (max(dropped, out.dropped), max(shortened, out.shortened))
            out.decisions.append(Decision(n, "fitted", bands, 0.0))
            out.dropped, out.shortened = bands
        return out

    def prepared(self, outcome: Outcome) -> tuple[list[Any], list[str], int]:
        """The prompt of the final bands, the fate of each tool message, the remarks dropped."""
        fates = []
        for tool in self.pairing.tools:
            if tool.number <= outcome.dropped:
                fates.append("dropped")
            elif tool.number <= outcome.shortened and oracle.rewritten(tool) is not None:
                fates.append("truncated")
            else:
                fates.append("kept")
        out: list[Any] = []
        dropped_remarks = 0
        for at, message in enumerate(self.messages):
            if self.remarks.get(at, math.inf) <= outcome.dropped:
                dropped_remarks += 1
                continue
            tool = next((t for t in self.pairing.tools if t.at == at), None)
            if tool is None:
                out.append(message)
                continue
            fate = fates[self.pairing.tools.index(tool)]
            if fate == "dropped":
                continue
            if fate == "truncated":
                out.append({**message, "content": oracle.rewritten(tool)})
            else:
                out.append(message)
        compacted, removed = fates.count("truncated"), fates.count("dropped")
        if compacted or removed:
            template = self.config.compaction_notice
            if template == DEFAULT_NOTICE:
                template = NOTICE
            text = template.replace("{compacted}", str(compacted))
            text = text.replace("{removed}", str(removed))
            roles = [m.get("role") if isinstance(m, dict) else None for m in out]
            at = next(
                (i for i, r in enumerate(roles) if r in (oracle.CALL, oracle.OUTPUT)), len(out)
            )
            out.insert(at, {"role": "user", "content": text})
        return out, fates, dropped_remarks


# --- the strategy against the reference ----------------------------------------------

PROPERTY = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
KINDS = ("forced", "paid", "declined", "fitted")
_remarks = st.one_of(
    st.text(max_size=8),
    st.integers(min_value=1, max_value=6).map(lambda n: "r" * (n * 90)),
    st.sampled_from([None, ["said"], {"type": "text", "text": "noted"}, ["\ud800 lone"]]),
)
# Messages that are not mappings: counted by their JSON text, never tool traffic.
_strays = st.sampled_from(["stray text", 7, None, ["a", {"b": "\udfff"}]])


def tokens_by_words(text: str) -> int:
    """A tokenizer for the tests, unlike the estimate: words plus a third of the characters."""
    return len(text.split()) + len(text) // 3


@st.composite
def agent_runs(draw: st.DrawFn) -> list[Any]:
    """Agent-like conversations (``agent_conversations``) with assistant remarks among them.

    Some remarks have non-string contents (one with a lone surrogate), and
    some conversations hold a message that is not a mapping.
    """
    messages: list[Any] = draw(agent_conversations(max_steps=45))
    for _ in range(draw(st.integers(min_value=0, max_value=8))):
        at = draw(st.integers(min_value=0, max_value=len(messages)))
        messages.insert(at, {"role": "assistant", "content": draw(_remarks)})
    if draw(st.integers(min_value=0, max_value=3)) == 0:
        messages.insert(draw(st.integers(0, len(messages))), draw(_strays))
    return messages


@st.composite
def setups(draw: st.DrawFn) -> tuple[PromptConfig, str | None]:
    """A configuration with explicit values for every cost-aware key, and a format.

    Half of them are generous (a large window, a long horizon, a high risk
    share), so that compactions that pay for their rewrite happen often.
    """
    tokenizer = draw(st.sampled_from([None, f"{__name__}:tokens_by_words"]))
    generous = draw(st.booleans())
    config = PromptConfig(
        context_window=draw(st.integers(min_value=300, max_value=20_000)),
        compaction_trigger_share=draw(st.sampled_from([0.0, 0.05, 0.2, 0.5])),
        compaction_limit_share=draw(st.sampled_from([0.3, 0.75, 1.0])),
        expected_horizon=draw(st.sampled_from([0.0, 0.5, 1.0, 3.0])),
        compaction_risk_share=draw(st.sampled_from([0.0, 0.06, 0.3, 2.0])),
        cost_full_tool_outputs=draw(st.integers(min_value=0, max_value=6)),
        cost_full_share=draw(st.sampled_from([0.0, 0.1, 0.5])),
        cost_full_share_cap=draw(st.integers(min_value=0, max_value=8)),
        cost_compacted_tool_calls=draw(st.integers(min_value=0, max_value=12)),
        cache_pricing=draw(st.sampled_from(list(PRICES))),
        cache_write_price=draw(st.none() | st.sampled_from([0.12, 0.2, 0.5, 1.0, 2.0])),
        cache_read_price=draw(st.none() | st.sampled_from([0.05, 0.1, 0.6])),
        chars_per_token=draw(st.sampled_from([1.0, 1.5, 4.0])),
        tokenizer=tokenizer,
        compaction_notice=draw(st.sampled_from([DEFAULT_NOTICE, "cut {compacted}, {removed}"])),
        # the bands alone: what a compaction keeps whole besides has its own
        # reference (tests/strategies/test_core_reference.py, test_retention.py)
        cost_keep_share=0.0,
    )
    if generous:
        config = msgspec.structs.replace(
            config,
            context_window=draw(st.integers(min_value=20_000, max_value=60_000)),
            compaction_trigger_share=0.0,
            compaction_limit_share=1.0,
            expected_horizon=draw(st.sampled_from([1.0, 3.0])),
            compaction_risk_share=draw(st.sampled_from([0.3, 2.0])),
        )
    return config, draw(st.sampled_from([None, "anthropic", "openai-chat", "openai-responses"]))


# (write, read) of each preset (docs/ECONOMY.md, "Prices"); auto: by the format.
PRICES = {
    "auto": None,
    "anthropic": (1.25, 0.1),
    "anthropic-1h": (2.0, 0.1),
    "openai": (1.0, 0.1),
    "openai-4o": (1.0, 0.5),
}


def prices(config: PromptConfig, format_name: str | None) -> tuple[float, float]:
    """The write and read prices the strategy assumes, from the docs' tables."""
    preset = config.cache_pricing
    if preset == "auto":
        preset = "openai" if format_name in ("openai-chat", "openai-responses") else "anthropic"
    write, read = PRICES[preset] or (0.0, 0.0)
    if config.cache_write_price is not None:
        write = config.cache_write_price
    if config.cache_read_price is not None:
        read = config.cache_read_price
    return write, read


def model_of(messages: list[Any], config: PromptConfig, format_name: str | None) -> Model:
    count = tokens_by_words if config.tokenizer else estimate(config.chars_per_token)
    return Model(messages, config, count, *prices(config, format_name))


def tag(outcome: Outcome, fates: list[str] | None = None, pairing: Any = None) -> None:
    for decision in outcome.decisions:
        event(decision.taken)
        if decision.taken == "paid" and decision.rewrite > 0:
            event("paid a rewrite")
    if outcome.remarks and outcome.dropped >= min(outcome.remarks.values()):
        event("remarks dropped")
    for tool, fate in zip(pairing.tools if pairing else [], fates or [], strict=True):
        if fate == "truncated":
            event("call truncated" if tool.is_call else "output truncated")


@PROPERTY
@given(messages=agent_runs(), setup=setups(), detail=st.booleans())
def test_the_prompt_and_report_are_those_of_the_model(
    messages: list[Any], setup: tuple[PromptConfig, str | None], detail: bool
) -> None:
    config, format_name = setup
    model = model_of(messages, config, format_name)
    outcome = model.replay()
    expected, fates, narration = model.prepared(outcome)
    tag(outcome, fates, model.pairing)
    got, report = shorten_tools_cost_aware(messages, config, detail=detail, format_name=format_name)
    assert got == expected
    counts = oracle.report_counts(model.pairing, fates)
    assert {key: getattr(report, key) for key in counts} == counts
    assert report.narration_dropped == narration
    assert report.notice == any(fate != "kept" for fate in fates)
    assert (report.chars_before, report.chars_after) == (oracle.chars(messages), oracle.chars(got))
    assert report.strategy == "shorten_tools_cost_aware"
    if detail:
        assert [action.action for action in report.actions or []] == fates
    else:
        assert report.actions is None


def last_decision(outcome: Outcome) -> int:
    taken = [d.round for d in outcome.decisions if d.taken != "declined"]
    return taken[-1] if taken else 0


@st.composite
def growing_runs(draw: st.DrawFn) -> tuple[list[Any], list[int]]:
    """Calls answered in order, remarks among them, and increasing cut points."""
    messages: list[Any] = [{"role": "system", "content": "s" * draw(st.integers(0, 400))}]
    for number in range(draw(st.integers(min_value=1, max_value=60))):
        if draw(st.integers(min_value=0, max_value=3)) == 0:
            messages.append({"role": "assistant", "content": draw(_remarks)})
        arguments = {"q": "a" * draw(st.integers(0, 500))}
        messages.append(call("t", arguments, f"c{number}"))
        if draw(st.integers(min_value=0, max_value=5)) == 0:  # a remark inside the pair
            messages.append({"role": "assistant", "content": draw(_remarks)})
        messages.append(output("t", "o" * draw(st.integers(0, 900)), f"c{number}"))
    cuts = draw(st.lists(st.integers(1, len(messages)), max_size=6).map(sorted))
    return messages, [*cuts, len(messages)]


@PROPERTY
@given(run=growing_runs(), setup=setups())
def test_a_replay_carried_on_plans_as_one_from_scratch(
    run: tuple[list[Any], list[int]], setup: tuple[PromptConfig, str | None]
) -> None:
    """A session's planner replays only new rounds and must end where a fresh replay ends."""
    messages, cuts = run
    config = setup[0]
    planner = CostPlanner(config)
    for end in cuts:
        prefix = messages[:end]
        got = planner.plan(prefix, index_tools(prefix), config)
        fresh = CostPlanner(config).plan(prefix, index_tools(prefix), config)
        outcome = model_of(prefix, config, SCOUT).replay()
        tag(outcome)
        assert got == fresh
        assert (got.dropped, got.shortened) == (outcome.dropped, outcome.shortened)
        assert got.decided_at == last_decision(outcome)
        # what the next round's decision starts from: the same bill and carried cost
        assert math.isclose(planner.replay.billed, outcome.billed, rel_tol=1e-9, abs_tol=1e-6)
        assert math.isclose(planner.replay.carried, outcome.carried, rel_tol=1e-9, abs_tol=1e-6)
    # the prompt of the last cut (the whole run), long call arguments shortened too
    model = model_of(messages, config, SCOUT)
    expected, fates, _ = model.prepared(outcome)
    assert shorten_tools_cost_aware(messages, config, format_name=SCOUT)[0] == expected
    tag(outcome, fates, model.pairing)


def reached(messages: list[Any], config: PromptConfig, format_name: str | None) -> set[str]:
    """The kinds of decision the reference took on ``messages``."""
    model = model_of(messages, config, format_name)
    outcome = model.replay()
    _, fates, _ = model.prepared(outcome)
    kinds = {d.taken for d in outcome.decisions}
    for tool, fate in zip(model.pairing.tools, fates, strict=True):
        if fate == "truncated":
            kinds.add("call truncated" if tool.is_call else "output truncated")
    kinds |= {"paid a rewrite" for d in outcome.decisions if d.taken == "paid" and d.rewrite}
    if outcome.remarks and outcome.dropped >= min(outcome.remarks.values()):
        kinds.add("remarks dropped")
    return kinds


@pytest.mark.parametrize(
    "generator, cases",
    [
        # messy conversations: the decisions that shorten nearly everything, or nothing
        (agent_runs(), ("forced", "declined", "remarks dropped")),
        # long runs: every kind of decision and of shortening
        (
            growing_runs().map(lambda run: run[0]),
            (*KINDS, "paid a rewrite", "remarks dropped", "call truncated", "output truncated"),
        ),
    ],
)
def test_the_generators_reach_every_kind_of_decision(
    generator: st.SearchStrategy[list[Any]], cases: tuple[str, ...]
) -> None:
    seen: Counter[str] = Counter()

    # 200 examples: what Hypothesis generates also depends on which modules the
    # run imported before (it draws constants from them), so leave a margin
    @settings(max_examples=200, deadline=None, derandomize=True, database=None)
    @given(messages=generator, setup=setups())
    def collect(messages: list[Any], setup: tuple[PromptConfig, str | None]) -> None:
        seen.update(reached(messages, *setup))

    collect()
    rare = {case: seen[case] for case in cases if seen[case] < 5}
    assert not rare, f"cases reached in fewer than 5 of 200 examples: {rare}"
