"""docs/INTEGRATIONS.md: its two samples are complete scripts that the documented install runs.

Each sample must compile as a module (no top-level ``await``), import only
names that exist (the frameworks come with the test extra), and need no
package that its install line leaves out: a ``create_agent("openai:...")``
model needs ``langchain-openai``.
"""

from __future__ import annotations

import ast
import importlib
import re
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "INTEGRATIONS.md"
TEXT = DOC.read_text(encoding="utf-8")
# The distribution each imported top-level module or model provider comes from.
DISTRIBUTIONS = {"agents": "scoutd[openai-agents]", "langchain": "scoutd[langchain]"}
PROVIDERS = {"openai": "langchain-openai", "anthropic": "langchain-anthropic"}


def sample(section: str) -> str:
    body = TEXT[TEXT.index(f"## {section}\n") :]
    return body[body.index("```python\n") + len("```python\n") : body.index("```\n", 10)]


def install_line(framework: str) -> str:
    row = next(line for line in TEXT.splitlines() if line.startswith(f"| {framework}"))
    return row.split("|")[3]


@pytest.mark.parametrize(
    ("section", "framework"),
    [("OpenAI Agents SDK", "OpenAI Agents SDK"), ("LangChain", "LangChain")],
)
def test_the_sample_is_a_script_the_install_line_can_run(section: str, framework: str) -> None:
    source = sample(section)
    tree = ast.parse(source)
    compile(source, f"INTEGRATIONS.md ({section})", "exec")  # a top-level await fails here
    installed = install_line(framework)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name), f"{node.module} has no {alias.name}"
            top = node.module.split(".")[0]
            if top not in sys.stdlib_module_names and top != "scoutd":
                assert DISTRIBUTIONS[top] in installed, (top, installed)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            provider = re.fullmatch(r"(\w+):[\w.-]+", node.value)
            if provider and provider.group(1) in PROVIDERS and "create_agent" in source:
                assert PROVIDERS[provider.group(1)] in installed, (node.value, installed)
    assert "[...]" not in source  # every argument is real
