"""Which chats a command reaches: the pure rules (selectors, globs, the roots' boundary)."""

from __future__ import annotations

import msgspec
import pytest

from scoutd.fleet.select import (
    Identity,
    TargetError,
    chats_for,
    check_pattern,
    glob_matches,
    parse_target,
    within,
)
from scoutd.fleet.wire import (
    MAX_ISSUED,
    MAX_PATTERN_PARTS,
    MAX_TEXT_BYTES,
    Command,
    SessionView,
    decode_command,
    encode,
    new_command_id,
)

ME = Identity(host="h1", labels=("gpu", "team-a"), roots=("/srv/agents",))
SESSIONS = [
    SessionView(id="s1", save_file="/srv/agents/a/one.chat"),
    SessionView(id="s2", save_file="/srv/agents/b/two.chat", label="job-42"),
    SessionView(id="s3", save_file="/elsewhere/three.chat", label="job-42"),  # outside the roots
    SessionView(id="s4", save_file="/srv/agents/c/four.chat", label="job-42"),
]


def command(selector: str, value: str = "", kind: str = "notice") -> Command:
    return Command(id=new_command_id(), kind=kind, selector=selector, value=value, text="hello")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("selector", "value", "expected"),
    [
        (
            "all",
            "",
            ["/srv/agents/a/one.chat", "/srv/agents/b/two.chat", "/srv/agents/c/four.chat"],
        ),
        (
            "host",
            "h1",
            ["/srv/agents/a/one.chat", "/srv/agents/b/two.chat", "/srv/agents/c/four.chat"],
        ),
        ("host", "h2", []),
        ("host", "h*", []),  # a host name is matched exactly, never as a pattern
        (
            "label",
            "gpu",
            ["/srv/agents/a/one.chat", "/srv/agents/b/two.chat", "/srv/agents/c/four.chat"],
        ),
        ("label", "team-b", []),
        ("session", "s2", ["/srv/agents/b/two.chat"]),  # by its id
        ("session", "job-42", ["/srv/agents/b/two.chat", "/srv/agents/c/four.chat"]),  # label
        ("session", "job-4*", []),  # a label is matched exactly
        ("session", "s3", []),  # open here, but outside the roots
        ("chat", "/srv/agents/a/*.chat", ["/srv/agents/a/one.chat"]),
        (
            "chat",
            "/srv/agents/*/*.chat",
            ["/srv/agents/a/one.chat", "/srv/agents/b/two.chat", "/srv/agents/c/four.chat"],
        ),
        ("chat", "/*/three.chat", []),
        ("chat", "/srv/agents/*.chat", []),  # '*' does not cross '/'
    ],
)
def test_each_selector_reaches_its_chats_inside_the_roots(
    selector: str, value: str, expected: list[str]
) -> None:
    assert chats_for(command(selector, value), ME, SESSIONS, limit=100) == expected


def test_chats_found_on_disk_are_held_to_the_pattern_and_the_roots() -> None:
    found = ["/srv/agents/c/idle.chat", "/elsewhere/x/idle.chat", "/srv/agents/c/other.txt"]
    chats = chats_for(command("chat", "/*/*/*/idle.chat"), ME, SESSIONS, found, limit=100)
    assert chats == ["/srv/agents/c/idle.chat"]


def test_a_command_reaches_at_most_limit_chats() -> None:
    assert chats_for(command("all"), ME, SESSIONS, limit=2) == [
        "/srv/agents/a/one.chat",
        "/srv/agents/b/two.chat",
    ]


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("all", ("all", "")),
        ("host=web-1", ("host", "web-1")),
        ("label=gpu", ("label", "gpu")),
        ("session=abc", ("session", "abc")),
        ("chat=/srv/*.chat", ("chat", "/srv/*.chat")),
        ("chat=/srv//./a/*.chat", ("chat", "/srv/a/*.chat")),  # spelt as paths are
    ],
)
def test_targets_parse(text: str, parsed: tuple[str, str]) -> None:
    assert parse_target(text) == parsed


@pytest.mark.parametrize(
    "text",
    [
        "",
        "everyone",
        "host=",
        "all=x",
        "colour=red",
        "chat=relative/*.chat",
        "chat=/srv/../etc/*.chat",
        "chat=/srv/\0x",
        "chat=" + "/*" * (MAX_PATTERN_PARTS + 1),
    ],
)
def test_bad_targets_are_refused(text: str) -> None:
    with pytest.raises(TargetError):
        parse_target(text)


def test_globs_match_component_by_component() -> None:
    assert glob_matches("/a/*/c.chat", "/a/b/c.chat")
    assert not glob_matches("/a/*", "/a/b/c.chat")
    assert glob_matches("/a/[bx]/?.chat", "/a/x/c.chat")
    assert within("/srv/agents/a", ["/srv/agents"])
    assert not within("/srv/agents-evil/a", ["/srv/agents"])
    assert within("/anything", ["/"])


