"""Code an operator's configuration names: a plugin strategy, a tokenizer.

Each is named ``module:attribute`` and imported by Python's own ``sys.modules``
(no cache of scoutd's). What it raises never ends the daemon
(docs/RELIABILITY.md, "What a client may configure"):

* anything its import raises, an exit included, is a :class:`ConfigError`
  naming it, the error of the call that asked for it;
* what a call of it raises stays that call's error. Off the main thread (the
  daemon's workers) an exit or an interrupt would end the whole process
  (anyio raises it again on the event loop), so there it becomes a
  ``RuntimeError``; the main thread of a library caller keeps its Ctrl-C.
"""

from __future__ import annotations

import functools
import importlib
import threading
from collections.abc import Callable
from typing import Any, Generic, ParamSpec, TypeVar

from ..errors import ConfigError
from ..paths import printable

__all__ = ["Contained", "callers_interrupt", "contained", "import_named"]

P = ParamSpec("P")
R = TypeVar("R")


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _ours(exc: BaseException) -> bool:
    """Whether ``exc`` may pass as it is: an Exception, or anything on the main thread."""
    return isinstance(exc, Exception) or _on_main_thread()


def callers_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` is an exit or an interrupt of the main thread: the library
    caller's own (its Ctrl-C), raised as it is rather than said as an error."""
    return not isinstance(exc, Exception) and _on_main_thread()


def contained(label: str, exc: BaseException) -> BaseException:
    """What to raise for ``exc``, raised by the code ``label`` names (see the module)."""
    if _ours(exc):
        return exc
    return RuntimeError(f"{label} raised {type(exc).__name__}")


def import_named(label: str, target: str) -> Any:
    """The object ``target`` (``module:attribute``) names.

    Raises:
        ConfigError: ``{label} cannot be loaded: why``, for whatever the import
            raised (an exit on a worker thread included).
    """
    module_name, _, attribute = target.partition(":")
    try:
        found: Any = importlib.import_module(module_name.strip())
        for part in attribute.strip().split(".") if attribute.strip() else []:
            found = getattr(found, part)
    except BaseException as exc:
        if callers_interrupt(exc):
            raise
        known = isinstance(exc, (ImportError, AttributeError, ValueError))
        why = printable(str(exc) if known else f"{type(exc).__name__}: {exc}")
        raise ConfigError(f"{label} cannot be loaded: {why}") from None
    return found


class Contained(Generic[P, R]):
    """``function``, each call's failure contained as :func:`contained` says."""

    def __init__(self, label: str, function: Callable[P, R]) -> None:
        self.label = label
        self.function = function
        functools.update_wrapper(self, function)  # its name, for reports

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return self.function(*args, **kwargs)
        except BaseException as exc:
            replaced = contained(self.label, exc)
            if replaced is exc:
                raise
            raise replaced from None
