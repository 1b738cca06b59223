"""The prepared prompts of the recorded real runs, held to recorded sha256 digests.

Every real run (tests/support/real_runs.py: the shipped subset, and the full
set where it is) goes through every built-in strategy and the default chain,
in every format (OpenAI Chat, OpenAI Responses, Anthropic and the scout
view), two ways: a whole-conversation :func:`scoutd.prepare` at a few of its
model calls, and an in-process :class:`scoutd.Session` at every model call,
round by round. The canonical JSON of each prompt and its report is folded
into one sha256 per (run, format, strategy, way), compared with the digests
recorded in ``tests/data/byte_identity.json``: a restructure of the engine
must leave every output byte-identical.

The digests ``shipped`` and ``full`` were recorded before the default kept
old outputs whole besides its bands (``cost_keep_share``, docs/ECONOMY.md):
they are checked with that key at 0 and ``cost_compacted_tool_calls`` at its
default of then (10), which give the former outputs byte for byte, so neither
the retention nor the new defaults can have changed anything else. The default's own
outputs (the cost-aware strategy and the default chain, every key at its
default) are recorded apart, as ``shipped-keep`` and ``full-keep``. ``full`` was
recorded again when a shortened call came to count what its rewrite sends
(docs/STRATEGIES.md): 8 of its 24 groups changed, the recorded Anthropic runs
under the cost-aware strategy with that older band; no digest of the
default's own changed. Every set was recorded again when an assistant turn's
thinking and reasoning came to count (docs/FORMATS.md): 57 digests changed,
the runs that send thinking or reasoning back (recorded Anthropic sessions,
and the OpenAI-format runs derived into those formats) under the strategies
that count, and the detailed reports' counts; and again when the last report
of a chain in scoutd's own format came to count the assistant remarks dropped
(``narration_dropped``; only those reports changed, 32 digests, not a prompt);
and again when a turn's text and thinking came to count with its newest pair
(25 digests: the detailed reports' row indices, and one Anthropic session
whose 4-call turn a compaction cut); and again when a Chat message's
``reasoning_content`` came to count (50 digests: the OpenAI-format runs that
send it back, one of them in the shipped subset, in the Chat and scout views,
under every strategy that counts, and the reports of ``none``). The default's
own digests were recorded again when a read piped into a search came to be
that search (docs/ECONOMY.md, "The default's retention") and the default's
``cost_keep_lookback`` became 47 instead of 50; ``full-keep`` again when a read
piped into a program that prints text of its own (``cat f | jq``) came to be
that program's call, not a read of the file (8 groups: one Anthropic session's prompts),
and when a test runner came to count only where a command runs it, not where a read or
a search names it (16 groups: one OpenAI-format run's prompts, in every format).
``full`` no longer holds the cost-aware strategy and the default chain at the former
settings (``FULL_STRATEGIES``): they are checked on the shipped subset.

Regenerate the digests (only when an output is meant to change) with
``python -m tests.test_byte_identity`` (``--full`` for the full set too;
naming sets, ``shipped-keep full-keep``, regenerates only those).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import sys
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import msgspec
import pytest

from scoutd import Session, prepare, write_notice
from scoutd.config import DEFAULT_STRATEGIES, Config, PromptConfig
from scoutd.formats import scout_view
from scoutd.testing.derive import to_anthropic, to_responses
from tests.formats.test_real_runs import call_points
from tests.support import real_runs

# Long (tests/conftest.py starts the tests marked slow first).
pytestmark = pytest.mark.slow

DIGESTS = Path(__file__).parent / "data" / "byte_identity.json"
STRATEGIES = (
    "none",
    "shorten_tools",
    "shorten_tools_epoch",
    "shorten_tools_epoch_increment",
    "shorten_tools_cost_aware",
    ",".join(DEFAULT_STRATEGIES),
)
FORMATS = ("openai-chat", "openai-responses", "anthropic", "scout")
ROUNDS = {"shipped": 1000, "full": 12}  # session rounds per run: all of the subset's
SAMPLES = 4  # whole-conversation prepares per run: evenly spread model calls, and the last
# The defaults, whatever the machine's environment, without the retention and with
# the shortened band of then (the recorded digests before it), and as they are
# (the default's own digests)
CONFIG = Config(prompt=PromptConfig(cost_keep_share=0.0, cost_compacted_tool_calls=10))
KEEP_CONFIG = Config(prompt=PromptConfig())
KEEP_STRATEGIES = ("shorten_tools_cost_aware", ",".join(DEFAULT_STRATEGIES))
# The full set at the former settings: the strategies those settings do not concern.
# The cost-aware strategy and the default chain are held to them on the shipped
# subset, and on the full set at today's defaults (full-keep): they took 24 s more of
# one process's CPU (40 s in the parallel suite) for settings that are no default now.
FULL_STRATEGIES = STRATEGIES[:4]
# name of a digest set -> (configuration, strategies, the set it replays)
SETS = {
    "shipped": (CONFIG, STRATEGIES, "shipped"),
    "full": (CONFIG, FULL_STRATEGIES, "full"),
    "shipped-keep": (KEEP_CONFIG, KEEP_STRATEGIES, "shipped"),
    "full-keep": (KEEP_CONFIG, KEEP_STRATEGIES, "full"),
}
NOTICE = "An operator notice: the build server restarts at noon."
_canonical = msgspec.json.Encoder(order="sorted")

Conversation = tuple[str, str, list[Any]]  # (label, format, messages)


def _read(directory: Path, kind: str) -> list[dict[str, Any]]:
    with gzip.open(directory / real_runs.FILES[kind], "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def conversations(directory: Path) -> Iterator[Conversation]:
    """Every run of ``directory`` in every format it can be written in."""
    derive: dict[str, Callable[[list[Any]], list[Any]]] = {
        "openai-chat": lambda m: m,
        "openai-responses": to_responses,
        "anthropic": to_anthropic,
        "scout": scout_view,
    }
    for number, run in enumerate(_read(directory, "openai")):
        for fmt in FORMATS:
            yield f"openai#{number}", fmt, derive[fmt](run["messages"])
    for number, run in enumerate(_read(directory, "anthropic")):
        yield f"anthropic#{number}", "anthropic", run["messages"]
        yield f"anthropic#{number}", "scout", scout_view(run["messages"])


def _points(fmt: str, messages: list[Any]) -> list[int]:
    provider = "openai-chat" if fmt == "scout" else fmt
    return call_points(provider, messages) or [len(messages)]


def _without_reasons(report: list[Any]) -> list[Any]:
    """The report less its reasons (docs/STRATEGIES.md, "Why: the reasons"): sentences
    added after the digests were recorded, which change no prompt and no count."""
    entries: list[Any] = msgspec.to_builtins(report)
    for entry in entries:
        entry.pop("reason", None)
        for action in entry.get("actions") or ():
            action.pop("reason", None)
            action.pop("why", None)
    return entries


def _fold(digest: Any, prepared: Any) -> None:
    report = _without_reasons(prepared.report)
    digest.update(_canonical.encode({"messages": prepared.messages, "report": report}))


def _prepare_digest(
    fmt: str, messages: list[Any], names: str, save_file: str, rounds: int, config: Config
) -> str:
    points = _points(fmt, messages)
    step = max(1, len(points) // SAMPLES)
    sampled = sorted({*points[step - 1 :: step][:SAMPLES], points[-1]})
    digest = hashlib.sha256()
    for number, end in enumerate(sampled):
        if number == 1:
            write_notice(save_file, NOTICE, name="notice.txt")
        _fold(digest, prepare(messages[:end], names, save_file=save_file, config=config))
        _fold(digest, prepare(messages[:end], names, config=config, detail=True))
    return digest.hexdigest()


def _session_digest(
    fmt: str, messages: list[Any], names: str, save_file: str, rounds: int, config: Config
) -> str:
    points = _points(fmt, messages)
    if len(points) > rounds:  # every model call, or as many spread evenly, and the last
        stride = -(-len(points) // rounds)
        points = sorted({*points[stride - 1 :: stride], points[-1]})
    digest = hashlib.sha256()
    with Session(save_file, strategies=names, config=config, cache_control=True) as session:
        for number, end in enumerate(points):
            if number == len(points) // 2:
                write_notice(save_file, NOTICE, name="notice.txt")
            _fold(digest, session.prepare(messages[:end]))
    return digest.hexdigest()


WAYS = {"prepare": _prepare_digest, "session": _session_digest}


def digests(
    directory: Path,
    scratch: Path,
    rounds: int,
    name: str = "shipped",
    only: tuple[str, ...] | None = None,
) -> dict[str, str]:
    """Every digest of ``directory``'s runs, keyed ``label/format/strategies/way``.

    A session runs at most ``rounds`` rounds (plus the last model call);
    ``name``: the digest set (:data:`SETS`), which gives the configuration
    and the strategies; ``only``: those of its strategies (all when None).
    """
    config, strategies, _ = SETS[name]
    strategies = strategies if only is None else only
    found: dict[str, str] = {}
    for number, (label, fmt, messages) in enumerate(conversations(directory)):
        for names in strategies:
            for way, compute in WAYS.items():
                chat = scratch / f"{number}-{names}-{way}" / "chat.json"
                chat.parent.mkdir(parents=True)
                found[f"{label}/{fmt}/{names}/{way}"] = compute(
                    fmt, messages, names, str(chat), rounds, config
                )
    return found


@cache
def recorded() -> dict[str, dict[str, str]]:
    return json.loads(DIGESTS.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def grouped(found: dict[str, str]) -> dict[str, str]:
    """The full set's digests folded per ``source/format/strategies/way``: a small file."""
    groups: dict[str, Any] = {}
    for key in sorted(found):
        label, rest = key.split("/", 1)
        name = f"{label.split('#')[0]}/{rest}"
        groups.setdefault(name, hashlib.sha256()).update(found[key].encode())
    return {name: digest.hexdigest() for name, digest in groups.items()}


