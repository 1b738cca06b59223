"""The layers of docs/ARCHITECTURE.md as they load: what each light entry point imports.

``scripts/check`` holds the import graph to the layers (import-linter); these
tests run the entry points in fresh interpreters and read ``sys.modules``, so
that a lazy facade that turned eager, or an import moved into a light path,
fails here. They also check the facade's names and that ``scripts/`` imports
no test code.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import scoutd
import scoutd.client
import scoutd.inbox
import scoutd.protocol
from scoutd.testing import Daemon

ROOT = Path(__file__).resolve().parent.parent
RUN_TIMEOUT = 60.0

# Module names (or prefixes, ending in ".") of the engine and what it runs.
ENGINE = (
    "scoutd.engine.",
    "scoutd.engine",
    "scoutd.prepare",
    "scoutd.session",
    "scoutd.incremental",
    "scoutd.incremental_cost",
    "scoutd.incremental_epoch",
    "scoutd.incremental_view",
    "scoutd.message_rules",
    "scoutd.strategies",
    "scoutd.strategies.",
    "scoutd.formats",
    "scoutd.formats.",
    "scoutd.plugins",
)
INBOX = ("scoutd.inbox", "scoutd.inbox.")
SHELLS = ("scoutd.server", "scoutd.server.", "scoutd.watcher", "scoutd.systemd", "scoutd.simulate")


def _loaded(code: str, env: dict[str, str] | None = None) -> list[str]:
    """The scoutd, anyio, watchdog, msgspec and logging modules a fresh interpreter holds
    after ``code``."""
    probe = (
        f"{code}\nimport json, sys\n"
        "print(json.dumps(sorted(m for m in sys.modules"
        " if m.split('.')[0] in ('scoutd', 'anyio', 'watchdog', 'msgspec', 'logging'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        cwd=ROOT,
        env=env,
        check=True,
    )
    modules: list[str] = json.loads(done.stdout.splitlines()[-1])
    return modules


def _matching(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return [
        m for m in modules if m in names or m.startswith(tuple(n for n in names if n[-1] == "."))
    ]


@pytest.mark.parametrize(
    "code",
    [
        "import scoutd.protocol",
        # every module of the package, and every name of its facade
        "import pkgutil, scoutd.protocol as p\n"
        "for m in pkgutil.iter_modules(p.__path__): __import__(f'scoutd.protocol.{m.name}')\n"
        "[getattr(p, name) for name in p.__all__]",
    ],
    ids=["import", "every-module"],
)
def test_the_protocol_loads_no_engine_format_inbox_or_shell(code: str) -> None:
    modules = _loaded(code)
    assert "scoutd.protocol" in modules  # the probe sees what it imported
    assert _matching(modules, ENGINE + INBOX + SHELLS) == []
    assert not any(m.startswith(("scoutd.client", "anyio", "watchdog")) for m in modules)
    if code != "import scoutd.protocol":
        assert {"scoutd.protocol.codec", "scoutd.protocol.client_state"} <= set(modules)


def test_the_client_loads_no_engine_or_inbox_and_the_blocking_one_no_anyio() -> None:
    modules = _loaded("from scoutd import Client; from scoutd.client import Session")
    assert "scoutd.client._sync" in modules
    assert _matching(modules, ENGINE + INBOX + SHELLS) == []
    assert not any(m.startswith(("anyio", "watchdog", "scoutd.client._async")) for m in modules)
    modules = _loaded("import scoutd.client; scoutd.client.AsyncClient")
    assert _matching(modules, ENGINE + INBOX + SHELLS) == []
    assert "anyio" in modules


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["notify", "{chat}", "Wrap up."],
        ["abort", "{chat}", "Stop now."],
        ["inbox", "{chat}"],
        ["clear", "{chat}"],
        ["status", "--socket", "{dir}/absent.sock"],
    ],
    ids=lambda argv: argv[0],
)
def test_light_verbs_load_no_engine_or_daemon(argv: list[str], tmp_path: Path) -> None:
    """A light verb, run for real (a real inbox, no daemon), loads no engine,
    format, strategy or daemon module, and no anyio or watchdog."""
    chat = tmp_path / "agent.chat"
    (tmp_path / "agent.inbox").mkdir()
    config = tmp_path / "scoutd.toml"
    config.write_text(f"[daemon]\nallowed_roots = [{json.dumps(str(tmp_path))}]\n")
    args = [a.format(chat=chat, dir=tmp_path) for a in argv]
    env = {**os.environ, "SCOUTD_CONFIG": str(config), "XDG_RUNTIME_DIR": str(tmp_path)}
    env.pop("SCOUTD_SOCKET", None)
    code = (
        "import contextlib, io, scoutd.cli\n"
        "out, err = io.StringIO(), io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):\n"
        f"    code = scoutd.cli.main({args!r})\n"
        f"assert code in {(0, 1)!r}, code\n"
    )
    modules = _loaded(code, env)
    assert "scoutd.cli.main" in modules
    assert _matching(modules, ENGINE + SHELLS) == []
    assert not any(m.startswith(("anyio", "watchdog")) for m in modules)
    if argv[0] == "notify":
        assert len(os.listdir(tmp_path / "agent.inbox")) == 1  # it did write the notice
        # the inbox package loads the writers it uses, not the listing, the pickup
        # or the claim (nor, with it, logging)
        assert "scoutd.inbox.writers" in modules
        reading = (
            "scoutd.inbox.listing",
            "scoutd.inbox.pickup",
            "scoutd.inbox.gate",
            "scoutd.inbox.claim",
        )
        assert _matching(modules, reading) == []
    if argv[0] in ("notify", "abort"):
        # no daemon answers: only [daemon]'s paths are read, with the standard library
        assert "scoutd.config_paths" in modules
        assert "msgspec" not in modules and "scoutd.config" not in modules
        # a verb spared logging (Verb.logs false) loads none: a record would go out bare
        assert "logging" not in modules
    if argv[0] == "--help":
        assert "msgspec" not in modules  # no configuration, codec or wire type is needed
        assert "scoutd.protocol.messages" not in modules
        assert _matching(modules, INBOX) == []  # the verbs' own code, not their parser's


@pytest.mark.parametrize("verb", ["notify", "abort"])
def test_notify_and_abort_ask_a_daemon_without_the_client_or_the_typed_config(
    verb: str, tmp_path: Path
) -> None:
    """With a daemon answering that runs the config named, the verb asks it for its
    status with the standard library alone (``scoutd.client.probe``): no msgspec,
    typed configuration or client, and the daemon's identity is checked (the verb
    says whether its uid can list the inbox)."""
    chat = tmp_path / "agent.chat"
    with Daemon(directory=str(tmp_path), daemon={"log_level": "warning"}) as daemon:
        env = {**os.environ, "SCOUTD_CONFIG": daemon.config_path}
        env.pop("SCOUTD_SOCKET", None)
        code = (
            "import contextlib, io, scoutd.cli, scoutd.cli.serving as s\n"
            "asked = []\n"
            "check = s.Serving.cannot_list\n"
            "s.Serving.cannot_list = lambda self, d: asked.append(self.uid) or check(self, d)\n"
            "out, err = io.StringIO(), io.StringIO()\n"
            "with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):\n"
            f"    code = scoutd.cli.main([{verb!r}, {str(chat)!r}, 'Wrap up.'])\n"
            "assert code == 0 and err.getvalue() == '', (code, err.getvalue())\n"
            "assert asked == [os.getuid()], asked\n"
        )
        modules = _loaded("import os\n" + code, env)
    assert "scoutd.client.probe" in modules
    assert "msgspec" not in modules and "scoutd.config" not in modules
    assert not any(m.startswith("scoutd.client._") for m in modules)
    assert "logging" not in modules  # spared logging (Verb.logs false): it loads none
    assert len(os.listdir(tmp_path / "agent.inbox")) == 1


def test_every_public_name_resolves_and_prepare_is_the_function() -> None:
    for package in (scoutd, scoutd.protocol, scoutd.client, scoutd.inbox):
        for name in package.__all__:
            getattr(package, name)  # AttributeError: the facade lost the name
    assert sorted(dir(scoutd)) == sorted(set(dir(scoutd)))
    assert set(scoutd.__all__) <= set(dir(scoutd))
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        scoutd.not_a_name  # noqa: B018
    # the engine's module, imported before or after the facade's name, leaves the function
    modules = _loaded(
        "import scoutd.engine.prepare as p\nimport scoutd\nfrom scoutd import prepare\n"
        "assert prepare is p.prepare and scoutd.prepare is p.prepare, scoutd.prepare\n"
    )
    assert "scoutd.engine.prepare" in modules


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def _python_scripts() -> list[Path]:
    """Every ``scripts/*.py``, and every executable in ``scripts/`` whose first line is a
    python shebang (``scripts/fuzz-rpc``, ``scripts/load``, ...)."""
    found = []
    for path in sorted((ROOT / "scripts").iterdir()):
        if not path.is_file():
            continue
        if path.suffix == ".py":
            found.append(path)
        elif os.access(path, os.X_OK):
            with path.open("rb") as handle:
                first = handle.readline()
            if first.startswith(b"#!") and b"python" in first:
                found.append(path)
    return found


def test_scripts_import_no_test_code() -> None:
    scripts = _python_scripts()
    assert len(scripts) >= 5  # the bench, its parts and the extensionless Python scripts
    for script in scripts:
        imported = _imports(script)
        assert not [n for n in imported if n == "tests" or n.startswith("tests.")], script.name


MAX_MODULE_LINES = 500


def _line_counts(paths: list[Path]) -> dict[str, int]:
    return {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for path in paths
    }


def test_no_module_over_500_lines() -> None:
    """One module, one job: none over 500 lines (docs/ARCHITECTURE.md, "Layout")."""
    sizes = _line_counts(sorted((ROOT / "scoutd").rglob("*.py")))
    assert len(sizes) > 100  # the package was found
    assert {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES} == {}


def test_no_script_over_500_lines() -> None:
    """The same rule for the scripts: every ``scripts/*.py`` and every extensionless Python
    script; a long one is split into modules beside it (``scripts/bench.py`` and its
    ``bench_*.py``, ``scripts/load`` and its ``load_*.py``)."""
    scripts = _python_scripts()
    names = {path.name for path in scripts}
    assert {"bench.py", "fuzz-rpc", "load", "chaos-inbox"} <= names  # both kinds were found
    sizes = _line_counts(scripts)
    assert {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES} == {}
