"""ConfigFileWatch in process: which batches concern the configuration file, and what it watches.

The watcher is the real one (watchdog's inotify reader); most batches are
built by hand, so that each test says exactly which paths a batch names,
and one test takes a real batch of the real watcher.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from scoutd.config_watch import ConfigFileWatch
from scoutd.watcher import Batch, FsWatcher

pytestmark = pytest.mark.anyio
WAIT = 5.0


@pytest.fixture
async def watcher() -> AsyncIterator[FsWatcher]:
    async with FsWatcher("native") as running:
        yield running


def batch(*paths: str | Path, overflow: bool = False) -> Batch:
    return Batch(paths={str(path) for path in paths}, overflow=overflow)


def rewrite(path: Path, text: str) -> None:
    """Change the file's content in place (the inode stays)."""
    with open(path, "w") as handle:
        handle.write(text)


async def watching(watcher: FsWatcher, path: Path | None) -> ConfigFileWatch:
    watch = ConfigFileWatch(watcher, None if path is None else str(path))
    await watch.start()
    return watch


async def test_without_a_file_nothing_is_watched_and_nothing_concerns_it(
    watcher: FsWatcher, tmp_path: Path
) -> None:
    watch = await watching(watcher, None)
    assert watcher.watched == []
    assert not await watch.concerns(batch(tmp_path / "scoutd.toml", overflow=True))


async def test_a_change_concerns_it_once(watcher: FsWatcher, tmp_path: Path) -> None:
    """An edit in place is a change; the next batch over the same file, unchanged, is not."""
    config = tmp_path / "scoutd.toml"
    rewrite(config, "[prompt]\n")
    watch = await watching(watcher, config)
    assert watcher.watched == [str(tmp_path)]
    assert not await watch.concerns(batch(config))  # named, but as it was at start
    rewrite(config, "[prompt]\nepoch_size = 7\n")  # longer: the size differs
    assert await watch.concerns(batch(config))
    assert not await watch.concerns(batch(config))


@pytest.mark.parametrize("named", ["the file", "its directory", "a file beside it"])
async def test_any_path_in_its_directory_makes_it_look(
    watcher: FsWatcher, tmp_path: Path, named: str
) -> None:
    config = tmp_path / "scoutd.toml"
    rewrite(config, "a")
    watch = await watching(watcher, config)
    rewrite(config, "b")
    # same size: the times tell (set apart, whatever the clock's resolution)
    os.utime(config, ns=(1_000_000_000, 1_000_000_000))
    path = {"the file": config, "its directory": tmp_path, "a file beside it": tmp_path / "x"}
    assert await watch.concerns(batch(path[named]))


async def test_a_batch_elsewhere_is_not_looked_at_and_the_change_waits(
    watcher: FsWatcher, tmp_path: Path
) -> None:
    """A batch of other directories does not stat the file: the change it missed is
    found at the next batch that touches the file's directory."""
    (tmp_path / "conf").mkdir()
    (tmp_path / "inboxes").mkdir()
    config = tmp_path / "conf" / "scoutd.toml"
    rewrite(config, "a")
    watch = await watching(watcher, config)
    rewrite(config, "bb")
    assert not await watch.concerns(batch(tmp_path / "inboxes" / "abort", tmp_path / "conf2"))
    assert await watch.concerns(batch(tmp_path / "conf" / "other"))


async def test_an_overflow_makes_it_look_whatever_the_paths(
    watcher: FsWatcher, tmp_path: Path
) -> None:
    (tmp_path / "conf").mkdir()
    config = tmp_path / "conf" / "scoutd.toml"
    rewrite(config, "a")
    watch = await watching(watcher, config)
    assert not await watch.concerns(batch(overflow=True))  # looked: unchanged
    rewrite(config, "bb")
    assert await watch.concerns(batch(tmp_path / "elsewhere", overflow=True))


async def test_a_file_renamed_over_it_is_a_change_even_of_the_same_size_and_times(
    watcher: FsWatcher, tmp_path: Path
) -> None:
    """The editor's way: a new file renamed over the old one (another inode)."""
    config = tmp_path / "scoutd.toml"
    rewrite(config, "a")
    os.utime(config, ns=(5, 5))
    watch = await watching(watcher, config)
    new = tmp_path / "scoutd.toml.new"
    rewrite(new, "b")
    os.utime(new, ns=(5, 5))
    os.rename(new, config)
    assert await watch.concerns(batch(config))


