"""The hidden-fact measure on hand-built conversations: facts, needed, hidden."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scoutd.simulate.facts import RunFacts, action_facts, fact_kind, text_facts
from scoutd.simulate.origins import tool_kind
from scoutd.simulate.provider import provider_facts, provider_rounds


def bash(ident: str, command: str, text: str = "") -> dict[str, Any]:
    arguments = json.dumps({"command": command})
    function = {"name": "bash", "arguments": arguments}
    calls = [{"id": ident, "function": function}]
    return {"role": "assistant", "content": text, "tool_calls": calls}


def tool(ident: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": ident, "content": content}


def test_what_counts_as_a_fact() -> None:
    text = (
        "see src/app/config.py:120 and Line 58, then foo_bar, fooBar1, ConfigLoader, "
        "REDACTED, abcdef, a_b, 4096 and 12, tests/test_x.py; README.md or self.load_all()"
    )
    assert action_facts(text) == {
        "src/app/config.py:120",
        "line 58",
        "foo_bar",
        "fooBar1",
        "ConfigLoader",
        "4096",
        "tests/test_x.py",
        "README.md",
        "load_all",
    }
    assert fact_kind("src/a.py:3") == fact_kind("line 4") == "line"
    assert fact_kind("a/b") == fact_kind("b.py") == "path"
    assert (fact_kind("4096"), fact_kind("foo_bar")) == ("number", "identifier")


def test_a_text_contains_the_tails_and_names_inside_its_paths() -> None:
    found = text_facts("File src/pkg/load_cfg.py:1234, in main")
    assert {"src/pkg/load_cfg.py:1234", "pkg/load_cfg.py:1234", "load_cfg.py:1234"} <= found
    assert {"src/pkg/load_cfg.py", "pkg/load_cfg.py", "load_cfg.py", "load_cfg", "1234"} <= found
    assert "src/pkg" not in found  # a head of a path is not in it


OPENAI_RUN: list[dict[str, Any]] = [
    {"role": "system", "content": "You are an agent."},
    {"role": "user", "content": "Fix the bug in parse_config."},
    bash("c1", "grep -rn parse_config src", "Let me search."),
    tool("c1", "src/app/config.py:120:def parse_config(path):\nsrc/app/loader.py:45: x"),
    bash("c2", "sed -n 100,140p src/app/config.py"),
    tool("c2", "def parse_config(path):\n  raw = read_settings_file(path)\n  ConfigLoader(raw)"),
    bash(
        "c3",
        "grep -n read_settings_file src/app/*.py",
        "read_settings_file is wrong; ConfigLoader fine; parse_config at line 120.",
    ),
    tool("c3", "src/app/io.py:7:def read_settings_file(p):"),
    {"role": "assistant", "content": "Done: fixed read_settings_file in src/app/io.py."},
]


def test_needed_facts_of_a_known_openai_run() -> None:
    facts = provider_facts(OPENAI_RUN, "openai-chat")
    needed = {call.end: set(call.needed) for call in facts.calls}
    # parse_config is in the user message: never needed; 100 and 140 are in no output;
    # read_settings_file was already named by the agent before the last call.
    assert needed == {
        2: set(),
        4: {"src/app/config.py"},
        6: {"read_settings_file", "ConfigLoader"},
        8: {"src/app/io.py"},
    }


def blank(prompt: list[Any], which: set[int]) -> list[Any]:
    """``prompt`` with the tool messages at the positions ``which`` emptied."""
    return [
        {**m, "content": ""} if i in which and m.get("role") == "tool" else m
        for i, m in enumerate(prompt)
    ]


def test_hidden_facts_of_a_known_openai_run() -> None:
    facts = provider_facts(OPENAI_RUN, "openai-chat")
    full = facts.measure(lambda end: OPENAI_RUN[:end])
    assert (full.calls, full.needed, full.hidden, full.calls_hiding) == (4, 4, 0, 0)
    # The sed output emptied: the two facts only it held are hidden at call 6.
    hidden_sed = facts.measure(lambda end: blank(OPENAI_RUN[:end], {5}))
    assert (hidden_sed.hidden, hidden_sed.calls_hiding) == (2, 1)
    # The first grep output emptied: src/app/config.py is hidden at call 4 (call 8
    # needs src/app/io.py, which the second grep output holds).
    hidden_grep = facts.measure(lambda end: blank(OPENAI_RUN[:end], {3}))
    assert (hidden_grep.hidden, hidden_grep.calls_hiding) == (1, 1)
    # A rewritten output that still names the fact does not hide it.
    shortened = [
        {**m, "content": "[shortened] ... ConfigLoader ..."} if i == 5 else m
        for i, m in enumerate(OPENAI_RUN)
    ]
    partly = facts.measure(lambda end: shortened[:end])
    assert (partly.hidden, partly.calls_hiding) == (1, 1)
    assert partly.rate == 0.25 and partly.call_share == 0.25


ANTHROPIC_RUN: list[dict[str, Any]] = [
    {"role": "user", "content": "Please rename OldWidget."},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Read it first.", "signature": "sig_AbC123xyz"},
            {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/r/w.py"}},
        ],
    },
    {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "t1",
                "content": [{"type": "text", "text": "class OldWidget:\n  def render_html(): 250"}],
            },
            {"type": "text", "text": "Also keep MAX_ITEMS and render_html."},
        ],
    },
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "render_html returns 250; MAX_ITEMS stays; OldWidget too."},
            {"type": "tool_use", "id": "t2", "name": "Edit", "input": {"new": "NewWidget 250"}},
        ],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "ok"}]},
]


def test_a_fact_also_in_a_user_message_is_never_needed() -> None:
    facts = provider_facts(ANTHROPIC_RUN, "anthropic")
    needed = {call.end: set(call.needed) for call in facts.calls}
    # render_html and MAX_ITEMS are in the user's text beside the output, OldWidget in
    # the task; only 250 came from the tool alone.
    assert needed == {1: set(), 3: {"250"}}
    emptied = [
        ANTHROPIC_RUN[0],
        ANTHROPIC_RUN[1],
        {"role": "user", "content": [ANTHROPIC_RUN[2]["content"][1]]},
    ]
    tally = facts.measure(lambda end: emptied if end == 3 else ANTHROPIC_RUN[:end])
    assert (tally.needed, tally.hidden) == (1, 1)


def test_tool_kinds() -> None:
    assert tool_kind("bash", json.dumps({"command": "cd /r && cat a.py"})) == "file read"
    assert tool_kind("bash", json.dumps({"command": "sed -n 1,20p a.py"})) == "file read"
    assert tool_kind("bash", json.dumps({"command": "sed -i s/a/b/ a.py"})) == "edit/write"
    assert tool_kind("bash", json.dumps({"command": "cat > a.py <<'EOF'\nx\nEOF"})) == "edit/write"
    assert tool_kind("bash", json.dumps({"command": "grep -rn x . | head"})) == "search/listing"
    assert tool_kind("bash", json.dumps({"command": "python -m pytest -q"})) == "test run"
    assert tool_kind("bash", json.dumps({"command": "python repro.py"})) == "script run"
    assert tool_kind("bash", json.dumps({"command": "git diff"})) == "git"
    assert tool_kind("Bash", "make") == tool_kind("Bash", "mise run lint 2>&1") == "build/lint"
    assert tool_kind("Bash", "mise run test") == "test run"
    assert tool_kind("Bash", "pwd && pip install -q pytz") == "other"
    assert (tool_kind("Read", ""), tool_kind("Grep", ""), tool_kind("Edit", "")) == (
        "file read",
        "search/listing",
        "edit/write",
    )
    assert tool_kind("TodoWrite", "") == tool_kind("TaskCreate", "") == "agent tasks"
    assert tool_kind("WebFetch", "") == "web/issues" and tool_kind("Unknown", "") == "other"


# Random conversations over a fixed vocabulary, against a plain oracle.
FACTS = ["alpha_1", "beta_22", "GammaRay", "delta_x9", "4096", "31337", "src/a/mod.py", "pkg/u.go"]
FILLER = ["the", "and", "look", "here", "value"]
WORDS = st.lists(st.sampled_from(FACTS + FILLER), max_size=6).map(" ".join)


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": draw(WORDS)},
        {"role": "user", "content": draw(WORDS)},
    ]
    for number in range(draw(st.integers(1, 8))):
        messages.append(bash(f"c{number}", draw(WORDS), draw(WORDS)))
        messages.append(tool(f"c{number}", draw(WORDS)))
        if draw(st.booleans()) and draw(st.booleans()):
            messages.append({"role": "user", "content": draw(WORDS)})
    messages.append({"role": "assistant", "content": draw(WORDS)})
    return messages


def words_of(message: dict[str, Any]) -> tuple[str, set[str]]:
    """The oracle's reading: who wrote the message, and its words."""
    words = set(message["content"].split())
    for call in message.get("tool_calls", []):
        words |= set(json.loads(call["function"]["arguments"])["command"].split())
    kind = {"tool": "output", "assistant": "action"}.get(message["role"], "source")
    return kind, words & set(FACTS)


