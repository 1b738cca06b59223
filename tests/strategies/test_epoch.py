"""The growing-epoch schedule of shorten_tools_epoch_increment (docs/STRATEGIES.md)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from scoutd import prepare_prompt
from scoutd.config import PromptConfig, resolve_config
from scoutd.strategies.epoch import Window, fixed_window, increment_window

from .conversations import agent_run
from .vectors import vector_params

DEFAULTS = PromptConfig()

# docs/STRATEGIES.md example (defaults, no repeats): (epoch start, size, compacted window)
WORKED_EXAMPLE = [
    (50, 20, 80), (70, 20, 80), (90, 20, 80),
    (110, 30, 100), (140, 30, 100), (170, 30, 100),
    (200, 40, 120), (240, 40, 120), (280, 40, 120),
    (320, 50, 140), (370, 50, 140), (420, 50, 140),
    (470, 60, 160), (530, 60, 160), (590, 60, 160),
]  # fmt: skip


def epochs(outputs: int, repeat_numbers: list[int], config: PromptConfig) -> Window:
    window = increment_window(outputs, repeat_numbers, config)
    assert window is not None
    return window


@pytest.mark.parametrize(("start", "size", "compacted"), WORKED_EXAMPLE)
def test_worked_example_epoch_boundaries(start: int, size: int, compacted: int) -> None:
    """Every N inside an epoch sees that epoch's start, size and compacted window."""
    for outputs in (start + 1, start + size // 2, start + size):
        window = epochs(outputs, [], DEFAULTS)
        assert (window.pinned, window.size) == (start, size)
        assert window.truncate_to - window.keep_full == compacted
        assert window.keep_full == outputs - start + DEFAULTS.epoch_full_tool_calls


def test_unchanged_at_or_below_threshold_and_degenerate_configs() -> None:
    assert increment_window(50, [], DEFAULTS) is None
    no_windows = msgspec.structs.replace(
        DEFAULTS, epoch_full_tool_calls=0, epoch_compacted_tool_calls=0
    )
    assert increment_window(500, [], no_windows) is None
    assert increment_window(500, [], msgspec.structs.replace(DEFAULTS, epoch_size=0)) is None


def test_repeat_in_first_epoch_extends_it_at_once_and_every_later_epoch() -> None:
    # Before the repeat exists, epoch 0 is 20 long.
    assert (epochs(54, [], DEFAULTS).pinned, epochs(54, [], DEFAULTS).size) == (50, 20)
    # From the moment output 55 repeats an earlier call, epoch 0 is 30 long (c = 100).
    window = epochs(60, [55], DEFAULTS)
    assert (window.pinned, window.size, window.truncate_to - window.keep_full) == (50, 30, 100)
    assert epochs(80, [55], DEFAULTS).pinned == 50
    # Later epochs are each 10 longer than without the repeat: 80, 110, then 140 (size 40).
    starts = sorted({epochs(n, [55], DEFAULTS).pinned for n in range(51, 181)})
    assert starts == [50, 80, 110, 140]
    assert epochs(180, [55], DEFAULTS).size == 40


def test_repeat_outside_the_nominal_part_extends_the_epoch_it_falls_in() -> None:
    # Output 75 lies past epoch 0's nominal end (70): epoch 0 stays 20, epoch 1 grows to 30.
    assert epochs(70, [75], DEFAULTS).size == 20
    window = epochs(76, [75], DEFAULTS)
    assert (window.pinned, window.size) == (70, 30)


def test_repeat_extensions_accumulate() -> None:
    # Two epochs with repeats: each adds dR to every later epoch.
    window = epochs(85, [55, 85], DEFAULTS)
    assert (window.pinned, window.size) == (80, 40)
    later = epochs(121, [55, 85], DEFAULTS)
    assert (later.pinned, later.size) == (120, 40)


def test_compacted_growth_rounds_half_up() -> None:
    config = msgspec.structs.replace(
        DEFAULTS,
        epoch_increment_epochs_per_increase=1,
        epoch_increment_size_increase=1,
        epoch_increment_compacted_growth_ratio=0.5,
    )
    # Epoch 1 is 21 long: 1 extra call * 0.5 = 0.5, rounded half up to 1 (not to even, 0).
    window = epochs(71, [], config)
    assert (window.pinned, window.size) == (70, 21)
    assert window.truncate_to - window.keep_full == 81
    # Epoch 2 is 22 long: 2 * 0.5 = 1.
    assert epochs(92, [], config).truncate_to - epochs(92, [], config).keep_full == 81
    # Epoch 3 is 23 long: 1.5 rounds to 2.
    third = epochs(114, [], config)
    assert (third.pinned, third.size, third.truncate_to - third.keep_full) == (113, 23, 82)


def test_maxima_below_their_initial_value_do_not_shrink_the_window() -> None:
    config = msgspec.structs.replace(
        DEFAULTS,
        epoch_size=30,
        epoch_increment_max_size=10,
        epoch_increment_max_compacted_tool_calls=10,
    )
    for outputs in (81, 200, 1000):
        window = epochs(outputs, [], config)
        assert window.size == 30
        assert window.truncate_to - window.keep_full == 80


def test_maxima_cap_growth() -> None:
    capped = msgspec.structs.replace(DEFAULTS, epoch_increment_max_compacted_tool_calls=120)
    window = epochs(1000, [], capped)
    assert window.size == 60
    assert window.truncate_to - window.keep_full == 120
    assert epochs(10_000, [], DEFAULTS).size == 60
    assert epochs(10_000, [], DEFAULTS).truncate_to - epochs(10_000, [], DEFAULTS).keep_full == 160


def test_no_periodic_growth_when_epochs_per_increase_is_zero() -> None:
    config = msgspec.structs.replace(DEFAULTS, epoch_increment_epochs_per_increase=0)
    for outputs in range(51, 1000, 37):
        assert epochs(outputs, [], config) == fixed_window(outputs, config)


def _without_growth(environ: dict[str, str]) -> PromptConfig:
    return msgspec.structs.replace(
        resolve_config(environ=environ).prompt,
        epoch_increment_epochs_per_increase=0,
        epoch_increment_repeat_increase=0,
    )


@pytest.mark.parametrize(
    "case",
    [p for p in vector_params("strategy") if p.values[0]["strategy"] == "shorten_tools_epoch"],
)
def test_increment_walk_equals_the_epoch_vectors_when_schedules_coincide(
    case: dict[str, Any],
) -> None:
    """With no growth at all the increment strategy is shorten_tools_epoch, byte for byte."""
    config = _without_growth(case["config"])
    result = prepare_prompt(case["input"], "shorten_tools_epoch_increment", config=config)
    assert result == case["expected"]


@pytest.mark.parametrize("pairs", [49, 51, 75, 130, 400])
def test_increment_default_matches_fixed_epochs_in_its_first_three_epochs(pairs: int) -> None:
    """Up to output 110 the default schedule is the fixed one (sizes 20, c = 80)."""
    messages = agent_run(pairs)
    increment = prepare_prompt(messages, "shorten_tools_epoch_increment")
    fixed = prepare_prompt(messages, "shorten_tools_epoch")
    if pairs <= 110:
        assert increment == fixed
    else:
        assert increment != fixed
