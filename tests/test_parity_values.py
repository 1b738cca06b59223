"""Values in messages: the same prompt, byte for byte, in process and through the daemon.

The prompts are compared as ``json.dumps`` writes them, what an agent sends its
provider. JSON values survive the wire whole (integers past 64 bits, ``-0.0``,
``5e-324``, NUL and very long keys); Python values JSON writes as something
else travel as JSON writes them: a tuple as an array, a dict subclass or
another mapping as an object, a key that is not a string as ``json.dumps``
writes it (``1``, ``1.5``, ``true``, ``null``): the client raised ``TypeError``
for the last two, where the library in process takes them. A text with a lone
surrogate goes escaped (docs/PROTOCOL.md, "Paths are bytes"), and the
escaping must change nothing else: it cut every value nested past 200 levels
to ``null``, and wrote the keys ``None`` and ``True`` where JSON writes ``null``
and ``true``.
"""

from __future__ import annotations

import json
import os
from collections import Counter, OrderedDict
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import scoutd
from scoutd.config import Config, load_config
from scoutd.paths import safe_text
from scoutd.testing.derive import to_anthropic, to_responses
from tests.support.daemon import Daemon
from tests.test_parity_errors import chat_run

PROMPT = {"recall": True, "context_window": 6000, "cost_full_tool_outputs": 4}
STRATEGIES = ["shorten_tools_cost_aware"]
CALL_TIMEOUT = 20.0
RUNS: dict[str, list[dict[str, Any]]] = {
    "openai-chat": chat_run(40),
    "anthropic": to_anthropic(chat_run(40)),
    "openai-responses": to_responses(chat_run(40)),
}


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with Daemon(prompt=PROMPT) as running:
        yield running


def dumped(messages: Any) -> str:
    """The prompt as an agent sends it on."""
    return json.dumps(messages, ensure_ascii=False)


def with_value(fmt: str, value: Any) -> list[dict[str, Any]]:
    """The format's run with ``value`` in its first and last message, which every
    prompt keeps (the first one with a notice added, in some formats)."""
    run = RUNS[fmt]
    return [{**run[0], "extra": value}, *run[1:-1], {**run[-1], "extra": value}]


def escaped(value: Any) -> Any:
    """What the wire carries of a value holding lone surrogates: every text escaped,
    every key written as JSON writes it (the oracle, as docs/PROTOCOL.md says it)."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, dict):
        return {safe_text(_key(key)): escaped(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [escaped(item) for item in value]
    return value


def _key(key: Any) -> str:
    """``key`` as ``json.dumps`` writes an object's key."""
    return str(next(iter(json.loads(json.dumps({key: 0})))))


def four_prompts(
    daemon: Daemon, client: scoutd.Client, messages: list[dict[str, Any]], name: str
) -> list[str]:
    """In process and through the daemon, without a session and in one: the prompts."""
    config: Config = load_config(daemon.config_path)
    local = scoutd.prepare(messages, STRATEGIES, config=config).messages
    held = scoutd.Session(strategies=STRATEGIES, config=config).prepare(messages).messages
    remote = client.prepare(messages, STRATEGIES).messages
    with client.session(os.path.join(daemon.dir, f"{name}.chat")) as session:
        rounds = session.prepare(messages[:9], STRATEGIES)  # a round, then an append
        rounds = session.prepare(messages, STRATEGIES)
    return [dumped(prompt) for prompt in (local, held, remote, rounds.messages)]


KEYS: list[Any] = [1, 1.5, True, False, None, -(2**70)]


@pytest.mark.parametrize("fmt", list(RUNS))
@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_a_key_that_is_not_a_string_goes_as_json_writes_it(
    daemon: Daemon, fmt: str, key: Any
) -> None:
    messages = with_value(fmt, {"outer": {key: "value", "after": [key]}})
    with scoutd.Client(daemon.socket_path, timeout=CALL_TIMEOUT) as client:
        prompts = four_prompts(daemon, client, messages, f"key-{fmt}")
    assert len(set(prompts)) == 1, prompts[2][:200]
    assert f'"{_key(key)}": "value"' in prompts[0]