def test_a_host_decodes_only_commands() -> None:
    sent = command("label", "gpu", kind="abort")
    assert decode_command(encode(sent)) == sent
    for bad in (
        b'{"id": "x", "kind": "notice", "selector": "all", "text": "hi"}',  # not an id
        encode({**msgspec.to_builtins(sent), "kind": "exec"}),
        encode({**msgspec.to_builtins(sent), "run": "rm -rf /"}),  # unknown field
        encode({**msgspec.to_builtins(sent), "selector": "all"}),  # 'all' with a value
    ):
        with pytest.raises((msgspec.ValidationError, ValueError)):
            decode_command(bad)
    with pytest.raises(ValueError):
        Command(id=new_command_id(), kind="notice", selector="all", text="  ")
    with pytest.raises(ValueError):
        Command(id=new_command_id(), kind="abort", selector="all", text="x" * (1024 * 1024 + 1))


@pytest.mark.parametrize(
    "change",
    [
        {"selector": "chat", "value": "relative/*.chat"},
        {"selector": "chat", "value": "/srv/../etc/*.chat"},
        {"selector": "chat", "value": "/*" * 1000},
        {"issued": 1e300},
        {"issued": -1.0},
        {"issued": MAX_ISSUED * 1.01},
    ],
)
def test_a_host_refuses_at_decoding_what_it_could_not_apply(change: dict[str, object]) -> None:
    """Whoever published it: a chat glob the CLI would refuse, or an issue time no
    notice name can hold, is refused when the entry is read (an error receipt)."""
    sent = msgspec.to_builtins(command("all"))
    sent.pop("value")
    with pytest.raises((msgspec.ValidationError, ValueError)):
        decode_command(encode({**sent, **change}))


def test_whatever_a_host_writes_encodes() -> None:
    """A path with an undecodable byte goes out escaped, never an encoding error."""
    text = encode(SessionView(id="s1", save_file="/srv/\udcff.chat"))
    assert msgspec.json.decode(text)["save_file"] == "/srv/\\xff.chat"


def test_a_root_holds_itself_and_what_is_below_it_never_a_neighbour() -> None:
    assert within("/srv/agents", ["/srv/agents"])
    assert within("/srv/agents/a/b.chat", ["/srv/agents/"])  # a root spelt with its slash
    assert not within("/srv/agentsX/b.chat", ["/srv/agents"])
    assert not within("/srv/Y/b.chat", ["/srv/X"])  # nothing but the root's own name
    assert not within("/srv/b.chat", ["/srv/agents", "/srv/other"])
    assert within("/srv/other/b.chat", ["/srv/agents", "/srv/other"])


def test_a_value_keeps_every_equals_sign_after_the_first() -> None:
    assert parse_target("label=a=b") == ("label", "a=b")
    assert parse_target("chat=/srv/k=v/*.chat") == ("chat", "/srv/k=v/*.chat")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("colour=red", "target 'colour=red': all, host=NAME, label=NAME, chat=GLOB or session=ID"),
        ("chat=srv/*.chat", "chat pattern 'srv/*.chat' is not an absolute path"),
        ("chat=/a/../b", "chat pattern '/a/../b' holds '..' or a NUL"),
        (
            "chat=" + "/a" * (MAX_PATTERN_PARTS + 1),
            f"chat pattern has over {MAX_PATTERN_PARTS} components",
        ),
    ],
)
def test_a_refused_target_says_why(text: str, words: str) -> None:
    with pytest.raises(TargetError) as raised:
        parse_target(text)
    assert str(raised.value) == words


def test_a_pattern_may_have_as_many_components_as_allowed_and_no_more() -> None:
    deepest = "/a" * MAX_PATTERN_PARTS
    check_pattern(deepest)
    assert parse_target("chat=" + deepest) == ("chat", deepest)
    with pytest.raises(TargetError):
        check_pattern(deepest + "/a")


def test_a_command_text_may_be_as_long_as_allowed_and_each_refusal_says_why() -> None:
    longest = "é" * (MAX_TEXT_BYTES // 2)  # counted in bytes, not characters
    assert Command(id=new_command_id(), kind="notice", selector="all", text=longest).text
    refusals = [
        (
            {"kind": "abort", "selector": "all", "text": longest + "x"},
            f"text is over {MAX_TEXT_BYTES} bytes",
        ),
        ({"kind": "notice", "selector": "all", "text": " \n"}, "a notice needs a text"),
        (
            {"kind": "abort", "selector": "host"},
            "selector 'all' takes no value; every other selector needs one",
        ),
        (
            {"kind": "abort", "selector": "all", "value": "x"},
            "selector 'all' takes no value; every other selector needs one",
        ),
    ]
    for fields, words in refusals:
        with pytest.raises(ValueError) as raised:
            Command(id=new_command_id(), **fields)  # type: ignore[arg-type]
        assert str(raised.value) == words
