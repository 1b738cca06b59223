"""Recorded real agent runs for the economy tests, as scoutd's tool-role messages.

Two files, one run a line with a ``messages`` list: ``runs.jsonl.gz`` in the
OpenAI Chat format and ``anthropic.jsonl.gz`` in the Anthropic Messages format.
The repository ships a small subset of them (``tests/data/real/``, with their
source and licence), so that a clone passes its own tests; the full set is
used instead where it is: the directory named by ``SCOUTD_REAL_DIR``, else
``../shared/real/`` beside the repository. :func:`load_runs` gives each run in
scoutd's tool roles, the scout view of docs/FORMATS.md.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

from scoutd.formats import scout_view

REPOSITORY = Path(__file__).resolve().parents[2]
FILES = {"openai": "runs.jsonl.gz", "anthropic": "anthropic.jsonl.gz"}
VENDORED = REPOSITORY / "tests" / "data" / "real"


def full_dir() -> Path | None:
    """Where the full set is (``$SCOUTD_REAL_DIR``, else ``../shared/real/``), None if absent.

    A directory named by ``$SCOUTD_REAL_DIR`` is used as it is, present or not:
    a wrong name fails the tests that read it instead of testing less. Naming
    the shipped subset tests as a clone without the full set does.
    """
    named = os.environ.get("SCOUTD_REAL_DIR")
    if named:
        return None if Path(named).resolve() == VENDORED.resolve() else Path(named)
    beside = REPOSITORY.parent / "shared" / "real"
    return beside if (beside / FILES["openai"]).is_file() else None


def real_dir() -> Path:
    """Where the recorded runs are: the full set if there is one, else the vendored subset."""
    return full_dir() or VENDORED


def load_runs(kind: str) -> list[dict[str, Any]]:
    """The runs of one file: each with ``format``, ``messages`` (scoutd's) and ``outputs``."""
    path = real_dir() / FILES[kind]
    runs = []
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            messages = scout_view(record["messages"])
            outputs = sum(1 for m in messages if m["role"] == "function_call_output")
            runs.append({"format": kind, "messages": messages, "outputs": outputs})
    return runs
