"""Recorded real agent runs for the economy tests, as scoutd's tool-role messages.

The runs live beside the repository in ``../shared/real/`` (or the directory
named by ``SCOUTD_REAL_DIR``): ``runs.jsonl.gz`` in the OpenAI Chat format and
``anthropic.jsonl.gz`` in the Anthropic Messages format, one run a line with a
``messages`` list. :func:`load_runs` gives each in scoutd's tool roles, the
scout view of docs/FORMATS.md.
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


def real_dir() -> Path:
    """Where the recorded runs are."""
    return Path(os.environ.get("SCOUTD_REAL_DIR") or REPOSITORY.parent / "shared" / "real")


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
