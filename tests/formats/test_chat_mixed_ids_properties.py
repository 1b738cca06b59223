"""Properties of OpenAI Chat conversations mixing tool call kinds and sharing ids.

The Responses format once paired a function call and a custom call sharing one
``call_id`` (tests/formats/test_responses_custom_properties.py); this looks for
the same class in OpenAI Chat. Conversations are drawn mixing user and
assistant text, assistant messages with one or several ``tool_calls``
(``function`` and ``custom``), ``tool`` answers (a text or a list of text
parts), legacy ``function_call`` / ``function`` messages, and hostile variants:
one id shared by a function call and a custom call, the same id in two
assistant messages, answers before their calls, answers after an intervening
user message, ids that are not texts, ``tool_calls`` that is not a list,
lone surrogates, a call left unanswered.

For the default strategy, the epoch ones and ``shorten_tools`` with small
windows: (a) nothing raises; (b) the prompt breaks no rule of the Chat API
(:func:`chat_rules`, a plain checker) that the given messages did not already
break; (c) every prompt message is a given one, a rewrite scoutd may make of
one (a shortened ``tool`` content or ``arguments``, fewer ``tool_calls``), or
a notice, in order; (d) the input is never changed; (e) a session fed the
growing conversation answers each round as ``prepare`` of it does.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from typing import Any

from hypothesis import currently_in_test_context, event, given
from hypothesis import strategies as st

import scoutd

from .drawn import SETTINGS, STRATEGIES, configuration, output_text, same, session_rounds

TOOLS = ["function", "function", "custom"]
HOSTILE = [
    "shared_kinds",
    "shared_kinds",
    "shared_kinds",
    "shared_kinds_across",
    "shared_kinds_across",
    "shared_kinds_across",
    "id_reused",
    "id_reused",
    "function_twice_same_id",
    "function_twice_same_id",
    "answer_before_call",
    "answer_after_user",
    "id_not_text",
    "tool_calls_not_list",
    "surrogate_output",
    "surrogate_arguments",
    "unanswered",
    "answered_twice",
    "custom_input_not_text",
    "custom_without_body",
    "surrogate_input",
]

Message = dict[str, Any]


def _key(ident: Any) -> str:
    return repr(ident)


class _Drawn:
    """A conversation being drawn, and the hostile kinds put in it."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data
        self.messages: list[Any] = [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "fix the bug"},
        ]
        self.serial = 0
        self.used: list[str] = []
        self.by_kind: dict[str, list[str]] = {"function": [], "custom": []}
        self.hostile: set[str] = set()

    def draw(self, strategy: st.SearchStrategy[Any]) -> Any:
        return self.data.draw(strategy)

    def next_id(self) -> str:
        self.serial += 1
        ident = f"call_{self.serial}"
        self.used.append(ident)
        return ident

    def output(self) -> Any:
        text = output_text(self.serial, self.draw(st.sampled_from([0, 40, 120])))
        if self.draw(st.booleans()):
            return text
        return [{"type": "text", "text": text}]

    def entry(self, kind: str, ident: Any) -> Message:
        if kind == "custom":
            return {
                "id": ident,
                "type": "custom",
                "custom": {"name": "apply_patch", "input": "*** patch\n" + "p" * 400},
            }
        arguments = {"command": f"cat {ident}", "pad": "a" * self.draw(st.sampled_from([5, 600]))}
        return {
            "id": ident,
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps(arguments)},
        }

    def answer(self, ident: Any) -> Message:
        return {"role": "tool", "tool_call_id": ident, "content": self.output()}

    def legacy(self) -> None:
        self.serial += 1
        self.messages.append(
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "bash", "arguments": json.dumps({"c": "ls"})},
            }
        )
        self.messages.append({"role": "function", "name": "bash", "content": self.output()})

    def turn(self, hostile: bool) -> None:
        chosen = self.draw(st.lists(st.sampled_from(TOOLS), min_size=0, max_size=3))
        if hostile and self.draw(st.integers(0, 2)) > 0:  # at most one hostile variant a turn
            chosen.insert(
                self.draw(st.integers(0, len(chosen))), self.draw(st.sampled_from(HOSTILE))
            )
        if self.draw(st.integers(0, 5)) == 0:
            self.legacy()
        entries: list[Any] = []
        answers: list[Any] = []
        before: list[Any] = []  # answers put before the assistant message
        after_user = False
        not_list = False
        for kind in chosen:
            if kind in HOSTILE:
                self.hostile.add(kind)
            if kind in ("function", "custom"):
                ident = self.next_id()
                self.by_kind[kind].append(ident)
                entries.append(self.entry(kind, ident))
                answers.append(self.answer(ident))
            elif kind == "shared_kinds":
                ident = self.next_id()
                entries += [self.entry("function", ident), self.entry("custom", ident)]
                pair = [self.answer(ident), self.answer(ident)]
                if self.draw(st.booleans()):
                    pair.reverse()
                answers += pair
            elif kind == "shared_kinds_across":
                # an id an earlier function call has, now a custom call's (or the reverse):
                # either makes a group the strategies may shorten or drop
                kind = "function" if self.by_kind["custom"] else "custom"
                other = self.by_kind["function" if kind == "custom" else "custom"]
                ident = self.draw(st.sampled_from(other)) if other else self.next_id()
                entries.append(self.entry(kind, ident))
                answers.append(self.answer(ident))
            elif kind == "function_twice_same_id":
                ident = self.next_id()
                entries += [self.entry("function", ident), self.entry("function", ident)]
                answers += [self.answer(ident), self.answer(ident)]
            elif kind == "id_reused":
                ident = self.draw(st.sampled_from(self.used)) if self.used else self.next_id()
                entries.append(self.entry(self.draw(st.sampled_from(TOOLS)), ident))
                answers.append(self.answer(ident))
            elif kind == "answer_before_call":
                ident = self.next_id()
                entries.append(self.entry("function", ident))
                before.append(self.answer(ident))
            elif kind == "answer_after_user":
                ident = self.next_id()
                entries.append(self.entry("function", ident))
                answers.append(self.answer(ident))
                after_user = True
            elif kind == "id_not_text":
                self.serial += 1
                ident_odd: Any = self.draw(st.sampled_from([self.serial, None, [self.serial]]))
                entries.append(self.entry("function", ident_odd))
                answers.append(self.answer(ident_odd))
            elif kind == "tool_calls_not_list":
                not_list = True
                ident = self.next_id()
                entries.append(self.entry("function", ident))
                answers.append(self.answer(ident))
            elif kind == "surrogate_output":
                ident = self.next_id()
                entries.append(self.entry("function", ident))
                answers.append({"role": "tool", "tool_call_id": ident, "content": "bad \ud800 x"})
            elif kind == "surrogate_arguments":
                ident = self.next_id()
                entry = self.entry("function", ident)
                entry["function"]["arguments"] = '{"c": "\ud800"}'
                entries.append(entry)
                answers.append(self.answer(ident))
            elif kind == "unanswered":
                entries.append(self.entry(self.draw(st.sampled_from(TOOLS)), self.next_id()))
            elif kind in ("custom_input_not_text", "custom_without_body", "surrogate_input"):
                ident = self.next_id()
                entry = self.entry("custom", ident)
                if kind == "custom_without_body":
                    del entry["custom"]
                else:
                    entry["custom"]["input"] = {"patch": "p"} if kind[0] == "c" else "\ud800 p"
                entries.append(entry)
                answers.append(self.answer(ident))
            else:  # answered_twice
                ident = self.next_id()
                entries.append(self.entry("function", ident))
                answers += [self.answer(ident), self.answer(ident)]
        self.messages += before
        text = self.draw(st.sampled_from([None, "", f"step {self.serial}"]))
        assistant: Message = {"role": "assistant", "content": text}
        if entries:
            assistant["tool_calls"] = entries[0] if not_list else entries
        elif not text:
            assistant["content"] = "thinking"
        if self.draw(st.booleans()):
            answers.reverse()
        self.messages.append(assistant)
        if after_user:
            self.messages.append({"role": "user", "content": "wait"})
        self.messages += answers
        if self.draw(st.integers(0, 3)) == 0:
            self.messages.append({"role": "user", "content": "go on"})


