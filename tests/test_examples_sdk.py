"""The SDK loops of docs/FORMATS.md (examples/sdk/) run as they are against the local daemon.

Each loop runs as a user runs it, ``python examples/sdk/NAME.py``, in a set-up
like the README's (``scripts/serve``: its daemon on the user's socket, save
files allowed under the home directory), with stand-ins for the ``openai`` and
``anthropic`` SDKs (tests/support/sdk_stubs/: a scripted model that calls one
tool, then answers). A notice dropped into the loop's chat beforehand must
reach the model's first prompt: the save file is one the daemon serves.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .support.serve_sandbox import serve_sandbox

ROOT = Path(__file__).resolve().parent.parent
STUBS = ROOT / "tests" / "support" / "sdk_stubs"
LOOPS = sorted(path.name for path in (ROOT / "examples" / "sdk").glob("*.py"))
TIMEOUT = 120.0
NOTICE = "operator notice 5d1e: the staging database is read-only"


@pytest.mark.parametrize("name", LOOPS)
def test_the_sdk_loop_runs_as_it_is(name: str, tmp_path: Path) -> None:
    source = (ROOT / "examples" / "sdk" / name).read_text(encoding="utf-8")
    found = re.search(r'os\.path\.expanduser\("(~/[^"]+)"\)', source)
    assert found, f"{name}: its save file is not under the home directory"
    with serve_sandbox() as sandbox:
        environ = {
            **sandbox.environ,
            "PYTHONPATH": str(STUBS),
            "SDK_STUB_LOG": str(tmp_path / "prompts.jsonl"),
        }
        save_file = found.group(1).replace("~", str(sandbox.home), 1)
        dropped = subprocess.run(
            [sys.executable, "-m", "scoutd", "notify", save_file, NOTICE],
            cwd=sandbox.checkout, env=environ, capture_output=True, text=True, timeout=TIMEOUT,
            check=False,
        )  # fmt: skip
        assert dropped.returncode == 0, dropped.stderr
        result = subprocess.run(
            [sys.executable, f"examples/sdk/{name}"],
            cwd=sandbox.checkout, env=environ, capture_output=True, text=True, timeout=TIMEOUT,
            check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr + sandbox.daemon.log()
    prompts = [json.loads(line) for line in (tmp_path / "prompts.jsonl").read_text().splitlines()]
    assert len(prompts) == 2  # a tool call, then the answer
    assert NOTICE in json.dumps(prompts[0])
    assert NOTICE not in json.dumps(prompts[1])  # delivered once
    assert "scripted" in json.dumps(prompts[1])  # the tool's output came back
