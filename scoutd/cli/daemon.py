"""``scoutd serve``, ``scoutd status`` and ``scoutd metrics``: run the daemon, ask it how it is."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..paths import printable
from .arg_types import path
from .common import (
    EXIT_OK,
    Verb,
    add_client,
    add_config,
    client_socket,
    config_path,
    encode,
    write_json,
)

__all__ = ["METRICS", "SERVE", "STATUS"]


def _serve(args: argparse.Namespace) -> int:
    from .. import server

    return server.run(config_path=config_path(args), socket_path=args.socket)


def _configure_serve(parser: argparse.ArgumentParser) -> None:
    add_config(parser, overrides=False)
    parser.add_argument(
        "--socket", metavar="PATH", type=path, help="listen here instead of [daemon].socket_path"
    )


SERVE = Verb(
    name="serve",
    help="run the daemon in the foreground",
    examples=(
        "scoutd serve --config /etc/scoutd/scoutd.toml",
        'scoutd serve --config run/scoutd.toml --socket "$XDG_RUNTIME_DIR/scoutd/scoutd.sock"',
        "scripts/serve    # from a checkout: install, write a config, serve",
    ),
    configure=_configure_serve,
    run=_serve,
)


def _duration(seconds: float) -> str:
    """Seconds with their unit, and days, hours and minutes once there are any."""
    whole = int(seconds)
    parts = [
        f"{amount} {unit}"
        for amount, unit in (
            (whole // 86400, "d"),
            (whole // 3600 % 24, "h"),
            (whole // 60 % 60, "min"),
        )
        if amount
    ]
    text = f"{seconds:.1f} s"
    return f"{text} ({' '.join([*parts, f'{whole % 60} s'])})" if parts else text


def _flatten(prefix: str, value: Any, out: list[tuple[str, str]]) -> None:
    """``status`` as (dotted key, text) rows; every text one escaped line: the
    daemon's answer carries paths and errors (a Redis server's, for ``fleet``)
    that must not forge a row or reach the terminal as escape sequences."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _flatten(
                f"{prefix}.{printable(str(key))}" if prefix else printable(str(key)), item, out
            )
    elif isinstance(value, str):
        out.append((prefix, printable(value)))
    elif prefix == "uptime" and isinstance(value, int | float):
        out.append((prefix, _duration(value)))
    else:
        out.append((prefix, "-" if value is None else printable(encode(value).decode())))


def _status(args: argparse.Namespace) -> int:
    from ..client import Client

    if args.print_socket:
        print(client_socket(args, config_optional=True))
        return EXIT_OK
    with Client(client_socket(args, config_optional=True), timeout=args.timeout) as client:
        status = client.status()
    if args.json:
        write_json(status)
        return EXIT_OK
    rows: list[tuple[str, str]] = []
    _flatten("", status, rows)
    width = max((len(key) for key, _ in rows), default=0)
    for key, value in rows:
        print(f"{key.ljust(width)}  {value}")
    return EXIT_OK


def _configure_status(parser: argparse.ArgumentParser) -> None:
    add_client(parser)
    add_config(parser, overrides=False)
    parser.add_argument("--json", action="store_true", help="print the status as JSON")
    parser.add_argument(
        "--print-socket",
        action="store_true",
        help="print the socket path this command would use, without connecting",
    )


STATUS = Verb(
    name="status",
    help="show the daemon's status (finds the local daemon's socket by itself)",
    examples=(
        "scoutd status",
        "scoutd status --json --socket /run/scoutd/scoutd.sock",
        'socat - UNIX-CONNECT:"$(scoutd status --print-socket)"',
    ),
    configure=_configure_status,
    run=_status,
)


def _metrics(args: argparse.Namespace) -> int:
    from ..client import Client

    with Client(client_socket(args, config_optional=True), timeout=args.timeout) as client:
        sys.stdout.write(_exposition(client.metrics()))
    return EXIT_OK


def _exposition(text: str) -> str:
    """The daemon's Prometheus text with its line breaks and tabs kept and every other
    character that is not printable escaped: whatever answers on the socket cannot send
    escape sequences to the terminal, and a valid exposition holds none."""
    return "\n".join(
        "\t".join(printable(part) for part in line.split("\t")) for line in text.split("\n")
    )


def _configure_metrics(parser: argparse.ArgumentParser) -> None:
    add_client(parser)
    add_config(parser, overrides=False)


METRICS = Verb(
    name="metrics",
    help="print the daemon's counters as Prometheus text, for a textfile collector",
    examples=(
        "scoutd metrics",
        "scoutd metrics --socket /run/scoutd/scoutd.sock > /var/lib/node_exporter/scoutd.prom",
    ),
    configure=_configure_metrics,
    run=_metrics,
)
