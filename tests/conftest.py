"""Shared pytest configuration.

Async tests run on anyio's asyncio backend. Every test runs with a hermetic
configuration: no system config file, no ``SCOUTD_CONFIG`` and none of the
``[prompt]`` environment variables of the machine running the suite.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import Phase, settings
from hypothesis.internal.conjecture import providers as hypothesis_providers

import scoutd.config
import scoutd.config_paths

# Hypothesis now and then draws a constant found in the local modules loaded so far
# (not site-packages, not tests): which modules those are depends on the tests run
# before in the same process, so a derandomized property's examples, and the counts
# of interesting cases it asserts, would depend on the order of the run
# (docs/TESTING.md, "Deterministic"). The pool is pinned to the empty one it starts
# with; should Hypothesis rename what this reaches, the suite stops here, loudly.
_NO_LOCAL_CONSTANTS = hypothesis_providers._local_constants
assert not any(_NO_LOCAL_CONSTANTS.set_for_type(kind) for kind in (int, float, bytes, str))
hypothesis_providers._get_local_constants = lambda: _NO_LOCAL_CONSTANTS

# LiteLLM (the litellm extra, and mini-swe-agent's models) fetches its price map
# from the network at import unless told to use the bundled one: tests stay offline.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# No deadline for any example: one that reads files or asks a daemon took over the
# default 200 ms on a loaded host, a failure of the machine, not of the code (speed
# is measured by scripts/bench, never asserted in a test).
settings.register_profile("scoutd", deadline=None)
settings.load_profile("scoutd")

if "MUTANT_UNDER_TEST" in os.environ:
    # Under mutmut (scripts/mutation) one failing example kills the mutant:
    # shrinking it would only cost minutes per killed mutant.
    settings.register_profile(
        "mutation",
        parent=settings.get_profile("scoutd"),
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
    )
    settings.load_profile("mutation")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked ``slow`` first, each file's in order: a worker of a parallel run
    that drew a long file last would run it alone while the others idle."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def hermetic_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        scoutd.config_paths, "DEFAULT_CONFIG_PATH", "/nonexistent/scoutd/scoutd.toml"
    )
    monkeypatch.delenv("SCOUTD_CONFIG", raising=False)
    for key in scoutd.config.PromptConfig.__struct_fields__:
        monkeypatch.delenv(key.upper(), raising=False)
    monkeypatch.delenv("PROMPT_STRATEGY", raising=False)


@pytest.fixture
def tmp() -> Iterator[Path]:
    """A short private directory (Unix socket paths are limited to 107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="sd"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
