"""The fleet link's lines of the daemon's Prometheus exposition (pure)."""

from __future__ import annotations

from .. import protocol


def metrics_text(status: protocol.FleetStatus) -> str:
    """The fleet's lines of the Prometheus exposition (pure)."""
    lines = [
        "# HELP scoutd_fleet_connected 1 while the fleet's Redis answers",
        "# TYPE scoutd_fleet_connected gauge",
        f"scoutd_fleet_connected {int(status.connected)}",
        "# HELP scoutd_fleet_disconnected_seconds how long the fleet link has been down",
        "# TYPE scoutd_fleet_disconnected_seconds gauge",
        f"scoutd_fleet_disconnected_seconds {status.disconnected_for}",
        "# HELP scoutd_fleet_commands_total fleet commands read and acknowledged",
        "# TYPE scoutd_fleet_commands_total counter",
        f"scoutd_fleet_commands_total {status.commands}",
        "# HELP scoutd_fleet_delivered_total chats a fleet command was written to",
        "# TYPE scoutd_fleet_delivered_total counter",
        f"scoutd_fleet_delivered_total {status.delivered}",
        "# HELP scoutd_fleet_reconnects_total reconnections to the fleet's Redis",
        "# TYPE scoutd_fleet_reconnects_total counter",
        f"scoutd_fleet_reconnects_total {status.reconnects}",
    ]
    return "\n".join(lines) + "\n"