def oracle(messages: list[Any], prompts: dict[int, list[Any]]) -> tuple[int, int, int]:
    """``(needed, hidden, calls hiding)``, counted from the definition directly."""
    needed = hidden = hiding = 0
    for end in range(1, len(messages)):
        if messages[end]["role"] != "assistant" or messages[end - 1]["role"] == "assistant":
            continue
        earlier = [words_of(m) for m in messages[:end]]
        in_outputs = set().union(*(w for k, w in earlier if k == "output"))
        elsewhere = set().union(*(w for k, w in earlier if k != "output"))
        in_prompt = set().union(*(words_of(m)[1] for m in prompts[end]))
        wanted = (words_of(messages[end])[1] & in_outputs) - elsewhere
        missing = wanted - in_prompt
        needed, hidden, hiding = needed + len(wanted), hidden + len(missing), hiding + bool(missing)
    return needed, hidden, hiding


@settings(max_examples=150, deadline=None)
@given(conversations(), st.sets(st.integers(0, 30)), st.sampled_from(FACTS))
def test_the_measure_matches_the_oracle(messages: list[Any], blanked: set[int], extra: str) -> None:
    prompts = {end: blank(messages[:end], blanked) for end in provider_rounds(messages)}
    facts = RunFacts(messages, "openai-chat", provider_rounds(messages))
    tally = facts.measure(lambda end: prompts[end])
    assert (tally.needed, tally.hidden, tally.calls_hiding) == oracle(messages, prompts)
    assert tally.hidden <= tally.needed and tally.calls_hiding <= tally.calls
    # Nothing blanked hides nothing.
    assert facts.measure(lambda end: messages[:end]).hidden == 0
    # A fact added to every prompt never hides more.
    notice = {"role": "user", "content": extra}
    more = facts.measure(lambda end: [*prompts[end], notice])
    assert more.hidden <= tally.hidden