def conversation(data: st.DataObject) -> tuple[list[Any], set[str]]:
    drawn = _Drawn(data)
    hostile = data.draw(st.integers(0, 2)) > 0
    for _ in range(data.draw(st.integers(2, 10))):
        drawn.turn(hostile)
    return drawn.messages, drawn.hostile


def chat_rules(messages: list[Any]) -> Counter[tuple[str, str]]:
    """The Chat API's pairing rules, broken, by kind and id.

    A ``tool`` message answers a ``tool_calls`` id of the nearest preceding
    assistant message with ``tool_calls``, only ``tool`` messages between; every
    such call is answered once before the next other message (a group still
    waiting at the end counts apart); a ``function`` message directly follows
    an assistant ``function_call``.
    """
    found: Counter[tuple[str, str]] = Counter()
    waiting: Counter[str] | None = None  # the open group's unanswered ids
    legacy_open = False
    for message in messages:
        role = message.get("role") if isinstance(message, dict) else None
        if role == "tool":
            ident = _key(message.get("tool_call_id"))
            if waiting is None:
                found["tool message without its group", ident] += 1
            elif waiting[ident] > 0:
                waiting[ident] -= 1
            else:
                found["tool message answering no call", ident] += 1
            legacy_open = False
            continue
        if waiting is not None:
            for ident, count in waiting.items():
                if count:
                    found["call not answered", ident] += count
            waiting = None
        if role == "function":
            if not legacy_open:
                found["function message without its call", str(message.get("name"))] += 1
            legacy_open = False
            continue
        legacy_open = False
        if role != "assistant":
            continue
        calls = message.get("tool_calls")
        if message.get("function_call") is not None:
            legacy_open = True
        if calls is None or calls == []:
            if not message.get("content") and message.get("function_call") is None:
                found["empty assistant message", ""] += 1
            continue
        if type(calls) is not list:
            found["tool_calls not a list", ""] += 1
            continue
        waiting = Counter()
        for entry in calls:
            given = entry.get("id") if isinstance(entry, dict) else None
            if type(given) is not str:
                found["id not a text", _key(given)] += 1
            waiting[_key(given)] += 1
    if waiting is not None:
        for ident, count in waiting.items():
            if count:
                found["call pending at the end", ident] += count
    return found


