"""docs/FORMATS.md stays true: its agent loops use the API as it is, its socat
examples are answered by the real daemon. The SDKs are not needed: the loops are
parsed and compiled, and every scoutd name and keyword they use is checked."""

from __future__ import annotations

import ast
import inspect
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

import scoutd
from tests.support.daemon import Daemon, LineClient

DOC = Path(__file__).resolve().parents[2] / "docs" / "FORMATS.md"
TEXT = DOC.read_text(encoding="utf-8")
PYTHON_BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, re.S)
SH_BLOCKS = re.findall(r"```sh\n(.*?)```", TEXT, re.S)
SDKS = {"openai", "anthropic"}
# The objects the loops name, by variable: what their methods are checked against.
RECEIVERS: dict[str, tuple[type, ...]] = {
    "daemon": (scoutd.Client, scoutd.AsyncClient),
    "session": (scoutd.client.Session, scoutd.AsyncSession),
}


def _accepts(fn: Callable[..., Any], keyword: str) -> bool:
    parameters = inspect.signature(fn).parameters
    return keyword in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )


def _scoutd_problems(tree: ast.AST) -> list[str]:
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            for alias in node.names:
                top = (module or alias.name).split(".")[0]
                if top not in SDKS | {"scoutd"} and top not in sys.stdlib_module_names:
                    problems.append(f"imports {top}, neither the SDKs, scoutd nor stdlib")
                if module == "scoutd" and not hasattr(scoutd, alias.name):
                    problems.append(f"scoutd has no {alias.name}")
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        owner, name = node.func.value, node.func.attr
        if not isinstance(owner, ast.Name):
            continue
        if owner.id == "scoutd":
            targets: tuple[Any, ...] = (getattr(scoutd, name, None),)
        elif owner.id in RECEIVERS:
            targets = tuple(getattr(kind, name, None) for kind in RECEIVERS[owner.id])
        else:
            continue
        for target in targets:
            if target is None:
                problems.append(f"{owner.id}.{name} does not exist")
                continue
            for keyword in node.keywords:
                if keyword.arg is not None and not _accepts(target, keyword.arg):
                    problems.append(f"{owner.id}.{name} takes no {keyword.arg}=")
    return problems


def test_the_doc_has_a_loop_per_format_in_process_and_through_the_daemon() -> None:
    assert len(PYTHON_BLOCKS) >= 6
    joined = "\n".join(PYTHON_BLOCKS)
    for needle in (
        "chat.completions.create",
        "responses.create",
        "messages.create",
        "scoutd.Client()",
        "scoutd.AsyncClient()",
        "scoutd.prepare_prompt(",
        "scoutd.Session(",
    ):
        assert needle in joined, needle


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=lambda b: b.splitlines()[0][:40])
def test_python_blocks_compile_and_use_the_real_api(block: str) -> None:
    tree = ast.parse(block)
    compile(tree, "FORMATS.md", "exec")
    assert not _scoutd_problems(tree)


def _socat_requests() -> list[dict[str, Any]]:
    """The requests the socat examples send; a ``%s`` filled by printf keeps its argument."""
    found = []
    for block in SH_BLOCKS:
        for payload in re.findall(r"printf '%s\\n' '(\{.*?\})'", block):
            found.append(msgspec.json.decode(payload))
        for payload, argument in re.findall(r"printf '(\{.*?\})\\n' \"([^\"]*)\"", block):
            found.append(msgspec.json.decode(payload.replace("%s", argument)))
    return found


def test_socat_examples_are_answered_by_the_daemon() -> None:
    requests = [r for r in _socat_requests() if r["method"] == "prepare_prompt"]
    assert {r["params"]["format"] for r in requests} == {
        "openai-chat",
        "openai-responses",
        "anthropic",
    }
    with Daemon() as daemon, LineClient(daemon.socket_path) as line:
        for request in requests:
            answer = line.call(request["method"], request["params"])
            assert "result" in answer, answer
            result = answer["result"]
            assert result["report"][-1]["format"] == request["params"]["format"]
            expected = scoutd.prepare(**request["params"])
            assert result["messages"] == msgspec.json.decode(msgspec.json.encode(expected.messages))


def test_session_open_example_is_valid() -> None:
    opens = [r for r in _socat_requests() if r["method"] == "session.open"]
    assert opens and all(r["params"]["format"] in ("anthropic", "openai-chat") for r in opens)
    # Under the home directory, which the config scripts/serve writes allows.
    assert all(r["params"]["save_file"].startswith("$HOME/") for r in opens)
