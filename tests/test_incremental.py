"""Incremental sessions give exactly what a full computation gives."""

from __future__ import annotations

import json
import operator
import zlib
from collections import Counter
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from scoutd import prepare
from scoutd.config import Config, PromptConfig
from scoutd.delta import DeltaDecoder, DeltaEncoder, DeltaMismatch, PromptDelta
from scoutd.engine import incremental
from scoutd.engine.incremental import SessionPrompt, json_size
from scoutd.simulate.workload import round_ends, synthetic_run
from scoutd.strategies.epoch_rounds import NO_NOTICE, epoch_state
from scoutd.strategies.inbox import write_notice
from scoutd.strategies.report import Changes
from scoutd.strategies.tool_messages import index_tools

from .formats.conversations import anthropic, chat
from .formats.test_adapters import TIGHT
from .strategies.conversations import agent_conversations, agent_run, call, conversations, output
from .strategies.test_oracles import features
from .strategies.test_properties import SMALL

# The append-only fast path is the epoch strategies' (docs/STRATEGIES.md); "default"
# is their default configuration, named explicitly since the default list changed.
EPOCH_DEFAULT = PromptConfig(prompt_strategies=("shorten_tools_epoch_increment", "inbox"))
CONFIGS = {"small": Config(prompt=SMALL), "default": Config(prompt=EPOCH_DEFAULT)}
STRATEGIES = [
    None,
    "shorten_tools_epoch",
    "shorten_tools_epoch_increment,none",
    "shorten_tools_epoch,shorten_tools",
    "shorten_tools",
]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=conversations(max_pairs=60),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12),
    strategies=st.sampled_from(STRATEGIES),
    config=st.sampled_from(sorted(CONFIGS)),
)
def test_every_round_equals_the_full_computation(
    messages: list[Any], cuts: list[int], strategies: str | None, config: str
) -> None:
    snapshot = CONFIGS[config]
    session = SessionPrompt()
    encoder, decoder = DeltaEncoder(), DeltaDecoder()
    ends = sorted({min(cut, len(messages)) for cut in cuts} | {len(messages)})
    start = 0
    for end in ends:
        session.extend(messages[start:end])
        start = end
        got, stable = session.prepare(strategies, snapshot)
        expected = prepare(messages[:end], strategies, config=snapshot)
        assert got.messages == expected.messages
        assert got.report == expected.report
        delta = encoder.delta(got.messages, stable)
        assert delta.keep >= stable
        assert decoder.apply(delta) == expected.messages


def _grow(session: SessionPrompt, run: list[Any], step: int) -> list[int]:
    """Feed ``run`` pair by pair; return the stable prefix length of each round."""
    stables = []
    for end in range(step, len(run) + 1, step):
        session.extend(run[end - step : end])
        prepared, stable = session.prepare(None, CONFIGS["default"])
        assert prepared.messages == prepare(run[:end], config=CONFIGS["default"]).messages
        stables.append(stable)
    return stables


def test_rounds_inside_an_epoch_reuse_the_previous_prompt() -> None:
    run = agent_run(200)
    stables = _grow(SessionPrompt(), run[2:], 2)
    reused = sum(1 for stable in stables if stable > 0)
    # Every round but the first of each epoch (and those up to the threshold) reuses it.
    assert reused >= 190 - 12


def test_a_repeat_moves_protection_and_recomputes() -> None:
    run = agent_run(80)
    session = SessionPrompt()
    session.extend(run)
    session.prepare(None, CONFIGS["default"])
    third = json.loads(run[2 + 2 * 3]["content"])  # pair 3's call, repeated exactly
    repeat = [
        call(third["name"], third["arguments"], "r1"),
        output(third["name"], "3:again", "r1"),
    ]
    session.extend(repeat)
    prepared, stable = session.prepare(None, CONFIGS["default"])
    assert stable == 0
    assert prepared.messages == prepare(run + repeat, config=CONFIGS["default"]).messages


def test_a_late_output_for_an_old_pending_call_recomputes() -> None:
    pending = [call("grep", {"q": "late"}, "late")]
    run = agent_run(60)
    session = SessionPrompt()
    session.extend(run[:2] + pending + run[2:])
    session.prepare(None, CONFIGS["default"])
    late = [output("grep", "z" * 900, "late")]
    session.extend(late)
    prepared, stable = session.prepare(None, CONFIGS["default"])
    assert stable == 0
    whole = run[:2] + pending + run[2:] + late
    assert prepared.messages == prepare(whole, config=CONFIGS["default"]).messages