@pytest.mark.parametrize("fmt", list(RUNS))
@pytest.mark.parametrize(
    ("depth", "keys"),
    [(190, "texts"), (201, "texts"), (260, "texts"), (400, "texts"), (3, "odd"), (260, "odd")],
)
def test_escaping_a_lone_surrogate_keeps_deep_values_and_json_keys(
    daemon: Daemon, fmt: str, depth: int, keys: str
) -> None:
    """Through the daemon the prompt is the library's prompt of the escaped
    conversation, deep values and every key included."""
    deep: Any = {"k\udce9y": "caf\udce9", "n": 2}
    if keys == "odd":
        deep = {None: "caf\udce9", True: 1, "k\udce9y": 2}
    for _ in range(depth):
        deep = [deep]
    messages = with_value(fmt, deep)
    config: Config = load_config(daemon.config_path)
    wire = [escaped(message) for message in messages]
    expected = dumped(scoutd.prepare(wire, STRATEGIES, config=config).messages)
    if keys == "odd":
        assert '{"null": "caf\\\\xe9", "true": 1, "k\\\\xe9y": 2}' in expected
    else:
        assert '{"k\\\\xe9y": "caf\\\\xe9", "n": 2}' in expected
    with scoutd.Client(daemon.socket_path, timeout=CALL_TIMEOUT) as client:
        remote = client.prepare(messages, STRATEGIES).messages
        with client.session(os.path.join(daemon.dir, f"deep-{fmt}.chat")) as session:
            rounds = session.prepare(messages, STRATEGIES).messages
    assert dumped(rounds) == expected
    # without a session the messages kept are the caller's own, the new ones the daemon's
    given = {id(message) for message in messages}
    assert dumped([escaped(m) if id(m) in given else m for m in remote]) == expected


# JSON values, and the Python values JSON writes as one of them.
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.sampled_from([2**64, -(2**63) - 1, 10**30, 1e308, 5e-324, -0.0, 0.1, 1.0]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["\x00", "a\x00b", "k" * 5000, "\u2028", "😀"]),
)
KEY = st.one_of(st.text(max_size=8), st.sampled_from(["\x00", "k" * 3000, 7, 2.5, True, None]))


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=3),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(KEY, children, max_size=3),
        st.dictionaries(st.text(max_size=5), children, max_size=3).map(OrderedDict),
    )


VALUES = st.recursive(SCALARS, _containers, max_leaves=12)


def _count(value: Any, seen: Counter[str]) -> None:
    """Count the examples that hold what the property is about."""
    text = repr(value)
    seen["examples"] += 1
    seen["tuples"] += "(" in text
    seen["big ints"] += any(len(part.strip("[](){},:-")) > 19 for part in text.split())
    seen["odd keys"] += any(f"{{{k}:" in text or f", {k}:" in text for k in ("7", "True", "None"))


@pytest.mark.parametrize("fmt", list(RUNS))
def test_drawn_values_give_the_same_prompt_on_every_path(daemon: Daemon, fmt: str) -> None:
    seen: Counter[str] = Counter()
    with scoutd.Client(daemon.socket_path, timeout=CALL_TIMEOUT) as client:

        @settings(
            max_examples=50,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(value=VALUES)
        def check(value: Any) -> None:
            _count(value, seen)
            prompts = four_prompts(daemon, client, with_value(fmt, value), f"drawn-{fmt}")
            assert len(set(prompts)) == 1, (value, [prompt[:120] for prompt in prompts])

        check()
    assert seen["examples"] >= 50
    assert seen["odd keys"] >= 3 and seen["tuples"] >= 3 and seen["big ints"] >= 3, seen
