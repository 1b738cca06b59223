"""The ``[fleet]`` table: optional, validated like the others, named in errors."""

from __future__ import annotations

from typing import Any

import pytest

from scoutd.config import read_fleet_table, resolve_config
from scoutd.errors import ConfigError


def config_file(tmp_path: Any, text: str) -> str:
    path = tmp_path / "scoutd.toml"
    path.write_text(text)
    return str(path)


def test_no_fleet_table_means_no_fleet(tmp_path: Any) -> None:
    assert resolve_config(config_file(tmp_path, "[daemon]\n")).fleet is None


def test_a_fleet_table_is_read_with_its_defaults(tmp_path: Any) -> None:
    config = resolve_config(
        config_file(
            tmp_path,
            '[fleet]\nurl = "rediss://redis.internal:6380/0"\nhost = "build-17"\n'
            'labels = ["gpu", "team-a"]\npassword_file = "/etc/scoutd/fleet.password"\n',
        )
    )
    assert config.fleet is not None
    assert config.fleet.labels == ("gpu", "team-a") and config.fleet.prefix == "scoutd:fleet"
    assert config.origins["fleet.host"] == "file"


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ('url = "redis://ops:secret@redis:6379/0"', "credentials"),
        ('url = "http://redis"', "url"),
        ('password_file = "relative.txt"', "password_file"),
        ('state_dir = "state"', "state_dir"),
        ('host = "a b"', "fleet.host"),
        ("heartbeat_interval = 0", "fleet.heartbeat_interval"),
        ("max_chats = 0", "fleet.max_chats"),
        ("passwd = 'x'", "passwd"),  # an unknown key: a typo is an error
    ],
)
def test_a_bad_fleet_key_is_refused_by_name(tmp_path: Any, line: str, named: str) -> None:
    with pytest.raises(ConfigError, match=r"\[fleet\]") as raised:
        resolve_config(config_file(tmp_path, f"[fleet]\n{line}\n"))
    assert named in str(raised.value)


def test_the_fleet_table_is_read_alone(tmp_path: Any) -> None:
    """What the fleet verbs read: a mistake in another table does not stop them, one
    in [fleet] itself or in the file's layout does."""
    text = '[fleet]\nurl = "redis://redis:6379/0"\n[prompt]\nepoch_sise = 3\n'
    with pytest.raises(ConfigError, match="epoch_sise"):
        resolve_config(config_file(tmp_path, text))
    fleet = read_fleet_table(config_file(tmp_path, text))
    assert fleet is not None and fleet.url == "redis://redis:6379/0"
    assert read_fleet_table(config_file(tmp_path, "[prompt]\nepoch_sise = 3\n")) is None
    with pytest.raises(ConfigError, match="passwd"):
        read_fleet_table(config_file(tmp_path, "[fleet]\npasswd = 'x'\n"))
    with pytest.raises(ConfigError, match="fleets"):
        read_fleet_table(config_file(tmp_path, "[fleets]\n"))
    with pytest.raises(ConfigError, match="cannot read"):
        read_fleet_table(str(tmp_path / "absent.toml"))