def _note(seen: Counter[str], name: str) -> None:
    """Count an interesting case (and show it in Hypothesis' statistics)."""
    seen[name] += 1
    if currently_in_test_context():
        event(name)


def _text_of(content: Any) -> str | None:
    if type(content) is str:
        return content
    if type(content) is list and all(type(p) is dict and p.get("type") == "text" for p in content):
        return "".join(p.get("text", "") for p in content)
    return None


def _is_rewrite(given: Any, made: Any) -> bool:
    """Whether ``made`` is a rewrite scoutd may make of ``given``."""
    if type(given) is not dict or type(made) is not dict or given.get("role") != made.get("role"):
        return False
    rest = {"content", "tool_calls"}
    if {k: v for k, v in given.items() if k not in rest} != {
        k: v for k, v in made.items() if k not in rest
    }:
        return False
    if given.get("role") == "tool":
        return _text_of(made.get("content")) is not None and "tool_calls" not in made
    if given.get("role") != "assistant" or not same(given.get("content"), made.get("content")):
        return False
    entries, kept = given.get("tool_calls"), made.get("tool_calls")
    if type(entries) is not list or type(kept) is not list or not kept:
        return False
    at = 0
    for entry in kept:  # a subsequence of the given calls, arguments maybe shortened
        while at < len(entries) and entries[at] is not entry and not _shortened(entries[at], entry):
            at += 1
        if at == len(entries):
            return False
        at += 1
    return True


