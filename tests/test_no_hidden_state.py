"""No hidden state in the package (docs/ARCHITECTURE.md, "The line between pure code and I/O").

What a prepare depends on reaches it as an argument: no context variable, no
thread-local, no module global rebound at run time, and no memo on a module
function but the ones named here with their reason. Read from the syntax tree
of every module, so that a comment or a docstring naming them does not count.
"""

from __future__ import annotations

import ast
import pathlib

import scoutd

PACKAGE = pathlib.Path(scoutd.__file__).parent

# module path (from the package root) and function: pure memos of pure functions
ALLOWED_MEMOS = {
    ("config_rules.py", "_number_fields"),  # a Struct class's bounds, fixed at import
}
_MEMOS = ("cache", "lru_cache")


def _decorator_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def hidden_state(source: str, module: str) -> list[str]:
    """Each use of hidden state in ``source``, as ``module:line what``."""
    found: list[tuple[int, str]] = []
    tree = ast.parse(source)
    functions = [
        n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    decorators = {id(d) for function in functions for d in function.decorator_list}
    for node in ast.walk(tree):
        what = None
        if isinstance(node, ast.Global):
            what = f"global {', '.join(node.names)}"
        elif isinstance(node, ast.ImportFrom) and node.module in ("contextvars", "threading"):
            names = {alias.name for alias in node.names} & {"ContextVar", "local"}
            what = f"from {node.module} import {', '.join(sorted(names))}" if names else None
        elif isinstance(node, ast.Import):
            what = (
                "import contextvars" if any(a.name == "contextvars" for a in node.names) else None
            )
        elif isinstance(node, ast.Attribute) and node.attr in ("ContextVar", "local"):
            base = node.value
            if isinstance(base, ast.Name) and base.id in ("contextvars", "threading"):
                what = f"{base.id}.{node.attr}"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            memos = [d for d in node.decorator_list if _decorator_name(d) in _MEMOS]
            if memos and (module, node.name) not in ALLOWED_MEMOS:
                what = f"memo on {node.name}"
        elif (
            isinstance(node, ast.Call)
            and _decorator_name(node) in _MEMOS
            and id(node) not in decorators
        ):
            # a memo applied by a call, `functools.lru_cache(maxsize=n)(f)` or `cache(f)`
            what = f"memo {_decorator_name(node)}()"
        if what is not None:
            found.append((node.lineno, what))
    return [f"{module}:{line} {what}" for line, what in sorted(found)]


def test_the_scan_finds_each_kind_of_hidden_state() -> None:
    """The scan is not vacuous: each construct it forbids is found, comments are not."""
    source = "\n".join(
        [
            "# a ContextVar, threading.local() and global x, in a comment only",
            "from contextvars import ContextVar",
            "import threading, functools",
            "x = threading.local()",
            "def f():",
            "    global x",
            "@functools.lru_cache(maxsize=2)",
            "def g(): ...",
            "@functools.cache",
            "def _number_fields(): ...",
            "h = functools.lru_cache(maxsize=8)(g)",
        ]
    )
    found = hidden_state(source, "sample.py")
    assert [line.split(" ", 1)[1] for line in found] == [
        "from contextvars import ContextVar",
        "threading.local",
        "global x",
        "memo on g",
        "memo on _number_fields",
        "memo lru_cache()",
    ]
    assert hidden_state('"""ContextVar, global x"""\n', "sample.py") == []


def test_the_package_keeps_no_hidden_state() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        found += hidden_state(path.read_text(encoding="utf-8"), module)
    assert found == []
