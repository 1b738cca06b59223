"""A package's public name means one thing, whatever was imported before it.

``from scoutd.cli import build_parser, main`` once gave the submodule
``scoutd.cli.main`` instead of the function: resolving ``build_parser``
imported the module, and the import bound it over the lazy name. Each check
runs in a fresh interpreter, so that no test run before decides the order.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
import types

import pytest

import scoutd
import scoutd.cli

from .helpers import CLI_TIMEOUT, ROOT, clean_environ

# Looks at one package: imports its submodules and resolves its public names, in
# the order given, then reports each public name bound to a module.
_PROBE = """
import importlib, json, pkgutil, sys, types
package = importlib.import_module(sys.argv[1])
def submodules():
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        try:
            importlib.import_module(f"{package.__name__}.{info.name}")
        except ImportError:
            pass  # an optional extra not installed
def names():
    for name in package.__all__:
        getattr(package, name)
steps = [submodules, names] if sys.argv[2] == "modules-first" else [names, submodules]
for step in steps:
    step()
shadowed = [n for n in package.__all__ if isinstance(getattr(package, n), types.ModuleType)]
print(json.dumps({"names": len(package.__all__), "shadowed": shadowed}))
"""


def _packages_at_risk() -> list[str]:
    """The packages whose public names are lazy, or share a name with a submodule."""
    found = []
    for info in pkgutil.walk_packages(scoutd.__path__, "scoutd."):
        if not info.ispkg:
            continue
        try:
            package = importlib.import_module(info.name)
        except ImportError:
            continue
        public = set(getattr(package, "__all__", ()))
        subs = {sub.name for sub in pkgutil.iter_modules(package.__path__)}
        if "__getattr__" in vars(package) or public & subs:
            found.append(info.name)
    return ["scoutd", *found]


PACKAGES = _packages_at_risk()


@pytest.mark.parametrize("order", ["modules-first", "names-first"])
def test_no_public_name_is_replaced_by_a_submodule(order: str) -> None:
    names = 0
    problems: dict[str, list[str]] = {}
    for package in PACKAGES:
        result = subprocess.run(
            [sys.executable, "-c", _PROBE, package, order],
            cwd=ROOT,
            env=clean_environ(),
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT,
            check=True,
        )
        answer = json.loads(result.stdout)
        names += answer["names"]
        if answer["shadowed"]:
            problems[package] = answer["shadowed"]
    assert problems == {}
    # Not vacuous: the lazy packages (scoutd, cli, client, inbox, protocol) were looked at.
    assert {"scoutd", "scoutd.cli", "scoutd.client", "scoutd.inbox"} <= set(PACKAGES)
    assert names >= 60, names


def test_the_documented_imports_give_the_function() -> None:
    """``from scoutd.cli import build_parser, main``, the console script's
    ``scoutd.cli:run`` after the module was imported by its own path too."""
    code = (
        "import types\n"
        "from scoutd.cli import build_parser, main, run\n"
        "assert isinstance(main, types.FunctionType), main\n"
        "assert isinstance(run, types.FunctionType), run\n"
        "import scoutd.cli.main as by_path\n"
        "from scoutd.cli.main import build_parser as direct\n"
        "import scoutd.cli\n"
        "assert scoutd.cli.main is main and direct is build_parser, scoutd.cli.main\n"
        "assert scoutd.cli.run is run\n"
        "assert main(['--version']) == 0\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=clean_environ(),
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("scoutd ")


def test_a_submodule_stays_importable_by_its_path() -> None:
    """The submodule is still a module in ``sys.modules`` (scripts and the
    import contracts name it)."""
    module = importlib.import_module("scoutd.cli.main")
    assert isinstance(module, types.ModuleType)
    assert sys.modules["scoutd.cli.main"] is module
    assert callable(scoutd.cli.main) and not isinstance(scoutd.cli.main, types.ModuleType)