async def test_removed_and_made_again_are_two_changes(watcher: FsWatcher, tmp_path: Path) -> None:
    config = tmp_path / "scoutd.toml"
    rewrite(config, "a")
    watch = await watching(watcher, config)
    config.unlink()
    assert await watch.concerns(batch(config))  # gone: the reload says so
    assert not await watch.concerns(batch(config))  # still gone: nothing new
    rewrite(config, "a")
    assert await watch.concerns(batch(config))


async def test_a_file_missing_at_start_concerns_it_when_it_appears(
    watcher: FsWatcher, tmp_path: Path
) -> None:
    config = tmp_path / "scoutd.toml"
    watch = await watching(watcher, config)
    assert watcher.watched == [str(tmp_path)]
    assert not await watch.concerns(batch(config))
    rewrite(config, "")
    assert await watch.concerns(batch(config))


async def test_a_swapped_symlink_moves_the_watch_to_where_it_leads(
    watcher: FsWatcher, tmp_path: Path
) -> None:
    """``scoutd.toml -> ..data/scoutd.toml``, ``..data -> ..v1``, then ``..v2``: the
    directory as given stays watched, the resolved one follows the swap."""
    conf = tmp_path / "conf"
    for version, text in (("..v1", "a"), ("..v2", "a")):
        (conf / version).mkdir(parents=True)
        rewrite(conf / version / "scoutd.toml", text)
    (conf / "..data").symlink_to("..v1")
    (conf / "scoutd.toml").symlink_to(Path("..data") / "scoutd.toml")
    watch = await watching(watcher, conf / "scoutd.toml")
    assert sorted(watcher.watched) == [str(conf), str(conf / "..v1")]
    (conf / "..data_tmp").symlink_to("..v2")
    os.rename(conf / "..data_tmp", conf / "..data")
    # the same content, size and (maybe) times: another path and inode
    assert await watch.concerns(batch(conf / "..data"))
    assert sorted(watcher.watched) == [str(conf), str(conf / "..v2")]
    rewrite(conf / "..v2" / "scoutd.toml", "bb")
    assert await watch.concerns(batch(conf / "..v2" / "scoutd.toml"))  # watched there now
    rewrite(conf / "..v1" / "scoutd.toml", "ccc")  # the old version: no longer the file
    assert not await watch.concerns(batch(conf / "..v1" / "scoutd.toml"))


async def test_a_watch_it_shares_with_an_inbox_outlives_its_move(
    watcher: FsWatcher, tmp_path: Path
) -> None:
    """The watcher counts references: the config's move away from a directory leaves
    the watch another user of it (an inbox's) holds."""
    conf = tmp_path / "conf"
    (conf / "..v1").mkdir(parents=True)
    (conf / "..v2").mkdir()
    rewrite(conf / "..v1" / "scoutd.toml", "a")
    rewrite(conf / "..v2" / "scoutd.toml", "b")
    (conf / "..data").symlink_to("..v1")
    (conf / "scoutd.toml").symlink_to(Path("..data") / "scoutd.toml")
    await watcher.add(str(conf / "..v1"))  # someone else's reference
    watch = await watching(watcher, conf / "scoutd.toml")
    (conf / "..data_tmp").symlink_to("..v2")
    os.rename(conf / "..data_tmp", conf / "..data")
    assert await watch.concerns(batch(conf / "..data"))
    assert sorted(watcher.watched) == [str(conf), str(conf / "..v1"), str(conf / "..v2")]


async def test_a_real_edit_reaches_it_through_the_watcher(
    watcher: FsWatcher, tmp_path: Path
) -> None:
    """The real watcher's batch for an edit in place concerns the file (at most
    ``WAIT`` seconds for the batch that does)."""
    config = tmp_path / "scoutd.toml"
    rewrite(config, "a")
    watch = await watching(watcher, config)
    rewrite(config, "[prompt]\nepoch_size = 9\n")
    with anyio.fail_after(WAIT):
        while not await watch.concerns(await watcher.next_batch()):
            pass
