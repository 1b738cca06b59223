"""The ``scoutd`` command: a thin shell over the library and the client.

One module per group of verbs; :mod:`scoutd.cli.registry` lists them all, and
:mod:`scoutd.cli.common` holds the exit codes (0 ok, 1 runtime failure,
2 usage or configuration mistake, 3 aborted) and the shared options. The names
below are imported on first use: a module of the package (``arg_types``, which
``scoutd simulate`` reads too) loads without the parser and every verb.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes

if TYPE_CHECKING:
    from .common import EXIT_ABORTED, EXIT_ERROR, EXIT_OK, EXIT_USAGE
    from .main import build_parser, main, run

__getattr__ = lazy_attributes(
    __name__,
    {
        "EXIT_ABORTED": ".common",
        "EXIT_ERROR": ".common",
        "EXIT_OK": ".common",
        "EXIT_USAGE": ".common",
        "build_parser": ".main",
        "main": ".main",
        "run": ".main",
    },
)

__all__ = ["EXIT_ABORTED", "EXIT_ERROR", "EXIT_OK", "EXIT_USAGE", "build_parser", "main", "run"]
