"""What ``scripts/floors`` and ``scripts/pythons`` install and run (docs/TESTING.md).

The tests that reach scoutd's dependencies and what its interpreter decides:
the daemon, the client and the wire (anyio, msgspec), the watcher (watchdog),
the configuration (msgspec), the fleet (redis-py), the properties that count
the cases they reach (hypothesis), and what is refused as nested too deeply
or as too many symbolic links (the interpreter's recursion limits and its
``realpath``). The providers' SDKs and the frameworks are left out, so are the
tests that need them.

    python scripts/core_suite.py requirements   one requirement a line
    python scripts/core_suite.py tests          one pytest argument a line
"""

from __future__ import annotations

import re
import sys
import tomllib

# The test extra's tools the selection needs (not its frameworks and SDKs).
TOOLS = {"pytest", "pytest-timeout", "pytest-xdist", "hypothesis"}

TESTS = (
    "tests/server",
    "tests/protocol",
    "tests/client",
    "tests/fleet",
    "tests/engine",
    "tests/test_server.py",
    "tests/test_watcher.py",
    "tests/test_config.py",
    "tests/test_config_hostile.py",
    "tests/test_incremental_view.py",
    "tests/test_parity_errors.py",
    "tests/strategies/test_tool_messages_given.py",
    "tests/strategies/test_tool_messages_index.py",
    "tests/cli/test_prompt.py",
    "tests/reliability/test_paths.py",
    "--ignore-glob=tests/protocol/test_sdk_objects*.py",
    "--ignore=tests/client/test_client_sdk_objects.py",
    "--ignore=tests/engine/test_session_sdk_objects.py",
)


def requirements() -> list[str]:
    """The package's requirements, the fleet extra's and the test tools, as stated."""
    with open("pyproject.toml", "rb") as handle:
        project = tomllib.load(handle)["project"]
    extras = project["optional-dependencies"]
    tools = [r for r in extras["test"] if re.split(r"[<>=!~\[; ]", r)[0] in TOOLS]
    return [*project["dependencies"], *extras["fleet"], *tools]


def main(argv: list[str]) -> int:
    if argv == ["requirements"]:
        print(*requirements(), sep="\n")
    elif argv == ["tests"]:
        print(*TESTS, sep="\n")
    else:
        print("usage: core_suite.py requirements|tests", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
