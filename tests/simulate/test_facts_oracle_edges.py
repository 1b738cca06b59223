"""The hidden-fact measure at its edges, against oracles written from docs/ECONOMY.md.

"What the prompts hide" defines a fact by its characters: a line reference is
``line N`` or ``lines N`` *in any case*, an identifier is a whole word of
letters, digits and ``_`` and a number stands *on its own*, so no fact is a
piece cut out of a longer word, whatever its alphabet. A prompt hides a needed
fact when no placeholder or notice *repeats* it: the figures scoutd writes in
its own markers (an output's length, its digest, its recall handle, the
notice's counts and handles) copy nothing from the outputs, and a fact they
happen to spell is still hidden.

The drawn conversations are written from a small vocabulary whose facts are
known by hand (the oracle), in the OpenAI Chat format, with facts split across
messages too (half of a path in one message, the rest in the next).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import scoutd
from scoutd.simulate.facts import FactTally, RunFacts, action_facts, text_facts
from scoutd.simulate.provider import provider_rounds
from scoutd.simulate.workload import round_ends

# word: the facts it names (for these words, also all the facts it contains)
WORDS: dict[str, set[str]] = {
    "LINE 58": {"line 58"},
    "LINES 58": {"line 58"},
    "Line 58": {"line 58"},
    "line 58": {"line 58"},
    "café_config": {"café_config"},
    "_config": {"_config"},
    "naïve_parse": {"naïve_parse"},
    "ve_parse": {"ve_parse"},
    "é4096": set(),
    "4096": {"4096"},
    "Ünïcode_Name": {"Ünïcode_Name"},
    "src/pkg": {"src/pkg"},
    "load.py": {"load.py"},
    "the": set(),
}
TEXT = st.lists(st.sampled_from(sorted(WORDS)), max_size=4).map(" ".join)
COUNTS: Counter[str] = Counter()


def oracle_words(text: str) -> set[str]:
    """The facts of a text written word by word from the vocabulary (a word may hold a space)."""
    found: set[str] = set()
    rest = f" {text} "
    for word in sorted(WORDS, key=len, reverse=True):  # "LINES 58" before "58" alone
        while f" {word} " in rest:
            found |= WORDS[word]
            rest = rest.replace(f" {word} ", " ", 1)
    return found


def chat(steps: list[tuple[str, str, str]], last: str) -> list[dict[str, Any]]:
    """OpenAI Chat: each step an agent text with one call, and the call's output."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Fix it."},
    ]
    for number, (text, command, output) in enumerate(steps):
        # the arguments are read as the strings their JSON holds (an escape is no letter)
        function = {
            "name": "bash",
            "arguments": json.dumps({"command": command}, ensure_ascii=False),
        }
        call = {"id": f"c{number}", "type": "function", "function": function}
        messages.append({"role": "assistant", "content": text, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{number}", "content": output})
    messages.append({"role": "assistant", "content": last})
    return messages


def oracle(steps: list[tuple[str, str, str]], last: str) -> tuple[int, int]:
    """Needed facts and those a prompt with every output blanked hides (all of them)."""
    seen: set[str] = set()  # operator and agent text so far
    outputs: set[str] = set()
    needed = 0
    for number in range(len(steps) + 1):
        if number < len(steps):
            text, command, output = steps[number]
            action = oracle_words(text) | oracle_words(command)
        else:
            if not last:
                break
            action = oracle_words(last)
        needed += len((action & outputs) - seen)
        if number < len(steps):
            seen |= action
            outputs |= oracle_words(output)
    return needed, needed


def blanked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**m, "content": "the"} if m["role"] == "tool" else m for m in messages]


def test_line_references_count_in_any_case() -> None:
    for text in ("LINE 58", "LINES 58", "Lines 58", "line 58"):
        assert action_facts(text) == {"line 58"}, text


def test_no_fact_is_cut_out_of_a_longer_word() -> None:
    """A word of letters from beyond ASCII is one identifier, a number glued to a letter none."""
    assert text_facts("café_config naïve_parse Ünïcode_Name") == {
        "café_config",
        "naïve_parse",
        "Ünïcode_Name",
    }
    assert text_facts("é4096 4096é ﬁle_name1") == {"ﬁle_name1"}
    # inside a path, the names between its separators are whole words too
    assert text_facts("pkg/café_cfg1.py") == {"pkg/café_cfg1.py", "café_cfg1.py", "café_cfg1"}


@settings(max_examples=150, derandomize=True, deadline=None)
@given(
    st.lists(st.tuples(TEXT, TEXT, TEXT), min_size=1, max_size=6),
    TEXT,
)
def drawn_runs_need_what_the_oracle_says(steps: list[tuple[str, str, str]], last: str) -> None:
    messages = chat(steps, last)
    facts = RunFacts(messages, "openai-chat", provider_rounds(messages))
    got = facts.measure(lambda end: blanked(messages)[:end])
    needed, hidden = oracle(steps, last)
    assert (got.needed, got.hidden) == (needed, hidden)
    unicode_needed = sum(
        1 for call in facts.calls for fact in call.needed if not fact.isascii() or "line" in fact
    )
    COUNTS["runs needing a Unicode fact or a line"] += bool(unicode_needed)
    COUNTS["runs needing facts"] += bool(needed)


