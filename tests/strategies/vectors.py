"""Golden vectors: the vendored subset, plus the full set when it is available.

``SCOUTD_CONFORMANCE_DIR`` names a directory of full vector files (one JSON
object with ``cases`` per file); without it only the subset in
``tests/vectors/`` runs.
"""

from __future__ import annotations

import gzip
import json
import os
import pathlib
from typing import Any

import pytest

SUBSET = pathlib.Path(__file__).resolve().parent.parent / "vectors" / "conformance-subset.json.gz"


def _subset() -> dict[str, list[dict[str, Any]]]:
    data = json.loads(gzip.decompress(SUBSET.read_bytes()))
    inputs = data["inputs"]
    files: dict[str, list[dict[str, Any]]] = {}
    for name, cases in data["files"].items():
        files[name] = [
            {**case, "input": inputs[case["input_ref"]]} if "input_ref" in case else case
            for case in cases
        ]
    return files


def _full() -> dict[str, list[dict[str, Any]]]:
    directory = os.environ.get("SCOUTD_CONFORMANCE_DIR")
    if not directory:
        return {}
    paths = sorted(pathlib.Path(directory).glob("*.json"))
    if not paths:
        raise RuntimeError(f"SCOUTD_CONFORMANCE_DIR={directory} holds no *.json vector files")
    return {p.name: json.loads(p.read_text(encoding="utf-8"))["cases"] for p in paths}


def vector_params(kind: str) -> list[Any]:
    """pytest params of every case of one kind: "strategy" or "helper"."""
    params = []
    for origin, files in (("subset", _subset()), ("full", _full())):
        for cases in files.values():
            for case in cases:
                if ("function" in case) == (kind == "helper"):
                    params.append(pytest.param(case, id=f"{origin}:{case['id']}"))
    return params