def test_reset_replaces_the_conversation() -> None:
    session = SessionPrompt()
    session.extend(agent_run(70))
    session.prepare(None, CONFIGS["default"])
    other = agent_run(55)
    session.reset(other)
    assert (
        session.prepare(None, CONFIGS["default"])[0].messages
        == prepare(other, config=CONFIGS["default"]).messages
    )


def test_decoder_rejects_a_delta_for_another_prefix() -> None:
    encoder, decoder = DeltaEncoder(), DeltaDecoder()
    first = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    decoder.apply(encoder.delta(first))
    other = DeltaDecoder()
    other.full([{"role": "user", "content": "a"}, {"role": "user", "content": "B"}])
    delta = encoder.delta([*first, {"role": "user", "content": "c"}])
    assert delta.keep == 2 and len(delta.append) == 1
    assert decoder.apply(delta)[-1]["content"] == "c"
    with pytest.raises(DeltaMismatch):
        other.apply(delta)
    with pytest.raises(DeltaMismatch):
        DeltaDecoder().apply({"keep": 5, "append": [], "checksum": 0})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=agent_conversations(max_steps=70),
    cuts=st.lists(st.integers(min_value=0, max_value=120), max_size=15),
    strategies=st.sampled_from(STRATEGIES[:3]),
)
def test_agent_like_rounds_equal_the_full_computation(
    messages: list[Any], cuts: list[int], strategies: str | None
) -> None:
    """Out-of-order and missing outputs, duplicate ids: still the full computation's prompt."""
    for case in sorted(features(messages)):
        event(case)
    session = SessionPrompt()
    ends = sorted({min(cut, len(messages)) for cut in cuts} | {len(messages)})
    start = 0
    for end in ends:
        session.extend(messages[start:end])
        start = end
        got, _ = session.prepare(strategies, CONFIGS["small"])
        expected = prepare(messages[:end], strategies, config=CONFIGS["small"])
        assert (got.messages, got.report) == (expected.messages, expected.report)


def test_a_late_repeat_first_in_call_order_keeps_rounds_exact() -> None:
    """Two calls with one key answered newest first: the older call becomes the first
    occurrence only when its output arrives, and the other one becomes the repeat."""
    same = {"p": 1}
    head: list[Any] = [{"role": "user", "content": "go"}]
    for n in range(6):
        head += [call("grep", {"n": n}, f"h{n}"), output("grep", "o" * 500, f"h{n}")]
    rounds: list[list[Any]] = [
        [call("read", same, "old"), call("read", same, "new")],
        [output("read", "second", "new")],
    ]
    for n in range(5):  # the two outputs land in different epochs
        rounds.append([call("grep", {"m": n}, f"m{n}"), output("grep", "o" * 500, f"m{n}")])
    rounds.append([output("read", "first", "old")])
    for n in range(8):
        rounds.append([call("grep", {"t": n}, f"t{n}"), output("grep", "o" * 500, f"t{n}")])
    session = SessionPrompt()
    session.extend(head)
    conversation = list(head)
    for added in rounds:
        session.extend(added)
        conversation += added
        for name in ("shorten_tools_epoch_increment", "shorten_tools_epoch"):
            got, _ = session.prepare(name, CONFIGS["small"])
            expected = prepare(conversation, name, config=CONFIGS["small"])
            assert (got.messages, got.report) == (expected.messages, expected.report)
    prepared = prepare(conversation, "shorten_tools_epoch_increment", config=CONFIGS["small"])
    assert prepared.report[0].calls_protected + prepared.report[0].outputs_protected > 0


def _plain_checksum(messages: list[Any]) -> int:
    """CRC-32 of the compact JSON of each message, one after the other (docs/PROTOCOL.md)."""
    text = b"".join(
        json.dumps(m, separators=(",", ":"), ensure_ascii=False).encode() for m in messages
    )
    return zlib.crc32(text)


