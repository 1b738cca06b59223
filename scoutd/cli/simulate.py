"""``scoutd simulate``: handed over to the simulator, which owns its flags."""

from __future__ import annotations

import importlib

from .common import CliError, Verb

__all__ = ["SIMULATE", "run_simulate"]


def run_simulate(argv: list[str]) -> int:
    """Run the simulator with ``argv`` (the arguments after ``simulate``)."""
    try:
        simulate = importlib.import_module("scoutd.simulate")
    except ModuleNotFoundError as exc:
        if exc.name != "scoutd.simulate":
            raise CliError(f"the simulate command needs a missing module: {exc.name}") from exc
        raise CliError("the simulate command is not available in this installation") from exc
    entry = getattr(simulate, "main", None)
    if not callable(entry):
        raise CliError("the simulate command is not available in this installation")
    return int(entry(argv))


SIMULATE = Verb(
    name="simulate",
    help="simulate a growing conversation (see 'scoutd simulate --help')",
    run=lambda args: run_simulate(list(args.args)),
    passthrough=True,
)


def simulate_argv(argv: list[str]) -> tuple[list[str], str | None] | None:
    """The simulator's own argv (and a global ``--config``) for ``simulate``, else None.

    Dispatched before argparse so that every flag after the verb, ``--help``
    included, belongs to the simulator.
    """
    rest = list(argv)
    config: str | None = None
    while rest and (rest[0] == "--config" or rest[0].startswith("--config=")):
        if "=" in rest[0]:
            config, rest = rest[0].partition("=")[2], rest[1:]
        elif len(rest) >= 2:
            config, rest = rest[1], rest[2:]
        else:
            return None
    if config == "":
        return None  # argparse refuses the empty name, with the usage
    if rest and rest[0] == SIMULATE.name:
        return rest[1:], config
    return None
