"""The Pydantic AI and mini-swe-agent hooks are optional extras (docs/INTEGRATIONS.md).

``import scoutd`` imports neither framework, and importing a hook without its
framework fails with one line naming the extra to install.
"""

from __future__ import annotations

import os
import tempfile

import pytest

from tests.integrations.test_run import run_python


@pytest.mark.parametrize(
    ("module", "blocked", "extra"),
    [
        ("scoutd.integrations.pydantic_ai", "pydantic_ai", "pydantic-ai"),
        ("scoutd.integrations.mini_swe_agent", "minisweagent", "mini-swe-agent"),
    ],
)
def test_without_the_framework_importing_the_hook_fails_naming_the_extra(
    module: str, blocked: str, extra: str
) -> None:
    done = run_python(
        f"""
        import sys
        import scoutd, scoutd.integrations
        assert {blocked!r} not in sys.modules  # import scoutd never imports it
        sys.modules[{blocked!r}] = None  # as if it were not installed
        try:
            import {module}
        except ImportError as exc:
            print(str(exc))
        """
    )
    assert done.returncode == 0, done.stderr + done.stdout
    message = done.stdout.strip()
    assert "\n" not in message and module in message
    assert f"pip install 'scoutd[{extra}]'" in message


def test_frameworks_are_installed_for_ci() -> None:
    """CI installs the test extra, which brings both frameworks: their tests never skip there."""
    if os.environ.get("CI") != "true":
        pytest.skip("checked under CI only (a local checkout may lack the extras)")
    os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")  # no banner
    os.environ.setdefault("MSWEA_GLOBAL_CONFIG_DIR", tempfile.mkdtemp(prefix="mswea-config-"))
    import minisweagent.agents.default  # noqa: F401
    import pydantic_ai.capabilities  # noqa: F401
