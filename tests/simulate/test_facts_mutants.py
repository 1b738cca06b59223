"""The hidden-fact measure at the corners its mutants showed untested.

docs/ECONOMY.md "What the prompts hide" defines a fact by its characters, what
a text contains (the pieces of its paths and line references, a traceback's
``line 1234`` its ``1234``), and how a prompt is measured: an unchanged message
is recognised (by identity, else by its encoded text) and a rewritten one is
read for facts once, scoutd's own markers read as blanks. Expectations are
written by hand from that text.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from typing import Any

import pytest

import scoutd.simulate.facts as facts_module
from scoutd.simulate.facts import FactTally, Hidden, action_facts, text_facts
from scoutd.simulate.provider import provider_facts
from scoutd.simulate.texts import encode, message_parts

TRACEBACK = 'Traceback:\n  File "/testbed/src/pkg/load_cfg.py", line 1234, in main\nValueError'


def call(ident: str, name: str, arguments: dict[str, Any], text: str = "") -> dict[str, Any]:
    """An OpenAI Chat agent message with one function call."""
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {
        "role": "assistant",
        "content": text,
        "tool_calls": [{"id": ident, "function": function}],
    }


def tool(ident: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": ident, "content": content}


def run(first_output: str, last: str) -> list[dict[str, Any]]:
    """System, user, a command and its output, a second call and its output, a last text."""
    return [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Fix the failing start."},
        call("c1", "bash", {"command": "python run.py"}),
        tool("c1", first_output),
        call("c2", "bash", {"command": "ls"}),
        tool("c2", "ok"),
        {"role": "assistant", "content": last},
    ]


def replaced(messages: list[dict[str, Any]], position: int, content: str) -> list[dict[str, Any]]:
    """``messages`` with the content of the message at ``position`` replaced (a new object)."""
    return [{**m, "content": content} if i == position else m for i, m in enumerate(messages)]


def test_an_inner_capital_right_after_the_first_letter_makes_an_identifier() -> None:
    assert action_facts("xMatrix Xmatrix XMATRIX xmatrix") == {"xMatrix"}


def test_a_path_has_four_characters_and_a_letter() -> None:
    assert action_facts("x.py a.c a/bc a/b 1/2/3 12/345") == {"x.py", "a/bc"}


def test_every_spelling_of_a_line_reference_is_line_n() -> None:
    assert action_facts("see lines 1234, LINE 7 and Line 58") == {"line 1234", "line 7", "line 58"}


def test_a_path_without_an_extension_contains_its_tails() -> None:
    assert text_facts("ran src/bin/tool_x") == {"src/bin/tool_x", "bin/tool_x", "tool_x"}


def test_the_pieces_of_a_path_are_facts_only_when_they_are_paths_or_names() -> None:
    # a.c (3 characters) is no path; abcdef (no _, digit or inner capital) no identifier
    assert text_facts("src/a.c:120") == {"src/a.c:120", "a.c:120", "src/a.c", "120"}
    assert text_facts("src/abcdef/x_y.py") == {"src/abcdef/x_y.py", "abcdef/x_y.py", "x_y.py"}


def test_a_line_number_a_traceback_printed_is_needed() -> None:
    """``line 1234`` contains ``1234`` as ``load_cfg.py:1234`` does: the agent that reads
    the traceback and views from line 1234 copied the number from the output."""
    assert {"line 1234", "1234", "load_cfg.py", "src/pkg/load_cfg.py"} <= text_facts(TRACEBACK)
    messages = run(TRACEBACK, "Fixed.")
    view = {"command": "view", "path": "load_cfg.py", "view_range": [1234, 1250]}
    messages[4] = call("c2", "str_replace_editor", view)
    facts = provider_facts(messages, "openai-chat")
    assert {call.end: set(call.needed) for call in facts.calls}[4] == {"1234", "load_cfg.py"}
    full = facts.measure(lambda end: messages[:end])
    assert (full.needed, full.hidden) == (2, 0)
    blank = facts.measure(lambda end: replaced(messages[:end], 3, "the"))
    assert (blank.needed, blank.hidden, blank.calls_hiding) == (2, 2, 1)


def test_the_runs_own_messages_are_recognised_without_encoding_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An unchanged message is recognised by identity: a prompt of the run's own
    messages costs no encoding (docs/ECONOMY.md, "Its cost")."""
    messages = run("src/app/config.py:120: def parse_config", "See parse_config in config.py.")
    facts = provider_facts(messages, "openai-chat")
    encoded: Counter[str] = Counter()
    real = encode

    def counting(message: Any) -> str:
        encoded["calls"] += 1
        return real(message)

    monkeypatch.setattr(facts_module, "encode", counting)
    tally = facts.measure(lambda end: messages[:end])
    assert (tally.needed, tally.hidden) == (2, 0)
    assert encoded["calls"] == 0
    # a copy is recognised by its text, and a rewritten message read: both are encoded
    facts.measure(lambda end: replaced(copy.deepcopy(messages[:end]), 3, "the"))
    assert encoded["calls"] > 0