def _shortened(given: Any, made: Any) -> bool:
    """Whether ``made`` is ``given`` with its arguments (a custom call: its input) shortened."""
    if type(given) is not dict or type(made) is not dict or given.get("id") != made.get("id"):
        return False
    body, text = ("custom", "input") if given.get("type") == "custom" else ("function", "arguments")
    if {k: v for k, v in given.items() if k != body} != {
        k: v for k, v in made.items() if k != body
    }:
        return False
    changed = made.get(body)
    if type(changed) is not dict or type(changed.get(text)) is not str:
        return False
    if body == "function":
        json.loads(changed[text])  # still JSON
    return bool(given.get(body, {}).get("name") == changed.get("name"))


def changes(messages: list[Any], prompt: list[Any], seen: Counter[str]) -> list[str]:
    """What in ``prompt`` is neither a given message, nor a rewrite of one, nor a notice;
    the given ones in order."""
    wrong: list[str] = []
    at = 0  # the given messages are consumed in order
    for made in prompt:
        found = next((k for k in range(at, len(messages)) if messages[k] is made), None)
        if found is not None:
            at = found + 1
            continue
        rewritten = next(
            (k for k in range(at, len(messages)) if _is_rewrite(messages[k], made)), None
        )
        if rewritten is not None:
            at = rewritten + 1
            _note(seen, f"{made['role']} rewritten")
            continue
        notice = type(made) is dict and made.get("role") in ("user", "system")
        if notice and _text_of(made.get("content")) is not None:
            seen["notice"] += 1
            continue
        wrong.append(repr(made)[:200])
    return wrong


def _entries(messages: list[Any]) -> list[Any]:
    """The ``tool_calls`` entries (dicts) of the assistant messages."""
    found = []
    for m in messages:
        calls = m.get("tool_calls") if type(m) is dict and m.get("role") == "assistant" else None
        found += [e for e in (calls if type(calls) is list else ()) if type(e) is dict]
    return found


def _shared_ids(messages: list[Any]) -> set[str]:
    """The ids that calls of both kinds have (in one message or in two)."""
    kinds: dict[str, set[Any]] = {}
    for m in messages:
        calls = m.get("tool_calls") if type(m) is dict and m.get("role") == "assistant" else None
        for entry in calls if type(calls) is list else ():
            kinds.setdefault(_key(entry.get("id")), set()).add(entry.get("type"))
    return {ident for ident, found in kinds.items() if len(found) > 1}


def _facts(messages: list[Any], prompt: list[Any], hostile: set[str], seen: Counter[str]) -> None:
    kept = {id(m) for m in prompt}
    kept_ids = {
        _key(m.get("tool_call_id")) for m in prompt if type(m) is dict and m.get("role") == "tool"
    }
    for m in messages:
        answer = type(m) is dict and m.get("role") == "tool"
        if answer and id(m) not in kept and _key(m.get("tool_call_id")) not in kept_ids:
            _note(seen, "pair dropped")
    if hostile & {"shared_kinds", "shared_kinds_across"}:
        seen["shared id reached"] += 1
        if not same(messages, prompt):
            _note(seen, "shared id with a changed prompt")
    inputs: dict[str, set[Any]] = {}  # the inputs given to the custom calls of each id
    for entry in _entries(messages):
        if entry.get("type") == "custom" and type(entry.get("custom")) is dict:
            inputs.setdefault(_key(entry.get("id")), set()).add(repr(entry["custom"].get("input")))
    for m in messages:
        answer = type(m) is dict and m.get("role") == "tool"
        if answer and id(m) not in kept and _key(m.get("tool_call_id")) in inputs:
            _note(seen, "custom pair shortened or dropped")
    for entry in _entries(prompt):
        given = inputs.get(_key(entry.get("id")), set())
        custom = entry.get("custom")
        if given and type(custom) is dict and repr(custom.get("input")) not in given:
            _note(seen, "custom input shortened")
    shared = _shared_ids(messages)
    for m in messages:  # a pair of a shared id shortened or dropped
        answer = type(m) is dict and m.get("role") == "tool"
        if answer and id(m) not in kept and _key(m.get("tool_call_id")) in shared:
            _note(seen, "shared id pair shortened or dropped")


