"""The configuration rules' cases that mutation testing found untested
(docs/TESTING.md): the bounds of an optional number, a long number in a refusal, and
who may write the config file a daemon reads, for a daemon run by root and by a user."""

from __future__ import annotations

import grp
import os
from pathlib import Path
from typing import Annotated

import msgspec
import pytest

from scoutd.config import PromptConfig
from scoutd.config_rules import check_numbers, untrusted_writer, validated_layer
from scoutd.errors import ConfigError
from tests.support.ids import AS_ROOT, NOBODY


class _Optional(msgspec.Struct):
    """A number that may be left out: its bounds hold when it is given."""

    count: Annotated[int, msgspec.Meta(ge=1)] | None = None
    share: Annotated[float, msgspec.Meta(le=1.0)] | None = None
    rate: Annotated[float, msgspec.Meta(gt=0.0)] | None = None


def test_an_optional_number_is_held_to_its_bounds() -> None:
    check_numbers(_Optional())
    check_numbers(_Optional(count=1, share=1.0, rate=0.5))
    with pytest.raises(ValueError, match=r"^count = 0 is out of bounds \(>= 1\)$"):
        check_numbers(_Optional(count=0))
    with pytest.raises(ValueError, match=r"^share = 1.5 is out of bounds \(<= 1.0\)$"):
        check_numbers(_Optional(share=1.5))
    with pytest.raises(ValueError, match=r"^rate = 0.0 is out of bounds \(> 0.0\)$"):
        check_numbers(_Optional(rate=0.0))
    said = r"^cost_verbatim_value = 1.0 is out of bounds \(>= 0 and < 1\)$"
    with pytest.raises(ValueError, match=said):
        check_numbers(PromptConfig(cost_verbatim_value=1.0))


def test_a_long_number_is_cut_in_the_refusal() -> None:
    bounds = "(>= 1 and <= 9223372036854775807)"
    with pytest.raises(ValueError) as raised:
        check_numbers(PromptConfig(context_window=10**40))  # 41 digits
    assert (
        str(raised.value)
        == f"context_window = {'1' + '0' * 19}...(41 digits) is out of bounds {bounds}"
    )
    with pytest.raises(ValueError) as raised:
        check_numbers(PromptConfig(context_window=10**39))  # 40 digits: shown whole
    assert str(raised.value) == f"context_window = {10**39} is out of bounds {bounds}"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """A config file in directories only root may write."""
    os.chmod(tmp_path, 0o755)
    path = tmp_path / "scoutd.toml"
    path.write_text("[daemon]\n")
    os.chmod(path, 0o644)
    return path


@AS_ROOT
def test_a_file_or_directory_of_another_uid_is_untrusted(config: Path) -> None:
    os.chown(config, 1, 0)  # uid 1 is no root
    assert untrusted_writer(str(config)) == f"{config} is owned by uid 1"


@AS_ROOT
def test_the_resolved_path_is_checked_past_what_it_shares_with_the_given_one(
    tmp_path: Path,
) -> None:
    """A link in a trusted directory to a file in one another user owns."""
    os.chmod(tmp_path, 0o755)
    trusted, theirs = tmp_path / "trusted", tmp_path / "theirs"
    trusted.mkdir(mode=0o755)
    theirs.mkdir(mode=0o755)
    (theirs / "real.toml").write_text("[daemon]\n")
    (trusted / "scoutd.toml").symlink_to(theirs / "real.toml")
    assert untrusted_writer(str(trusted / "scoutd.toml")) is None
    os.chown(theirs, NOBODY, NOBODY)
    assert untrusted_writer(str(trusted / "scoutd.toml")) == f"{theirs} is owned by uid {NOBODY}"


@pytest.fixture
def daemon_user(monkeypatch: pytest.MonkeyPatch) -> dict[int, list[str]]:
    """The daemon as uid 1000 of group 1000, with the group database given here (a
    group's members by gid; a gid missing from it is unknown): the identity of a daemon
    not run by root, which a test process run by root cannot take."""
    members: dict[int, list[str]] = {}

    def getgrgid(gid: int) -> grp.struct_group:
        if gid not in members:
            raise KeyError(gid)
        return grp.struct_group(("g", "x", gid, members[gid]))

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(os, "getegid", lambda: 1000)
    monkeypatch.setattr(grp, "getgrgid", getgrgid)
    return members


@AS_ROOT
def test_a_user_daemons_own_group_is_trusted_while_no_one_else_is_in_it(
    config: Path, daemon_user: dict[int, list[str]]
) -> None:
    os.chmod(config, 0o664)
    os.chown(config, 0, 1000)
    assert untrusted_writer(str(config)) is None  # a group unknown to the database
    daemon_user[1000] = []
    assert untrusted_writer(str(config)) is None  # its own group, no one else named in it
    daemon_user[1000] = ["mallory"]
    assert untrusted_writer(str(config)) == f"{config} is writable by group 1000"
    os.chown(config, 0, 2000)  # another group
    daemon_user[2000] = []
    assert untrusted_writer(str(config)) == f"{config} is writable by group 2000"
    os.chown(config, 0, 0)  # root's group
    assert untrusted_writer(str(config)) is None
    os.chown(config, 1000, 2000)  # the daemon's own file
    os.chmod(config, 0o644)
    assert untrusted_writer(str(config)) is None


@AS_ROOT
def test_for_a_root_daemon_only_roots_group_may_write(config: Path) -> None:
    os.chmod(config, 0o664)
    os.chown(config, 0, 0)
    assert untrusted_writer(str(config)) is None  # root's group
    os.chown(config, 0, 1000)
    assert untrusted_writer(str(config)) == f"{config} is writable by group 1000"
    os.chmod(config, 0o644)
    assert untrusted_writer(str(config)) is None  # not group-writable
    os.chmod(config, 0o755)
    assert untrusted_writer(str(config)) is None  # nor with the other bits searchable
    os.chmod(config, 0o646)
    assert untrusted_writer(str(config)) == f"{config} is writable by every user"
    os.chmod(config, 0o1646)  # a sticky bit on a file protects nothing
    assert untrusted_writer(str(config)) == f"{config} is writable by every user"


def test_a_layer_with_text_that_is_no_utf8_is_refused_naming_where() -> None:
    with pytest.raises(ConfigError) as raised:
        validated_layer({"compaction_notice": "a\udcffb"}, PromptConfig, "prompt", "the file")
    said = "invalid configuration in the file, table [prompt]: 'a\\xffb' is not UTF-8 text"
    assert str(raised.value) == said


@AS_ROOT
def test_a_root_daemon_trusts_no_group_but_roots_even_its_own(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A daemon run by root with another effective group (50, with no member)."""
    monkeypatch.setattr(os, "getegid", lambda: 50)
    monkeypatch.setattr(grp, "getgrgid", lambda gid: grp.struct_group(("g", "x", gid, [])))
    os.chmod(config, 0o664)
    os.chown(config, 0, 50)
    assert untrusted_writer(str(config)) == f"{config} is writable by group 50"