def test_drawn_runs_need_what_the_oracle_says() -> None:
    """The property, then its floors: it must have measured the edges, not nothing."""
    COUNTS.clear()
    drawn_runs_need_what_the_oracle_says()
    assert COUNTS["runs needing facts"] >= 50, COUNTS
    assert COUNTS["runs needing a Unicode fact or a line"] >= 35, COUNTS


def test_a_fact_split_across_two_messages_is_no_fact() -> None:
    """``src/pkg`` in one output and ``/load.py`` in the next make no ``src/pkg/load.py``."""
    steps = [("the", "the", "src/pkg"), ("the", "the", "/load.py")]
    messages = chat(steps, "src/pkg/load.py")
    facts = RunFacts(messages, "openai-chat", provider_rounds(messages))
    assert [dict(call.needed) for call in facts.calls][-1] == {}


def test_a_chat_calls_arguments_are_read_as_the_strings_they_hold() -> None:
    """``"cd /x\\nparse_config --all"`` in a Chat call's JSON arguments is a command of
    two lines: it names ``parse_config``, which output 1 held. Read as JSON text the
    escape glued ``n`` to it (``nparse_config``, no fact of any output): the need was
    missed (the name after the escaped quote was found either way)."""
    steps = [("the", "the", "parse_config INSTALLED_APPS")]
    command = 'cd /x\nparse_config --all && grep \\"INSTALLED_APPS\\" settings.py'
    messages = chat(steps, "")
    messages[-1] = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c9",
                "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": command})},
            }
        ],
    }
    facts = RunFacts(messages, "openai-chat", provider_rounds(messages))
    assert set(facts.calls[-1].needed) == {"parse_config", "INSTALLED_APPS"}


# --- scoutd's own markers ------------------------------------------------------------


def _pair(number: int, content: str) -> list[dict[str, Any]]:
    body = {"name": "read", "arguments": {"path": "notes.txt"}, "id": f"c{number}"}
    output = {"name": "read", "content": content, "id": f"c{number}"}
    return [
        {"role": "function_call", "content": json.dumps(body)},
        {"role": "function_call_output", "content": json.dumps(output)},
    ]


def _measure(messages: list[dict[str, Any]], config: dict[str, Any]) -> tuple[FactTally, str]:
    """The default's prompts measured at every round, and the last prompt's text."""
    facts = RunFacts(messages, "scout", round_ends(messages))
    prompts = {
        end: scoutd.prepare(messages[:end], "shorten_tools_cost_aware", config=config).messages
        for end in round_ends(messages)
    }
    last = json.dumps(prompts[max(prompts)])
    return facts.measure(prompts.__getitem__), last


# a window this small forces the compaction: the newest output whole, the rest shortened
FORCED = {
    "context_window": 1000,
    "cost_full_tool_outputs": 1,
    "cost_compacted_tool_calls": 5,
    "cost_keep_share": 0,
}


def test_the_length_in_a_shortened_outputs_marker_repeats_no_fact() -> None:
    """An output of 4,096 characters says ``code 4096`` in the part shortening cuts out:
    the marker ``Truncated (4096): ...<...4096 - ...>`` writes its length, not the code."""
    big = "a" * 2000 + " code 4096 " + "b" * (4096 - 2011)
    messages = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Read the notes."},
        *_pair(1, big),
        *(m for k in range(2, 5) for m in _pair(k, "ok")),
        {"role": "assistant", "content": "The code is 4096."},
    ]
    tally, last = _measure(messages, FORCED)
    assert "Truncated (4096)" in last and "code 4096" not in last  # the case is what it says
    assert (tally.needed, tally.hidden, tally.calls_hiding) == (1, 1, 1)


def test_recall_handles_and_notice_counts_repeat_no_fact() -> None:
    """With recall on, the forced compaction shortens outputs 104 to 108 (``recall #104``)
    and its notice says ``206 were removed`` and ``removed here: #1-#103``: output 2's
    ``error 104``, ``code 103`` and ``206 items``, dropped, are hidden all the same."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Read the notes."},
    ]
    for number in range(1, 110):
        text = "error 104, code 103, 206 items" if number == 2 else "ok"
        messages += _pair(number, text + " " + "x" * (800 if number >= 100 else 0))
    messages.append({"role": "assistant", "content": "Fix error 104 and code 103 of 206 items."})
    tally, last = _measure(messages, {**FORCED, "context_window": 4000, "recall": True})
    for written in ("recall #104", "206 were removed", "removed here: #1-#103"):
        assert written in last, written  # the case is what it says
    assert "error 104" not in last
    assert (tally.needed, tally.hidden) == (3, 3)
