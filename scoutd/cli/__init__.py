"""The ``scoutd`` command: a thin shell over the library and the client.

One module per group of verbs; :mod:`scoutd.cli.registry` lists them all, and
:mod:`scoutd.cli.common` holds the exit codes (0 ok, 1 runtime failure,
2 usage or configuration mistake, 3 aborted) and the shared options.
"""

from __future__ import annotations

from .common import EXIT_ABORTED, EXIT_ERROR, EXIT_OK, EXIT_USAGE
from .main import build_parser, main

__all__ = ["EXIT_ABORTED", "EXIT_ERROR", "EXIT_OK", "EXIT_USAGE", "build_parser", "main"]