def check_prompt(messages: list[Any], prompt: list[Any], seen: Counter[str]) -> None:
    broken, given = chat_rules(prompt), chat_rules(messages)
    for (kind, ident), count in list(broken.items()):
        # a group that broke the rules, left last when all after it is dropped: the same
        # call unanswered, now at the end
        if kind == "call pending at the end" and given["call not answered", ident]:
            broken["call not answered", ident] += count
            del broken[kind, ident]
    assert broken - given == Counter(), broken - given
    assert changes(messages, prompt, seen) == []


def test_chat_mixed_kinds_and_shared_ids_stay_valid() -> None:
    seen: Counter[str] = Counter()

    @SETTINGS
    @given(data=st.data(), strategy=st.sampled_from(STRATEGIES))
    def check(data: st.DataObject, strategy: str | None) -> None:
        messages, hostile = conversation(data)
        config = configuration(data, strategy)
        snapshot = copy.deepcopy(messages)
        options: dict[str, Any] = {"format": "openai-chat", "config": config}
        prepared = scoutd.prepare(messages, strategy, **options).messages  # (a)
        assert same(messages, snapshot)  # (d)
        if not hostile:
            assert (
                chat_rules(messages)
                - Counter(
                    {
                        k: v
                        for k, v in chat_rules(messages).items()
                        if k[0] == "call pending at the end"
                    }
                )
                == Counter()
            )  # the drawing is valid
        check_prompt(messages, prepared, seen)  # (b), (c)
        _facts(messages, prepared, hostile, seen)
        seen["hostile" if hostile else "plain"] += 1
        seen.update(f"hostile: {kind}" for kind in hostile)
        for _ in session_rounds(messages, "openai-chat", strategy, config):  # (e)
            pass
        assert same(messages, snapshot)

    check()
    # about a third of what the fixed examples (derandomize) reach: the floors only
    # stop the test from passing on nothing. The examples follow from this test's
    # source: an edit may leave a late kind of HOSTILE unreached (sampled_from favours
    # the first ones); weight it in HOSTILE then, never lower its floor.
    floors = {
        "pair dropped": 15,
        "tool rewritten": 12,
        "assistant rewritten": 8,
        "hostile": 25,
        "hostile: shared_kinds": 12,
        "hostile: shared_kinds_across": 10,
        "hostile: function_twice_same_id": 5,
        "shared id with a changed prompt": 6,
        "shared id pair shortened or dropped": 4,
        "custom pair shortened or dropped": 45,
        "custom input shortened": 30,
    } | {f"hostile: {kind}": 1 for kind in HOSTILE}
    assert all(seen[name] >= floor for name, floor in floors.items()), seen


def _function(ident: str) -> Message:
    return {"id": ident, "type": "function", "function": {"name": "read", "arguments": "{}"}}


def _custom(ident: str) -> Message:
    return {"id": ident, "type": "custom", "custom": {"name": "apply_patch", "input": "p"}}


def _group(entries: list[Message], *answers: tuple[str, str]) -> list[Message]:
    assistant: Message = {"role": "assistant", "content": None, "tool_calls": entries}
    return [assistant, *({"role": "tool", "tool_call_id": i, "content": t} for i, t in answers)]


def _shared_id_conversation(across: bool) -> list[Message]:
    """Two old function pairs, a function and a custom call sharing ``X`` (in one
    message, or the custom one first and the function one in a later message),
    then a newer function pair; every output long."""
    long = "x" * 3_000
    messages: list[Message] = [{"role": "user", "content": "go"}]
    for ident in ("a1", "a2"):
        messages += _group([_function(ident)], (ident, long))
    if across:
        messages += _group([_custom("X")], ("X", "C" + long))
        messages += _group([_function("X")], ("X", "F" + long))
    else:
        messages += _group([_function("X"), _custom("X")], ("X", "F" + long), ("X", "C" + long))
    return messages + _group([_function("c1")], ("c1", long))


