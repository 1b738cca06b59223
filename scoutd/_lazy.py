"""Package attributes imported on first use (PEP 562), for the light entry points.

A package lists where each public name lives; ``import scoutd.protocol``,
``import scoutd.client`` and the CLI's light verbs then load only the modules
they use (docs/ARCHITECTURE.md, "Layers"). Type checkers read the package's
``if TYPE_CHECKING:`` imports instead.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: ``where`` maps a name to the
    module (relative to ``package``) that defines it."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)  # asked once: later lookups skip this
        return value

    return __getattr__
