"""Package attributes imported on first use (PEP 562), for the light entry points.

A package lists where each public name lives; ``import scoutd.protocol``,
``import scoutd.client`` and the CLI's light verbs then load only the modules
they use (docs/ARCHITECTURE.md, "Layers"). Type checkers read the package's
``if TYPE_CHECKING:`` imports instead.

A public name may also be the name of a submodule (``scoutd.cli.main``, the
function, defined in the module ``scoutd/cli/main.py``). Importing a submodule
binds it on its package under its name, which would replace the public name
for everyone who asks after that, depending on what happened to be imported
first. The package's module type refuses that one binding, so the public name
always means what the package lists; the submodule stays in ``sys.modules``.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


class _Lookup:
    """A package's ``__getattr__``: imports the module that defines a public name."""

    def __init__(self, package: str, where: Mapping[str, str]) -> None:
        self.package = package
        self.where = dict(where)

    def __call__(self, name: str) -> Any:
        module = self.where.get(name)
        if module is None:
            raise AttributeError(f"module {self.package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, self.package), name)
        setattr(sys.modules[self.package], name, value)  # asked once: later lookups skip this
        return value


class _LazyPackage(types.ModuleType):
    """A package with lazy public names: no submodule is bound over one of them."""

    def __setattr__(self, name: str, value: Any) -> None:
        lookup = self.__dict__.get("__getattr__")
        if (
            isinstance(lookup, _Lookup)
            and name in lookup.where
            and isinstance(value, types.ModuleType)
            and value.__name__ == f"{self.__name__}.{name}"
        ):
            return  # the import system binding the submodule: the public name stays
        super().__setattr__(name, value)


def lazy_attributes(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: ``where`` maps a name to the
    module (relative to ``package``) that defines it.

    Called from the package's ``__init__``; it also gives the package the
    module type that keeps a submodule from replacing a public name.
    """
    sys.modules[package].__class__ = _LazyPackage
    return _Lookup(package, where)
