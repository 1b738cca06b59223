"""The simulator's cache models, peer emulations, runs files and progress bar."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from scoutd.simulate import (
    PRESETS,
    CacheModel,
    CacheSettings,
    Prices,
    Settings,
    Workload,
    main,
    mask_last_n,
    run_strategy,
)
from scoutd.simulate.cache import segment_text
from scoutd.simulate.peers import (
    MASK_PLACEHOLDER,
    SUMMARISER_EVENT_CHARS,
    SUMMARISER_PROMPT_CHARS,
    SummaryState,
    summarize,
)
from scoutd.simulate.progress import Progress
from scoutd.simulate.provider import provider_rounds
from scoutd.simulate.runners import PeerSettings, SummarizeRunner, make_runner, side_cost
from scoutd.simulate.runs import bucket_of

FLAT = Prices(1.0, 1.25, 0.1)


def pairs(count: int, size: int = 400) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "s" * 8000}]
    for number in range(count):
        ident = f"c{number}"
        call = {"name": "read", "arguments": {"n": number}, "id": ident}
        output = {"name": "read", "content": f"{number}\n" + "o" * size, "id": ident}
        messages.append({"role": "function_call", "content": json.dumps(call)})
        messages.append({"role": "function_call_output", "content": json.dumps(output)})
    return messages


def segments(texts: list[str]) -> list[str]:
    return [t + "\n" for t in texts]


# --- cache models --------------------------------------------------------------


def test_breakpoints_read_only_up_to_an_earlier_prompt_end() -> None:
    """A change in the middle loses the cache back to the fixed breakpoint, not to the change."""
    head = "h" * 8000
    body = ["m" * 4000 for _ in range(6)]
    prefix = CacheModel(FLAT, CacheSettings(1, 1024, model="prefix"))
    breakpoints = CacheModel(FLAT, CacheSettings(1, 1024, model="breakpoints"))
    first = segments([head, *body])
    second = segments([head, *body[:3], "changed" * 500, *body[4:]])
    for model in (prefix, breakpoints):
        model.step(first)
    by_prefix = prefix.step(second)
    by_breakpoints = breakpoints.step(second)
    assert by_prefix.cached_tokens > by_breakpoints.cached_tokens
    assert by_breakpoints.cached_tokens == 2000  # the fixed breakpoint after the first message


def test_breakpoints_find_an_entry_within_the_lookback_only() -> None:
    head = "h" * 8000
    grown = [head] + ["x" * 100 for _ in range(30)]
    near = CacheModel(FLAT, CacheSettings(1, 1024, model="breakpoints", lookback=40))
    far = CacheModel(FLAT, CacheSettings(1, 1024, model="breakpoints", lookback=20))
    for model in (near, far):
        model.step(segments(grown[:2]))
    assert near.step(segments(grown)).cached_tokens > 2000  # reached the first prompt's end
    assert far.step(segments(grown)).cached_tokens == 2000  # only the fixed breakpoint


def test_an_expired_cache_is_written_again() -> None:
    prompt = segments(["p" * 8000, "q" * 8000])
    model = CacheModel(FLAT, CacheSettings(1, 1024, ttl=300.0))
    model.step(prompt, now=0.0)
    assert model.step(prompt, now=200.0).cached_tokens == 4000
    stale = model.step(prompt, now=600.0)
    assert stale.cached_tokens == 0 and stale.written_tokens == stale.prompt_tokens


def test_whole_messages_cache_no_partial_message() -> None:
    model = CacheModel(FLAT, CacheSettings(1, 1024, whole_messages=True))
    model.step(segments(["a" * 8000, "b" * 8000]))
    again = model.step(segments(["a" * 8000, "b" * 7999 + "c"]))
    assert again.cached_tokens == 2000


# --- peers ---------------------------------------------------------------------


def test_mask_polling_moves_the_window_in_steps() -> None:
    messages = pairs(23)
    masked = mask_last_n(messages, 10, polling=5)
    placeholders = [m for m in masked if "Old environment output" in m["content"]]
    assert len(placeholders) == 10  # (23 // 5) * 5 - 10
    assert MASK_PLACEHOLDER.startswith("Old environment output:")


def test_clear_tool_uses_stateless_recomputes_from_the_full_history() -> None:
    messages = pairs(40, size=2000)
    stateless = make_runner("clear_tool_uses", PeerSettings(clear_trigger=5000, clear_keep=3))
    sticky = make_runner(
        "clear_tool_uses", PeerSettings(clear_trigger=5000, clear_keep=3, clear_mode="sticky")
    )
    ends = [i + 1 for i, m in enumerate(messages) if m["role"] == "function_call_output"]
    for end in ends:
        a, b = stateless(messages[:end]), sticky(messages[:end])
    cleared = [m for m in a if "cleared to save context" in m["content"]]
    assert len(cleared) == 37  # every result but the last 3, on every request
    assert len([m for m in b if "cleared to save context" in m["content"]]) >= 1


def test_summarize_rolls_over_in_batches() -> None:
    messages = pairs(100)
    state = SummaryState()
    sizes = []
    for end in range(2, len(messages) + 1):
        view = summarize(messages[:end], state, max_size=120, keep_first=4)
        sizes.append(len(view))
        assert len(view) <= 121
        assert view[-1] is messages[end - 1]
        first_kept = view[5] if state.number else None
        assert first_kept is None or first_kept["role"] != "function_call_output"
    assert state.number >= 2  # 201 messages: at least two condensations
    assert min(sizes[150:]) >= 55  # it never shrinks below about half the maximum
    read, written = state.take_unbilled_chars()
    assert read > 0 and written == 2000 * state.number
    assert state.take_unbilled_chars() == (0, 0)


def test_the_summarisers_calls_are_billed_as_a_provider_bills_them() -> None:
    """Its instructions, the forgotten messages and the previous summary as uncached
    input; the summary it writes at the output price (5x input at Anthropic)."""
    messages = pairs(100)
    runner = SummarizeRunner(PeerSettings())
    forgotten: list[Any] = []
    for end in range(2, len(messages) + 1):
        before = runner.state.start or 4
        runner(messages[:end])
        if runner.state.number == 1 and not forgotten:
            forgotten = messages[before : runner.state.start]
            break
    assert forgotten
    read = SUMMARISER_PROMPT_CHARS + sum(
        len(segment_text(m)) + SUMMARISER_EVENT_CHARS for m in forgotten
    )
    prices = PRESETS["anthropic"][0]
    assert prices.output == 5.0 and PRESETS["openai"][0].output == 4.0
    expected = (read * prices.input + 2000 * prices.output) / 4.0
    assert side_cost(runner, prices, 4.0) == pytest.approx(expected)
    assert side_cost(runner, prices, 4.0) == 0.0  # billed once


# --- runs files and the progress bar -----------------------------------------------


def openai_run(calls: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "sys " * 1000},
        {"role": "user", "content": "task"},
    ]
    for number in range(calls):
        ident = f"call_{number}"
        function = {"name": "bash", "arguments": json.dumps({"command": f"ls {number}"})}
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": ident, "type": "function", "function": function}],
            }
        )
        messages.append({"role": "tool", "tool_call_id": ident, "content": "z" * 3000})
    return messages


def test_provider_rounds_are_the_model_calls() -> None:
    messages = openai_run(3)
    assert provider_rounds(messages) == [2, 4, 6, 8]


def test_an_item_whose_type_is_not_a_string_is_no_model_turn() -> None:
    """A recorded item with a list or object ``type`` is compared, never hashed."""
    odd = [{"type": ["reasoning"]}, {"type": {"a": 1}}, {"role": "assistant", "content": "x"}]
    assert provider_rounds([{"role": "user", "content": "go"}, *odd]) == [3, 4]


def test_runs_file_prints_rows_and_buckets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "runs.jsonl.gz"
    with gzip.open(path, "wt") as handle:
        for calls in (12, 30):
            handle.write(json.dumps({"messages": openai_run(calls)}) + "\n")
    code = main(["--runs", str(path), "--strategies", "shorten_tools_cost_aware", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [r["outputs"] for r in data["runs"]] == [12, 30]
    assert {r["format"] for r in data["runs"]} == {"openai-chat"}
    default = data["runs"][0]["strategies"]["shorten_tools_cost_aware"]
    assert default["default"] is True and default["ratio"] == pytest.approx(1.0)
    buckets = {(a["bucket"], a["strategy"]) for a in data["aggregate"]}
    assert ("1-25", "none") in buckets and ("all", "shorten_tools_cost_aware") in buckets
    assert bucket_of(150) == "101-150" and bucket_of(151) == "151+"


def test_a_bad_runs_file_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"no": "messages"}\n')
    assert main(["--runs", str(path)]) == 1
    assert "no 'messages' list" in capsys.readouterr().err


def test_a_corrupt_gzip_runs_file_is_an_error_not_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A gzip stream whose deflate data is damaged raises ``zlib.error`` (no ``OSError``):
    it is a file that cannot be read, said so, exit 1."""
    data = bytearray(gzip.compress((json.dumps({"messages": openai_run(3)}) + "\n").encode()))
    data[30] ^= 0xFF
    data[40] ^= 0xFF
    path = tmp_path / "corrupt.jsonl.gz"
    path.write_bytes(bytes(data))
    assert main(["--runs", str(path)]) == 1
    assert "cannot read runs" in capsys.readouterr().err