def _common_prefix(a: list[Any], b: list[Any]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


_POOL = [{"role": "user", "content": text} for text in ("a", "b", "c", "d")]
_prompts = st.lists(st.one_of(st.sampled_from(_POOL), st.sampled_from(_POOL).map(dict)), max_size=6)


@settings(max_examples=150, deadline=None)
@given(rounds=st.lists(st.tuples(_prompts, st.integers(0, 7)), min_size=1, max_size=6))
def test_deltas_rebuild_every_prompt_with_the_longest_common_prefix(
    rounds: list[tuple[list[Any], int]],
) -> None:
    """Shared and equal-but-distinct message objects, right and wrong ``stable`` hints."""
    encoder, decoder = DeltaEncoder(), DeltaDecoder()
    previous: list[Any] = []  # the objects the encoder holds: a kept prefix stays the old ones
    for prompt, stable in rounds:
        hint = min(stable, len(previous), len(prompt))
        # a hint whose last message is the same object vouches for the whole
        # prefix: it must be true (the caller's promise); any other is checked
        assume(
            not hint
            or previous[hint - 1] is not prompt[hint - 1]
            or all(p is q for p, q in zip(previous[:hint], prompt[:hint], strict=True))
        )
        delta = encoder.delta(prompt, stable)
        assert delta.keep == _common_prefix(previous, prompt)
        assert delta.checksum == _plain_checksum(prompt[: delta.keep])
        assert delta.append == prompt[delta.keep :]
        assert decoder.apply(msgspec.to_builtins(delta)) == prompt
        previous = previous[: delta.keep] + prompt[delta.keep :]


def test_a_delta_over_another_history_with_the_same_last_message_is_refused() -> None:
    shared = {"role": "user", "content": "same"}
    encoder = DeltaEncoder()
    encoder.delta([{"role": "user", "content": "one"}, shared])
    other = DeltaDecoder()
    other.full([{"role": "user", "content": "two"}, shared])
    with pytest.raises(DeltaMismatch):
        other.apply(encoder.delta([{"role": "user", "content": "one"}, shared, shared]))


def test_reset_counts_the_new_conversation_from_zero() -> None:
    session = SessionPrompt()
    session.extend(agent_run(3))
    other = [{"role": "user", "content": "hé"}, {"role": "user", "content": None}]
    session.reset(other)
    assert session.chars == 2
    assert session.messages == other


@pytest.mark.parametrize("bad", [5, "text", b"bytes", None])
def test_extend_wants_a_list_of_messages(bad: Any) -> None:
    with pytest.raises(TypeError, match=r"^messages must be a list of messages$"):
        SessionPrompt().extend(bad)


def test_chars_add_up_over_rounds() -> None:
    session = SessionPrompt()
    session.extend([{"role": "user", "content": "abc"}])
    session.extend([{"role": "user", "content": "de"}, {"role": "user", "content": 7}])
    assert session.chars == 5


def test_rounds_follow_the_configured_strategies_and_pass_the_save_file(tmp_path: Any) -> None:
    save_file = str(tmp_path / "agent.chat")
    run = agent_run(40)
    fixed = Config(prompt=msgspec.structs.replace(SMALL, prompt_strategies="shorten_tools_epoch"))
    session = SessionPrompt()
    session.extend(run)
    # a round without an epoch strategy first, then the configured ones
    write_notice(save_file, "hello")
    got, _ = session.prepare("inbox", fixed, save_file=save_file)
    assert got.messages[-1]["content"].endswith("hello")
    got, _ = session.prepare(None, fixed)
    assert got.messages == prepare(run, config=fixed).messages
    assert got.report[0].strategy == "shorten_tools_epoch"
    write_notice(save_file, "after the epoch strategy")  # the save file reaches the inbox
    got, _ = session.prepare("shorten_tools_epoch,inbox", fixed, save_file=save_file)
    assert got.messages[-1]["content"].endswith("after the epoch strategy")


def test_a_refused_delta_names_what_the_receiver_holds() -> None:
    with pytest.raises(DeltaMismatch, match=r"^prompt delta does not apply: keep=5 of 0 messages$"):
        DeltaDecoder().apply({"keep": 5, "append": [], "checksum": 0})


def test_a_lone_surrogate_is_stored_and_counted() -> None:
    # JSON text cannot hold a lone surrogate, but a caller's str can: the session
    # keeps it and counts it as the escape sent in its place.
    session = SessionPrompt()
    session.extend([{"role": "user", "content": "\ud800 lone"}])
    assert session.size == len(b'{"role":"user","content":"\\\\ud800 lone"}')
    got, _ = session.prepare(None, CONFIGS["small"])
    assert got.messages[0]["content"] == "\ud800 lone"


# -- the delta codec off the round trip: a sender that forgot its prompt, a receiver
# given a full prompt, and the lists each side hands out or takes in, which the
# caller may change afterwards


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _crc(messages: list[Any]) -> int:
    """CRC-32 of each message's compact JSON, one after the other (docs/PROTOCOL.md)."""
    return zlib.crc32(b"".join(json.dumps(m, separators=(",", ":")).encode() for m in messages))


def test_a_sender_that_forgot_sends_everything_again() -> None:
    encoder = DeltaEncoder()
    first = [_user("a"), _user("b")]
    encoder.delta(first)
    encoder.forget()
    again = encoder.delta([*first, _user("c")], stable=2)  # a hint about a forgotten prompt
    assert again == PromptDelta(keep=0, append=[*first, _user("c")], checksum=0)
    # and it holds the new prompt from then on
    assert encoder.delta([*first, _user("c"), _user("d")]) == PromptDelta(
        keep=3, append=[_user("d")], checksum=_crc([*first, _user("c")])
    )


def test_a_full_prompt_replaces_what_the_receiver_held() -> None:
    decoder = DeltaDecoder()
    decoder.full([_user("x"), _user("y"), _user("z")])
    given = [_user("a"), _user("b")]
    assert decoder.full(given) == given
    # deltas now apply over the full prompt, not over what came before it
    delta = {"keep": 2, "append": [_user("c")], "checksum": _crc(given)}
    assert decoder.apply(delta) == [*given, _user("c")]
    with pytest.raises(DeltaMismatch):
        decoder.apply(
            {"keep": 3, "append": [], "checksum": _crc([_user("x"), _user("y"), _user("z")])}
        )


def test_the_receiver_keeps_its_own_copies() -> None:
    """Changing a list given to or returned by the decoder does not change its prompt."""
    decoder = DeltaDecoder()
    given = [_user("a")]
    got = decoder.full(given)
    given.append(_user("given"))
    got.append(_user("got"))
    append = [_user("b")]
    delta = {"keep": 1, "append": append, "checksum": _crc([_user("a")])}
    rebuilt = decoder.apply(delta)
    append.append(_user("late"))
    rebuilt.append(_user("rebuilt"))
    assert decoder.apply({"keep": 2, "append": [], "checksum": _crc([_user("a"), _user("b")])}) == [
        _user("a"),
        _user("b"),
    ]


def test_keep_may_be_the_whole_prompt_but_not_more() -> None:
    decoder = DeltaDecoder()
    prompt = [_user("a"), _user("b")]
    decoder.full(prompt)
    assert decoder.apply(PromptDelta(keep=2, append=[], checksum=_crc(prompt))) == prompt
    assert decoder.apply(PromptDelta(keep=0, append=[_user("n")], checksum=0)) == [_user("n")]
    with pytest.raises(DeltaMismatch, match=r"^prompt delta does not apply: keep=2 of 1 messages$"):
        decoder.apply(PromptDelta(keep=2, append=[], checksum=_crc([_user("n"), _user("n")])))
    with pytest.raises(DeltaMismatch, match=r"keep=1 of 1 messages$"):
        decoder.apply(PromptDelta(keep=1, append=[], checksum=_crc([_user("n")]) ^ 1))


def test_a_false_hint_with_other_objects_is_compared_again() -> None:
    """A hint whose messages are not the previous prompt's objects is not trusted."""
    encoder, decoder = DeltaEncoder(), DeltaDecoder()
    decoder.apply(encoder.delta([_user("a"), _user("b"), _user("c")]))
    changed = [_user("a"), _user("B"), _user("c"), _user("d")]
    delta = encoder.delta(changed, stable=3)
    assert (delta.keep, delta.append) == (1, changed[1:])
    assert decoder.apply(delta) == changed


def test_the_checksum_chains_over_every_kept_message() -> None:
    encoder = DeltaEncoder()
    prompt = [_user(str(n)) for n in range(5)]
    encoder.delta(prompt[:2])
    encoder.delta(prompt[:4])  # the running CRC continues from the kept prefix
    delta = encoder.delta(prompt)
    assert (delta.keep, delta.checksum) == (4, _crc(prompt[:4]))
    shorter = encoder.delta(prompt[:3])
    assert (shorter.keep, shorter.append, shorter.checksum) == (3, [], _crc(prompt[:3]))


# -- reset and truncate: the daemon truncates a session after a failed round and
# resets it on a new conversation; the counted size is what max_session_bytes is
# checked against (docs/PROTOCOL.md), so it must follow the conversation exactly


def _plain_size(messages: list[Any]) -> int:
    """Bytes of each message as compact JSON, added up (an independent count)."""
    return sum(
        len(json.dumps(m, separators=(",", ":"), ensure_ascii=False).encode()) for m in messages
    )


def test_reset_counts_the_size_from_zero_and_takes_a_measured_size() -> None:
    session = SessionPrompt()
    session.extend(agent_run(5))
    other = agent_run(3)
    session.reset(other)
    assert session.size == _plain_size(other) == json_size(other)
    session.reset(other, size=12_345)  # the caller measured it (from the received bytes)
    assert session.size == 12_345
    session.extend([{"role": "user", "content": "é"}], size=7)
    assert session.size == 12_352
    session.extend([])  # an empty append adds nothing
    assert session.size == 12_352 and json_size([]) == 0


def test_truncate_goes_back_to_a_prefix() -> None:
    run = agent_run(70)
    session = SessionPrompt()
    session.extend(run)
    session.prepare(None, CONFIGS["default"])
    session.truncate(41)
    assert session.messages == run[:41]
    assert session.size == _plain_size(run[:41])
    got, stable = session.prepare(None, CONFIGS["default"])
    assert got == prepare(run[:41], config=CONFIGS["default"])
    assert stable == 0  # nothing to reuse after going back
    session.extend(run[41:])
    assert session.prepare(None, CONFIGS["default"])[0] == prepare(run, config=CONFIGS["default"])


def test_truncating_to_the_whole_conversation_keeps_the_last_round() -> None:
    run = agent_run(70)
    session = SessionPrompt()
    session.extend(run[:-2])
    session.prepare(None, CONFIGS["default"])
    session.truncate(len(run) - 2)  # nothing to drop: the last round stays reusable
    session.truncate(len(run) + 5)
    session.extend(run[-2:])
    got, stable = session.prepare(None, CONFIGS["default"])
    assert got == prepare(run, config=CONFIGS["default"])
    assert stable > 0


# -- what a round takes from the session and from the call


# Epochs that grow only for repeats, and far below their cap: every repeat shows.
_REPEAT_GROWTH = Config(
    prompt=msgspec.structs.replace(
        SMALL,
        epoch_size=3,
        epoch_increment_epochs_per_increase=0,
        epoch_increment_size_increase=0,
        epoch_increment_repeat_increase=2,
        epoch_increment_max_size=40,
    )
)


def test_a_key_repeated_three_times_counts_each_repeat_where_it_lands() -> None:
    """The third occurrence of a call is a repeat of its own (the epoch it lands in
    grows for it), not a second count of the second occurrence."""
    same = {"path": "/src/main.py"}
    conversation: list[Any] = [{"role": "user", "content": "go"}]
    session = SessionPrompt()
    session.extend(conversation)
    for n in range(40):
        if n in (3, 9, 24):
            added = [call("read", same, f"r{n}"), output("read", "r" * 400, f"r{n}")]
        else:
            added = [call("grep", {"n": n}, f"g{n}"), output("grep", "o" * 400, f"g{n}")]
        session.extend(added)
        conversation += added
        got, _ = session.prepare("shorten_tools_epoch_increment", _REPEAT_GROWTH)
        expected = prepare(conversation, "shorten_tools_epoch_increment", config=_REPEAT_GROWTH)
        assert (got.messages, got.report) == (expected.messages, expected.report), n


def test_a_session_remembers_its_rewrites_across_rounds() -> None:
    """A conversation prepared whole every round (a later strategy may rewrite what
    the first made) shortens each tool message once per session, not once per round."""
    config = Config(prompt=TIGHT)
    names = "shorten_tools_epoch,shorten_tools"
    session = SessionPrompt()
    session.extend(chat(8))
    first, _ = session.prepare(names, config)
    assert (session.rewrites.hits, session.rewrites.misses) == (0, 1)
    again, _ = session.prepare(names, config)
    assert (session.rewrites.hits, session.rewrites.misses) == (1, 1)
    assert again == first == prepare(chat(8), names, config=config)


def test_the_format_and_cache_hint_of_the_call_win_over_the_session() -> None:
    config = Config(prompt=TIGHT)
    foreign = SessionPrompt()
    foreign.extend(chat(6))
    got, _ = foreign.prepare("shorten_tools_epoch", config, format="scout")
    assert got == prepare(chat(6), "shorten_tools_epoch", config=config, format="scout")
    assert got.warnings  # declared scout, but the traffic is not
    for strategies in ("shorten_tools_epoch", "shorten_tools"):  # by round, and whole
        cached = SessionPrompt(format="anthropic")
        cached.extend(anthropic(6))
        got, _ = cached.prepare(strategies, config, cache_control=True)
        assert got == prepare(anthropic(6), strategies, config=config, cache_control=True)
        assert got.messages[got.stable_prefix - 1]["content"][-1]["cache_control"]


_COST_A = Config(prompt=PromptConfig(context_window=20_000))
_COST_B = Config(prompt=PromptConfig(context_window=20_000, chars_per_token=2.0))


def test_cost_aware_rounds_that_compact_equal_the_full_computation() -> None:
    """The default strategy in a session, on a window small enough that it compacts,
    and again when it compacts further; then with another configuration every round
    (the replay of one configuration is not carried into the other)."""
    run = agent_run(120)
    session = SessionPrompt()
    compacted = set()
    start = 0
    for end in range(10, len(run) + 1, 2):  # whole pairs: no output lands late
        session.extend(run[start:end])
        start = end
        got, _ = session.prepare(None, _COST_A)
        expected = prepare(run[:end], config=_COST_A)
        assert (got.messages, got.report) == (expected.messages, expected.report), end
        compacted.add(expected.report[0].outputs_truncated + expected.report[0].outputs_dropped)
    assert len(compacted) >= 3  # none, then more than one plan
    mixed = SessionPrompt()
    start = 0
    for n, end in enumerate(range(10, len(run) + 1, 5)):
        mixed.extend(run[start:end])
        start = end
        config = (_COST_A, _COST_B)[n % 2]
        got, _ = mixed.prepare(None, config)
        assert got == prepare(run[:end], config=config), end


def test_a_notice_appended_after_the_core_is_counted_like_the_full_computation(
    tmp_path: Any,
) -> None:
    """The strategies after the epoch one that only append (``inbox``, ``none``) add
    their characters after the core's, in the report as in the prompt."""
    save_file = str(tmp_path / "agent.chat")
    run = agent_run(60)
    session = SessionPrompt()
    session.extend(run)
    names = "shorten_tools_epoch,inbox,none"
    for text in ("first notice", "a second, longer notice"):
        write_notice(save_file, text)
        got, _ = session.prepare(names, CONFIGS["small"], save_file=save_file)
        write_notice(save_file, text)  # delivered once more, to the full computation
        expected = prepare(run, names, save_file=save_file, config=CONFIGS["small"])
        assert got == expected
        assert got.report[1].inbox_delivered == 1
        assert got.report[2].chars_after == got.report[1].chars_after > got.report[0].chars_after


def test_the_save_file_reaches_an_inbox_after_a_strategy_that_rewrites(tmp_path: Any) -> None:
    save_file = str(tmp_path / "agent.chat")
    run = agent_run(40)
    session = SessionPrompt()
    session.extend(run)
    write_notice(save_file, "after a rewriting strategy")
    got, stable = session.prepare(
        "shorten_tools_epoch,shorten_tools,inbox", CONFIGS["small"], save_file=save_file
    )
    assert got.messages[-1]["content"].endswith("after a rewriting strategy")
    assert got.report[-1].inbox_delivered == 1 and stable == 0


def test_repeats_from_several_appends_between_rounds_all_count() -> None:
    """Two appends before one round: the pairs of both are counted as repeats."""
    same = {"path": "/src/again.py"}
    conversation: list[Any] = [{"role": "user", "content": "go"}]
    for n in range(12):
        conversation += [call("grep", {"n": n}, f"g{n}"), output("grep", "o" * 400, f"g{n}")]
    session = SessionPrompt()
    session.extend(conversation)
    session.prepare("shorten_tools_epoch_increment", _REPEAT_GROWTH)
    for n in range(3):
        first = [call("read", same, f"a{n}"), output("read", "r" * 400, f"a{n}")]
        second = [call("grep", {"m": n}, f"m{n}"), output("grep", "o" * 400, f"m{n}")]
        session.extend(first)  # two appends, one round
        session.extend(second)
        conversation += first + second
        got, _ = session.prepare("shorten_tools_epoch_increment", _REPEAT_GROWTH)
        expected = prepare(conversation, "shorten_tools_epoch_increment", config=_REPEAT_GROWTH)
        assert (got.messages, got.report) == (expected.messages, expected.report)


def test_a_session_declared_scout_reuses_rounds_too() -> None:
    run = agent_run(80)
    stables = _grow(SessionPrompt(format="scout"), run[2:], 2)
    assert sum(1 for stable in stables if stable > 0) >= len(stables) - 12


def _patching(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Count the rounds the engine patches (scoutd.strategies.epoch_rounds), and what each
    changed; check that a patched round keeps exactly the leading messages of the
    last prompt that it says it keeps."""
    reached: Counter[str] = Counter()
    patch = incremental.move_protection

    def counting(*args: Any) -> Any:
        result = patch(*args)
        (last, _, before, _), (out, _, after, kept) = args[4], result
        same = list(map(operator.is_, last, out))
        assert kept == (same.index(False) if False in same else len(same))
        reached["patched"] += 1
        reached["several lost"] += len(args[5]) > 1
        reached["dropped"] += len(after.changes.dropped) > len(before.changes.dropped)
        reached["truncated"] += len(after.changes.rewrites) > len(before.changes.rewrites)
        reached["notice moved"] += before.notice_before not in (-1, after.notice_before)
        return result

    monkeypatch.setattr(incremental, "move_protection", counting)
    return reached


def _rounds_equal_the_full_computation(run: list[Any], snapshot: Config, step: int = 1) -> None:
    """Feed ``run`` ``step`` calls a round; compare each round with ``prepare``."""
    session, start = SessionPrompt(), 0
    for end in [*round_ends(run)[step - 1 :: step], len(run)]:
        session.extend(run[start:end])
        start = end
        got, _ = session.prepare(None, snapshot)
        expected = prepare(run[:end], config=snapshot)
        assert got.messages == expected.messages
        assert got.report == expected.report


@pytest.mark.parametrize("strategy", ["shorten_tools_epoch", "shorten_tools_epoch_increment"])
@pytest.mark.parametrize("notice", [PromptConfig().compaction_notice, "[tool traffic shortened]"])
def test_a_moved_protection_patches_the_last_prompt(
    strategy: str, notice: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where a repeat moves the protection within the same bands, the last prompt
    is patched instead of walked again, and every round still equals the full
    computation (also with a notice that does not count what changed)."""
    config = msgspec.structs.replace(SMALL, prompt_strategies=(strategy,), compaction_notice=notice)
    reached = _patching(monkeypatch)
    _rounds_equal_the_full_computation(
        synthetic_run(150, seed=5, repeat_rate=0.6).messages, Config(prompt=config)
    )
    assert reached["patched"] >= 40
    assert reached["dropped"] and reached["truncated"] and reached["notice moved"], reached


def test_parallel_calls_lose_their_protection_in_the_patch_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Calls made two at a time, answered after both: the dropped tools are then
    no run of the oldest slots, and the patch still counts what the walk counts."""
    run: list[Any] = [{"role": "system", "content": "agent"}, {"role": "user", "content": "task"}]
    for n in range(40):
        first, second = f"a{n}", f"b{n}"
        run += [call("read_file", {"path": f"/{n % 5}"}, first), call("grep", {"q": n}, second)]
        run += [output("read_file", "x" * 900, first), output("grep", "y" * 900, second)]
    reached = _patching(monkeypatch)
    config = msgspec.structs.replace(SMALL, prompt_strategies=("shorten_tools_epoch",))
    _rounds_equal_the_full_computation(run, Config(prompt=config))
    assert reached["patched"] >= 30 and reached["dropped"] >= 10, reached


def test_several_pairs_may_lose_the_protection_in_one_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Three calls a round: a round's repeats move the protection of several
    pairs at once, some whole in any case, and the patch still equals the walk."""
    config = msgspec.structs.replace(SMALL, prompt_strategies=("shorten_tools_epoch_increment",))
    reached = _patching(monkeypatch)
    _rounds_equal_the_full_computation(
        synthetic_run(150, seed=5, repeat_rate=0.6).messages, Config(prompt=config), 3
    )
    assert reached["patched"] >= 15 and reached["several lost"], reached


@pytest.mark.parametrize("opening", [2, 0])
def test_a_first_compaction_by_a_moved_protection_brings_the_notice(
    opening: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compacted band holds a short output (kept: nothing to shorten) and the
    protected repeat of its call; when the call comes a third time, that repeat
    is the first message truncated, and the notice appears, before the first
    message when the conversation opens with a tool call."""
    config = PromptConfig(
        prompt_strategies=("shorten_tools_epoch",),
        epoch_tool_call_threshold=3,
        epoch_full_tool_calls=1,
        epoch_compacted_tool_calls=2,
        epoch_size=100,
    )
    again = {"path": "/src/app.py"}
    pairs = [("read_file", again, "ok"), ("read_file", again, "x" * 3000)]
    pairs += [("grep", {"q": str(n)}, "y" * 3000) for n in range(3)]  # the last one extends
    pairs += [("read_file", again, "z" * 3000)]
    run = [{"role": "system", "content": "agent"}, {"role": "user", "content": "task"}][
        2 - opening :
    ]
    for n, (name, arguments, text) in enumerate(pairs):
        run += [call(name, arguments, f"c{n}"), output(name, text, f"c{n}")]
    reached = _patching(monkeypatch)
    _rounds_equal_the_full_computation(run, Config(prompt=config))
    assert reached["patched"] == 1 and reached["truncated"] == 1
    assert prepare(run[:-2], config=Config(prompt=config)).report[0].notice is False
    assert prepare(run, config=Config(prompt=config)).report[0].notice is True


def test_the_notice_of_a_conversation_opening_with_a_tool_stands_first() -> None:
    """epoch_state finds the place of the notice from the very first message on."""
    run = [call("grep", {"q": "a"}, "a"), output("grep", "x" * 3000, "a")]
    run += [m for n in range(4) for m in (call("ls", {"n": n}, n), output("ls", "y" * 3000, n))]
    index = index_tools(run)
    changes = Changes(rewrites={1: "short"})  # the first output truncated: the call stays first
    assert epoch_state(index, changes, notice=True).notice_before == 0
    assert epoch_state(index, changes, notice=False).notice_before == NO_NOTICE
    dropped = Changes(dropped=[0, 1])
    assert epoch_state(index, dropped, notice=True).notice_before == 2


def test_messages_after_a_notice_that_stands_last_go_before_it() -> None:
    """With every tool message dropped the notice is appended; what the next round
    adds goes before it, as a whole prepare puts it (the round is not an extension)."""
    prompt = PromptConfig(context_window=1200, cost_compacted_tool_calls=3)
    config = Config(prompt=prompt)
    big = "y" * 1500
    messages = [
        {"role": "user", "content": big},
        {"role": "user", "content": big},
        {"role": "assistant", "content": "step 1"},
        call("bash", {"cmd": "ls"}, "c1"),
        output("bash", big, "c1"),
        {"role": "assistant", "content": "done"},
    ]
    session = SessionPrompt()
    session.extend(messages[:5])
    first, _ = session.prepare("shorten_tools_cost_aware", config)
    assert first.report[0].outputs_dropped == 1 and first.messages[-1]["role"] == "user"
    session.extend(messages[5:])
    got, _ = session.prepare("shorten_tools_cost_aware", config)
    assert got == prepare(messages, "shorten_tools_cost_aware", config=config)
    assert got.messages[-2:] == [messages[5], first.messages[-1]]


def test_a_call_left_waiting_loses_the_protection_of_the_place_it_shares(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A call never answered stands at the place of the next output; when that
    output's repeated call is protected, so is the waiting call, and when the
    protection moves on, the patch shortens both, as the walk does. A call made
    beside them and answered after has a place of its own and keeps it."""
    run: list[Any] = [{"role": "system", "content": "agent"}, {"role": "user", "content": "task"}]
    for n in range(40):
        repeat = call("grep", {"q": n % 4}, f"g{n}")
        answer = output("grep", "y" * 900, f"g{n}")
        waiting = call("read_file", {"path": "/w" + "x" * 400, "n": n}, f"w{n}")
        if n % 3 == 2:
            beside = call("list", {"dir": "/x" + "x" * 400, "n": n}, f"x{n}")
            run += [beside, repeat, waiting, answer, output("list", "z" * 900, f"x{n}")]
        elif n % 6 == 1:
            run += [waiting, repeat, answer]
        else:
            run += [repeat, answer]
    reached = _patching(monkeypatch)
    config = msgspec.structs.replace(SMALL, prompt_strategies=("shorten_tools_epoch",))
    _rounds_equal_the_full_computation(run, Config(prompt=config))
    assert reached["patched"] >= 20 and reached["truncated"] >= 20, reached