def _compare(
    name: str, directory: Path, scratch: Path, only: tuple[str, ...] | None = None
) -> None:
    """Replay set ``name`` (``only`` those strategies) and compare with its recorded digests."""
    expected = recorded()[name]
    if only is not None:
        expected = {k: v for k, v in expected.items() if k.split("/")[2] in only}
        assert expected, f"no recorded digest of {only} in {name}"
    source = SETS[name][2]
    actual = digests(directory, scratch, ROUNDS[source], name, only)
    if source == "full":
        actual = grouped(actual)
    assert actual.keys() == expected.keys()
    changed = sorted(key for key in expected if actual[key] != expected[key])
    assert changed == [], f"{len(changed)} of {len(expected)} outputs changed: {changed[:10]}"


@pytest.mark.parametrize("name", ["shipped", "shipped-keep"])
def test_the_shipped_runs_prepare_as_recorded(name: str, tmp_path: Path) -> None:
    _compare(name, real_runs.VENDORED, tmp_path)


# The full set is checked in two modules (this one: full; test_byte_identity_full.py:
# full-keep), so that a parallel run spreads its minute of CPU over two workers.


@pytest.mark.skipif(real_runs.full_dir() is None, reason="the full set of real runs is absent")
@pytest.mark.timeout(900)  # under a minute of CPU, longer on a shared machine
def test_the_full_set_prepares_as_recorded(tmp_path: Path) -> None:
    full = real_runs.full_dir()
    assert full is not None
    _compare("full", full, tmp_path)


def _record(full: bool) -> None:  # pragma: no cover - run by hand to regenerate
    import tempfile

    directories = {"shipped": real_runs.VENDORED}
    where = real_runs.full_dir()
    if full and where is not None:
        directories["full"] = where
    only = [a for a in sys.argv[1:] if a in SETS]  # e.g. shipped-keep: only those sets
    kept = json.loads(DIGESTS.read_text(encoding="utf-8")) if DIGESTS.exists() else {}
    for name, (_, _, source) in SETS.items():  # no configuration file or variable is read
        if source not in directories or (only and name not in only):
            continue
        with tempfile.TemporaryDirectory() as scratch:
            found = digests(directories[source], Path(scratch), ROUNDS[source], name)
            kept[name] = grouped(found) if source == "full" else found
    DIGESTS.write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":  # pragma: no cover
    _record("--full" in sys.argv[1:])
