"""Every ``scoutd`` verb, in the order ``scoutd --help`` lists them.

To add a verb: write a module in this package that defines one
:class:`~scoutd.cli.common.Verb` (name, help, two or three examples, a
``configure`` that adds its options with a description for every positional
argument, and a ``run`` that returns an exit code and raises
:class:`~scoutd.cli.common.UsageError` for usage mistakes), then list it here.
tests/cli/test_main.py checks every verb listed here: its ``--help`` ends with
examples, its positional arguments are described, an unknown option prints
its own usage.

Shared pieces live in :mod:`scoutd.cli.common`: ``client_socket(args)`` (the
daemon's socket, found as docs/OPERATIONS.md says), ``add_client`` (``--socket``
and ``--timeout``), ``add_config``, ``read_messages``, ``write_json``,
``CliError`` (exit 1) and ``UsageError`` (exit 2).
"""

from __future__ import annotations

from .clear import CLEAR
from .common import Verb
from .config_verbs import CONFIG
from .daemon import METRICS, SERVE, STATUS
from .fleet import FLEET
from .notices import ABORT, INBOX, NOTIFY
from .prompt import EXPLAIN, PREPARE
from .simulate import SIMULATE

__all__ = ["VERBS"]

VERBS: tuple[Verb, ...] = (
    SERVE,
    PREPARE,
    EXPLAIN,
    NOTIFY,
    ABORT,
    CLEAR,
    INBOX,
    STATUS,
    METRICS,
    CONFIG,
    FLEET,
    SIMULATE,
)
