"""What a client may configure (docs/RELIABILITY.md, "What a client may configure").

Every ``[prompt]`` key has an access class: an override never names code (the
tokenizer is the operator's), never raises a limit of what one call reads, and
no value it may set makes a call raise anything but ``ConfigError`` or cost
more than the conversation's own size. The daemon's side is in
tests/server/test_overrides.py.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

import scoutd
from scoutd import ConfigError, prepare
from scoutd.config import (
    MAX_COUNT,
    NOTICE_MAX_BYTES,
    OPERATOR_ONLY,
    TIGHTEN_ONLY,
    Config,
    PromptConfig,
    resolve_config,
    with_overrides,
)
from scoutd.config_rules import PROMPT_ACCESS, _number_fields, access_of
from scoutd.strategies import cost_aware
from scoutd.testing import conversation

STRATEGIES = (
    "shorten_tools",
    "shorten_tools_epoch",
    "shorten_tools_epoch_increment",
    "shorten_tools_cost_aware",
)


COUNTED: list[str] = []


def counted(text: str) -> int:
    """A tokenizer for the tests that trust their own code: one token per word."""
    COUNTED.append(text)
    return len(text.split())


def witness_chat(witness: Path) -> list[dict[str, Any]]:
    """A chat whose first text is ``witness``: ``os:mkdir`` as its tokenizer would make it."""
    return [{"role": "user", "content": str(witness)}, *conversation(3, user_every=0)[2:]]


# --- the table ---------------------------------------------------------------------------


def test_every_prompt_key_is_classified() -> None:
    """A key added to PromptConfig must say who may set it; nothing else is in the table."""
    assert set(PROMPT_ACCESS) == set(PromptConfig.__struct_fields__)
    assert {"tokenizer"} == OPERATOR_ONLY
    assert {"inbox_max_bytes", "inbox_max_total_bytes", "cost_keep_lookback"} == TIGHTEN_ONLY


def test_a_key_missing_from_the_table_is_the_operators() -> None:
    assert access_of("a_key_added_later") == "operator"
    assert access_of("epoch_size") == "client"


# --- no override names code --------------------------------------------------------------


@pytest.mark.parametrize("value", ["os:mkdir", "builtins:len", "", None, 5, ["os", "mkdir"]])
def test_an_override_may_not_name_a_tokenizer(value: object) -> None:
    """Refused whatever the value, before it is converted, with the key in the message."""
    with pytest.raises(ConfigError) as caught:
        with_overrides(Config(), {"epoch_size": 3, "tokenizer": value})
    message = str(caught.value)
    assert message.startswith("per-call override of tokenizer refused: ")
    assert "only the operator configures" in message and "TOKENIZER" in message


def test_nothing_named_by_an_override_runs(tmp_path: Path) -> None:
    """``prepare``, ``scoutd.Session`` and ``load_config`` refuse it before any import."""
    witness = tmp_path / "ran"
    messages = witness_chat(witness)
    overrides = {"tokenizer": "os:mkdir"}
    with pytest.raises(ConfigError, match="tokenizer refused"):
        prepare(messages, config=overrides)
    with pytest.raises(ConfigError, match="tokenizer refused"):
        scoutd.prepare_prompt(messages, "shorten_tools_cost_aware", config=overrides)
    with pytest.raises(ConfigError, match="tokenizer refused"):
        scoutd.Session(config=overrides)
    with pytest.raises(ConfigError, match="tokenizer refused"):
        scoutd.load_config(overrides=overrides)
    assert not witness.exists()


def test_code_and_the_operator_may_still_name_a_tokenizer(tmp_path: Path) -> None:
    """A Config or PromptConfig built in code is trusted, so are the file and the environment."""
    target = f"{__name__}:counted"
    messages = conversation(3, user_every=0)
    COUNTED.clear()
    prepare(messages, config=PromptConfig(tokenizer=target))
    assert messages[-1]["content"] in COUNTED  # counted by the tokenizer, not the estimate
    by_env = resolve_config(environ={"TOKENIZER": target})
    path = tmp_path / "scoutd.toml"
    path.write_text(f'[prompt]\ntokenizer = "{target}"\n')
    by_file = resolve_config(path, environ={})
    assert by_env.prompt.tokenizer == by_file.prompt.tokenizer == target
    assert by_file.origins["prompt.tokenizer"] == "file"
    assert cost_aware.token_counter(by_file.prompt)("two words") == 2


# --- numbers: bounded so that no arithmetic overflows ------------------------------------


def _trials(ge: Any, gt: Any, le: Any, lt: Any) -> list[Any]:
    """Each bound and the value just past it, and the extremes of JSON and Python numbers."""
    values: list[Any] = [10**400, -(10**400), 2**64, 1e308, -1e308, 5e-324, -0.0, math.inf]
    values += [-math.inf, math.nan, 0, 1, 0.5]
    for bound, outward in ((ge, -math.inf), (gt, -math.inf), (le, math.inf), (lt, math.inf)):
        if bound is not None:
            past = bound + (1 if outward > 0 else -1) if type(bound) is int else None
            values += [bound, math.nextafter(float(bound), outward) if past is None else past]
    return values


# Every strategy compacts the conversation below and the epochs grow: each number is used.
COMPACTING = PromptConfig(
    epoch_tool_call_threshold=5,
    epoch_size=2,
    epoch_increment_epochs_per_increase=1,
    context_window=20_000,
    inbox_max_bytes=MAX_COUNT,
    inbox_max_total_bytes=MAX_COUNT,
    cost_keep_lookback=1000,
)
NUMBERS = [
    (name, value)
    for name, ge, gt, le, lt in _number_fields(PromptConfig)
    for value in _trials(ge, gt, le, lt)
]


@pytest.mark.parametrize(("key", "value"), NUMBERS, ids=[f"{k}={v!r:.12}" for k, v in NUMBERS])
def test_any_number_is_refused_by_name_or_served(key: str, value: Any) -> None:
    """Never an OverflowError (``epoch_increment_compacted_growth_ratio = 1e308`` was one,
    so were ``chars_per_token = 5e-324`` and ``context_window = 10**400``)."""
    messages = conversation(60, output_size=300)
    base = Config(prompt=COMPACTING)
    try:
        config = with_overrides(base, {key: value})
    except ConfigError as exc:
        assert key in str(exc)
        if ", got `" not in str(exc):  # a wrong type is not a bound's business
            with pytest.raises(ValueError, match=key):
                PromptConfig(**{key: value})  # code is held to the same bounds
        return
    for name in STRATEGIES:
        prepared = prepare(messages, name, config=config)
        assert isinstance(prepared.messages, list)
    with scoutd.Session(config=config, strategies="shorten_tools_epoch_increment") as session:
        session.prepare(messages[:40])
        session.prepare(messages)


def test_the_growth_ratio_at_its_bound_keeps_the_window_finite() -> None:
    """The regression of the overflow: the largest ratio allowed, a window that grows."""
    config = {"epoch_increment_compacted_growth_ratio": 1e6, "epoch_tool_call_threshold": 1}
    config |= {"epoch_size": 1, "epoch_increment_epochs_per_increase": 1}
    prepared = prepare(conversation(40), "shorten_tools_epoch_increment", config=config)
    assert prepared.report[0].outputs_truncated > 0
    with pytest.raises(ConfigError, match="epoch_increment_compacted_growth_ratio"):
        prepare(conversation(40), config={"epoch_increment_compacted_growth_ratio": 1e308})


def test_the_notice_is_bounded_in_utf8_bytes() -> None:
    """Two-byte characters count twice: the bound is the bytes the model receives."""
    fits = "é" * (NOTICE_MAX_BYTES // 2)
    assert with_overrides(Config(), {"compaction_notice": fits}).prompt.compaction_notice == fits
    for notice in ("é" * (NOTICE_MAX_BYTES // 2 + 1), "x" * (NOTICE_MAX_BYTES + 1)):
        assert len(notice) <= NOTICE_MAX_BYTES + 1
        with pytest.raises(ConfigError, match=r"compaction_notice is \d+ bytes"):
            with_overrides(Config(), {"compaction_notice": notice})


# --- what an override can cost -------------------------------------------------------------


def test_no_override_makes_a_round_cost_more_than_its_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forced compaction with every output kept whole and every pair in the band: the
    fit used to step one pair at a time, n * n steps over n rounds (4.5 s at 4,000
    pairs); by bisection each round asks for a few dozen sums at most."""
    pairs = 400
    messages = conversation(pairs, output_size=50, user_every=0)
    hostile = {"compaction_limit_share": 0, "cost_full_tool_outputs": MAX_COUNT}
    hostile |= {"cost_compacted_tool_calls": MAX_COUNT, "cost_full_share_cap": MAX_COUNT}
    asked: list[int] = []
    saved = cost_aware._Tokens.saved

    def counting(self: Any, dropped: int, shortened: int) -> int:
        asked.append(1)
        return saved(self, dropped, shortened)

    monkeypatch.setattr(cost_aware._Tokens, "saved", counting)
    prepared = prepare(messages, "shorten_tools_cost_aware", config=hostile)
    assert prepared.report[0].outputs_dropped == pairs  # the fit ran at every round
    assert len(asked) <= pairs * 2 * (math.ceil(math.log2(pairs)) + 2)


def test_overrides_never_reach_the_operator_tables() -> None:
    """Plugins and daemon keys are no [prompt] keys: an override naming them is unknown."""
    for key in ("plugins", "allowed_roots", "socket_path", "abort_signal"):
        with pytest.raises(ConfigError, match="per-call overrides"):
            with_overrides(Config(), {key: "os:system"})


def test_a_call_names_at_most_32_strategies_in_process() -> None:
    """The library holds a strategy list to the daemon's bound: a list, a comma
    string, an override and a PromptConfig built in code (each name is a pass)."""
    messages = [{"role": "user", "content": "hello"}]
    many = ["shorten_tools"] * 33
    with pytest.raises(scoutd.ConfigError, match="33 strategies named: at most 32"):
        scoutd.prepare(messages, strategies=many)
    with pytest.raises(scoutd.ConfigError, match="33 strategies named: at most 32"):
        scoutd.prepare(messages, config={"prompt_strategies": ",".join(many)})
    with pytest.raises(ValueError, match="33 strategies named"):
        scoutd.PromptConfig(prompt_strategies=tuple(many))
    assert len(scoutd.prepare(messages, strategies=many[:32]).report) == 32
