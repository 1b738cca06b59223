"""``scoutd config show`` and ``scoutd config check``."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..config import Config, DaemonConfig, FleetConfig, PromptConfig
from ..paths import printable
from .arg_types import path
from .common import EXIT_OK, Verb, add_config, encode, found_config, snapshot, write_json

__all__ = ["CONFIG"]


def _render(key: str, value: Any) -> str:
    """A value as it would be written in the TOML file."""
    if key == "daemon.socket_mode" and isinstance(value, int):
        return format(value, "#o")
    if value is None:
        return "(unset)"
    # JSON escapes the C0 controls only: a C1 control (an 8-bit CSI), a bidirectional
    # override or a line separator in a string would reach the terminal as is
    return printable(encode(value).decode())


def _effective(config: Config) -> list[tuple[str, Any, str]]:
    """Every (key, value, origin) of a snapshot, in table then field order."""
    rows: list[tuple[str, Any, str]] = []
    tables: list[tuple[str, PromptConfig | DaemonConfig | FleetConfig]] = [
        ("prompt", config.prompt),
        ("daemon", config.daemon),
    ]
    if config.fleet is not None:  # only with a [fleet] table (docs/OPERATIONS.md, "A fleet")
        tables.append(("fleet", config.fleet))
    for table, struct in tables:
        for field in struct.__struct_fields__:
            key = f"{table}.{field}"
            rows.append((key, getattr(struct, field), config.origins.get(key, "default")))
    for name, target in sorted(config.plugins.items()):
        key = f"plugins.{name}"
        rows.append((key, target, config.origins.get(key, "file")))
    return rows


def _show(args: argparse.Namespace) -> int:
    _, found = found_config(args)
    config = snapshot(args)
    rows = _effective(config)
    if args.json:
        write_json(
            {
                "path": config.path,
                "found": found,
                "values": {key: {"value": value, "origin": origin} for key, value, origin in rows},
            }
        )
        return EXIT_OK
    if config.path is None:
        print(f"# config file: none ({printable(found)}): built-in defaults and environment")
    else:
        print(f"# config file: {printable(config.path)} ({printable(found)})")
    for key, value, origin in rows:  # a plugin's name is the file's: escaped
        print(f"{printable(key)} = {_render(key, value)}  ({origin})")
    return EXIT_OK


def _configure_show(parser: argparse.ArgumentParser) -> None:
    add_config(parser)
    parser.add_argument("--json", action="store_true", help="print as JSON")


def _check(args: argparse.Namespace) -> int:
    # The file alone: environment variables would be a different thing to check.
    from ..server import load_daemon_config, missing_roots  # loaded only when needed

    config, _, _ = load_daemon_config(args.file, environ={})
    for root in missing_roots(config):
        print(
            f"warning: allowed_roots entry {printable(root)} is not an existing directory",
            file=sys.stderr,
        )
    print(f"ok: {printable(args.file)}")
    return EXIT_OK


def _configure_check(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file", metavar="FILE", type=path, help="the TOML file to validate as the daemon would"
    )


CONFIG = Verb(
    name="config",
    help="show or check the configuration",
    examples=(
        "scoutd config show",
        "scoutd config show --config run/scoutd.toml --set epoch_size=40 --json",
        "scoutd config check new.toml && mv new.toml /etc/scoutd/scoutd.toml",
    ),
    actions=(
        Verb(
            name="show",
            help="every effective value and where it came from",
            examples=(
                "scoutd config show",
                "scoutd config show --config run/scoutd.toml --json",
            ),
            configure=_configure_show,
            run=_show,
        ),
        Verb(
            name="check",
            help="validate a config file (exit 2 when it is invalid)",
            examples=(
                "scoutd config check config/scoutd.toml",
                "scoutd config check new.toml && mv new.toml /etc/scoutd/scoutd.toml",
            ),
            configure=_configure_check,
            run=_check,
        ),
    ),
)