def test_a_run_that_bills_nothing_has_no_ratio(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run with no messages bills nothing under ``none``: its ratio is shown as ``-``."""
    path = tmp_path / "empty.jsonl"
    path.write_text('{"messages": []}\n' + json.dumps({"messages": openai_run(3)}) + "\n")
    assert main(["--runs", str(path), "--strategies", "shorten_tools_cost_aware"]) == 0
    rows = capsys.readouterr().out.splitlines()
    header = rows.index(next(r for r in rows if r.split()[:2] == ["run", "format"]))
    assert rows[header + 1].split() == ["1", "scout", "0", "-", "-"]


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_bar_draws_on_a_terminal_only() -> None:
    terminal, pipe = FakeTerminal(), io.StringIO()
    for stream in (terminal, pipe):
        bar = Progress(4, "replaying", stream=stream, delay=0.0)
        bar.update(2)
        bar.close()
    assert "[" in terminal.getvalue() and "2/4" in terminal.getvalue()
    assert pipe.getvalue() == ""
    quiet = FakeTerminal()
    Progress(4, "replaying", stream=quiet, delay=3600.0).update(1)
    assert quiet.getvalue() == ""  # a quick run never shows it


# --- retention ------------------------------------------------------------------


def test_mean_verbatim_averages_the_verbatim_count_over_every_round() -> None:
    """``none`` keeps every output of round r (r of them); ``mask_last_n`` the last 10."""
    workload = Workload(pairs(30), "pairs", {})
    none = run_strategy(workload, "none", Settings(), keep_series=False)
    assert none.retention.mean_verbatim == pytest.approx(sum(range(1, 31)) / 30)
    masked = run_strategy(workload, "mask_last_n", Settings(), keep_series=False)
    assert masked.retention.verbatim == 10
    assert masked.retention.mean_verbatim == pytest.approx(
        sum(min(r, 10) for r in range(1, 31)) / 30
    )


def test_a_runs_file_name_is_shown_escaped(tmp_path: Path) -> None:
    """A name with an escape sequence and a newline reached the terminal raw."""
    name = tmp_path / "x\x1b[31mRED\nforged.jsonl"
    result = subprocess.run(
        [sys.executable, "-m", "scoutd", "simulate", "--runs", str(name)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "\x1b" not in result.stderr, result.stderr
    assert "x\\x1b[31mRED\\x0aforged.jsonl" in result.stderr