def test_an_unchanged_copy_is_the_original_even_where_it_looks_like_a_marker() -> None:
    """An output that printed ``4096 were removed.`` holds ``4096``: a copy of it is
    the original message, not a rewritten one whose markers are read as blanks."""
    messages = run("Cleanup: 4096 were removed.", "So 4096 were gone.")
    facts = provider_facts(messages, "openai-chat")
    tally = facts.measure(lambda end: copy.deepcopy(messages[:end]))
    assert (tally.needed, tally.hidden) == (1, 0)
    # the same words written by scoutd in a rewritten output hide it
    hiding = facts.measure(lambda end: replaced(messages[:end], 3, "4096 were removed."))
    assert (hiding.needed, hiding.hidden) == (1, 1)


def test_a_shortened_output_keeps_the_facts_next_to_its_markers() -> None:
    """``Truncated (N): `` and ``<...N - digest...>`` are read as blanks, so the kept
    head and tail right beside them still hold their facts."""
    original = "parse_config_v2 = 1\n" + "x" * 5000 + "\nload_all_rows()"
    messages = run(original, "Use parse_config_v2 and load_all_rows.")
    facts = provider_facts(messages, "openai-chat")
    short = "Truncated (5036): parse_config_v2 = 1<...5036 - 0a1b2...>load_all_rows()"
    tally = facts.measure(lambda end: replaced(messages[:end], 3, short))
    assert (tally.needed, tally.hidden) == (2, 0)


def test_a_rewritten_message_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same placeholder in the prompts of every call is read for facts once."""
    messages = run("alpha_one beta_two gamma_three", "gamma_three it is.")
    messages[4] = call("c2", "bash", {"command": "grep -rn alpha_one"})
    messages[6:6] = [call("c3", "bash", {"command": "grep -rn beta_two"}), tool("c3", "x")]
    facts = provider_facts(messages, "openai-chat")
    # the case is what it says: three calls after the output each need one of its facts
    assert [len(call.needed) for call in facts.calls] == [0, 1, 1, 1]
    read: Counter[str] = Counter()
    real = message_parts

    def counting(message: Any, format_name: str) -> Any:
        read["calls"] += 1
        return real(message, format_name)

    monkeypatch.setattr(facts_module, "message_parts", counting)
    tally = facts.measure(lambda end: replaced(messages[:end], 3, "[output removed]"))
    assert (tally.needed, tally.hidden) == (3, 3)
    assert read["calls"] == 1


def test_tallies_add_up_and_the_hidden_facts_are_recorded() -> None:
    total = FactTally(calls=3, needed=5, hidden=2, calls_hiding=1)
    total.add(FactTally(calls=4, needed=7, hidden=3, calls_hiding=2))
    assert (total.calls, total.needed, total.hidden, total.calls_hiding) == (7, 12, 5, 3)
    assert (total.rate, total.call_share) == (5 / 12, 3 / 7)
    messages = run("parse_config_v2 and 4096", "parse_config_v2 and 4096 then.")
    facts = provider_facts(messages, "openai-chat")
    recorded: list[Hidden] = []
    tally = facts.measure(lambda end: replaced(messages[:end], 3, "the"), recorded.append)
    assert tally.hidden == 2
    assert sorted((h.call.end, h.fact) for h in recorded) == [(6, "4096"), (6, "parse_config_v2")]