def test_a_function_and_a_custom_call_sharing_an_id_keep_their_answers() -> None:
    """The Responses defect's case in Chat: every strategy leaves each kept call with
    its answers and each answer with its call."""
    configs: list[tuple[str | None, dict[str, Any]]] = [
        (None, {"context_window": 1_500}),
        (None, {"context_window": 3_000}),
        ("shorten_tools", {"max_tool_calls": 1, "full_tool_outputs": 1, "max_tool_chars": 0}),
        (
            "shorten_tools_epoch",
            {"epoch_tool_call_threshold": 2, "epoch_full_tool_calls": 1, "epoch_size": 1},
        ),
    ]
    for across in (False, True):
        messages = _shared_id_conversation(across)
        for strategy, config in configs:
            prompt = scoutd.prepare(
                messages, strategy, format="openai-chat", config=config
            ).messages
            assert chat_rules(prompt) == Counter(), (across, strategy, prompt)
            assert changes(messages, prompt, Counter()) == [], (across, strategy)


def test_the_checker_sees_a_broken_pairing() -> None:
    """:func:`chat_rules` finds an answer without its call, a call without its answer,
    an answer after a user message and a lone ``function`` message."""
    messages = _shared_id_conversation(False)
    assert chat_rules(messages) == Counter()
    assert chat_rules([messages[0], messages[2]]) == Counter(
        {("tool message without its group", "'a1'"): 1}
    )
    assert chat_rules(messages[:2] + messages[3:]) == Counter({("call not answered", "'a1'"): 1})
    user = {"role": "user", "content": "wait"}
    assert chat_rules([messages[1], user, messages[2]]) == Counter(
        {("call not answered", "'a1'"): 1, ("tool message without its group", "'a1'"): 1}
    )
    assert chat_rules([{"role": "function", "name": "f", "content": "x"}]) == Counter(
        {("function message without its call", "f"): 1}
    )
    shared = messages[5:8]  # one id, two calls, two answers: well formed
    assert chat_rules(shared) == Counter()
    assert chat_rules([*shared, shared[2]]) == Counter(
        {("tool message answering no call", "'X'"): 1}
    )
    assert chat_rules(shared[:2]) == Counter({("call pending at the end", "'X'"): 1})


# Regression (found by the property above): when no tool message of the view
# remained (every function pair dropped, what is left passed through: custom or
# legacy calls), the default strategy appended its notice after every message,
# so after an assistant message whose calls still wait for their answers at the
# end; the agent's answers then came after a user message, which the API refuses.


def _pending_after_passthrough() -> list[Message]:
    """An old function pair, a custom call's group (passed through, too big for the
    window), then a function call still waiting for its answer."""
    messages: list[Message] = [{"role": "user", "content": "go"}]
    messages += _group([_function("a1")], ("a1", "x" * 3_000))
    messages += _group([_custom("c1")], ("c1", "y" * 6_000))
    return messages + _group([_function("b1")])


def test_the_notice_never_comes_between_calls_still_waiting_and_their_answers() -> None:
    """Regression: the notice came last, after ``b1``'s assistant message."""
    messages = _pending_after_passthrough()
    config = {"context_window": 1_500}
    prompt = scoutd.prepare(messages, format="openai-chat", config=config).messages
    assert chat_rules(prompt) == Counter({("call pending at the end", "'b1'"): 1})
    assert prompt[-1] is messages[-1]
    assert changes(messages, prompt, Counter()) == []
    answered = [*prompt, {"role": "tool", "tool_call_id": "b1", "content": "ok"}]
    assert chat_rules(answered) == Counter()  # the agent's answer goes right after its call
    with scoutd.Session(format="openai-chat", config=config) as session:
        assert same(session.prepare_prompt(messages), prompt)


def test_the_notice_never_comes_between_parallel_calls_and_their_last_answers() -> None:
    """Regression: two parallel calls, one answered so far: the notice came after
    that answer, before the other's."""
    messages = _pending_after_passthrough()[:-1]
    messages += _group([_function("b1"), _function("b2")], ("b1", "ok"))
    prompt = scoutd.prepare(messages, format="openai-chat", config={"context_window": 1_500})
    assert chat_rules(prompt.messages) == Counter({("call pending at the end", "'b2'"): 1})
    assert prompt.messages[-2:] == messages[-2:]
