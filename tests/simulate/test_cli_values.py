"""``scoutd simulate`` flags that could only give NaN figures or a traceback: one error line."""

from __future__ import annotations

import pytest

from scoutd.simulate.cli import main


@pytest.mark.parametrize(
    "flag", ["--price-input", "--price-write", "--price-read", "--round-seconds"]
)
def test_an_infinite_price_or_gap_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    """An infinite price billed ``nank`` and a ratio of ``nan`` (exit 0)."""
    assert main(["--calls", "5", "--strategies", "none", flag, "inf"]) == 2
    assert "must be a finite number >= 0, got inf" in capsys.readouterr().err


def test_a_cache_that_never_expires_is_a_lifetime(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--calls", "5", "--strategies", "none", "--round-seconds", "60", "--ttl", "inf"]
    assert main(argv) == 0
    assert "lifetime inf s" in capsys.readouterr().out


def test_a_tokenizer_that_raises_is_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    """``os:getcwd`` takes no text: its TypeError was a traceback out of the replay."""
    assert main(["--calls", "5", "--strategies", "none", "--tokenizer", "os:getcwd"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("scoutd simulate: --tokenizer os:getcwd raised TypeError: ")
    assert err.count("\n") == 1
