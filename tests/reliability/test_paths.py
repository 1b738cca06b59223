"""Path escape: ``save_file`` must resolve under ``allowed_roots`` or get ``forbidden``.

Tried over the wire on both methods that take a save file, against a daemon
whose only allowed root is ``<tmp>/root``: ``..``, symlinked parent
directories, relative paths, NUL bytes, very long paths, other users' and
system directories, a root whose name is a prefix of another. Also: an inbox or
removed directory that is itself a symlink out of the root is never followed.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import pytest

from scoutd import protocol
from scoutd.strategies.inbox import inbox_dir, inbox_removed_dir, write_notice
from tests.support.daemon import Daemon, LineClient

HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    d = Daemon()
    root = os.path.join(d.dir, "root")
    outside = os.path.join(d.dir, "outside")
    for path in (root, outside, os.path.join(root, "real"), os.path.join(d.dir, "rootevil")):
        os.makedirs(path)
    os.symlink(outside, os.path.join(root, "out-link"))
    os.symlink(os.path.join(root, "real"), os.path.join(root, "in-link"))
    os.symlink(os.path.join(root, "out-link"), os.path.join(root, "chain"))
    os.symlink(os.path.join(root, "loop"), os.path.join(root, "loop"))
    d.daemon["allowed_roots"] = [root]
    d.write_config()
    with d:
        yield d


def calls(c: LineClient, save_file: str) -> list[dict[str, object]]:
    return [
        c.call("session.open", {"save_file": save_file}),
        c.call("prepare_prompt", {"messages": HELLO, "save_file": save_file}),
    ]


def test_escapes_are_forbidden(daemon: Daemon) -> None:
    root = os.path.join(daemon.dir, "root")
    escapes = [
        os.path.join(root, "..", "outside", "a.chat"),
        os.path.join(root, "real", "..", "..", "outside", "a.chat"),
        os.path.join(root, "out-link", "a.chat"),
        os.path.join(root, "chain", "a.chat"),
        os.path.join(root, "in-link", "..", "..", "outside", "a.chat"),
        os.path.join(daemon.dir, "rootevil", "a.chat"),  # shares the root's name prefix
        "a.chat",
        "./root/a.chat",
        "../a.chat",
        "",
        root + "/",
        root + "/..",
        os.path.join(root, "nul\x00.chat"),
        "\x00",
        "/" + "x" * 5000 + "/a.chat",
        "/" + "/".join(["d" * 200] * 30) + "/a.chat",
        "/etc/passwd",
        "/root/.ssh/authorized_keys",
        "/home/someone-else/chats/a.chat",
        "/proc/1/environ",
        "/dev/null",
        "//etc/shadow",
    ]
    with daemon.connect() as c:
        for save_file in escapes:
            for reply in calls(c, save_file):
                error = reply.get("error")
                assert isinstance(error, dict), (save_file, reply)
                assert error["code"] == protocol.FORBIDDEN, (save_file, reply)
                assert error["data"]["reason"]
        counts = c.call("status")["result"]["counts"]
        assert counts["sessions"] == 0
    assert "Traceback" not in daemon.log()


def test_paths_that_stay_inside_are_served(daemon: Daemon) -> None:
    root = os.path.join(daemon.dir, "root")
    inside = [
        os.path.join(root, "a.chat"),
        os.path.join(root, "real", "..", "b.chat"),
        os.path.join(root, "in-link", "c.chat"),  # a symlink that stays inside
        os.path.join(root, "new", "dir", "d.chat"),  # need not exist yet
        os.path.join(root, "x" * 250 + ".chat"),
        os.path.join(root, "/".join(["d" * 200] * 30), "e.chat"),  # longer than PATH_MAX
    ]
    with daemon.connect() as c:
        for save_file in inside:
            opened, prepared = calls(c, save_file)
            assert "result" in opened, (save_file, opened)
            assert "result" in prepared, (save_file, prepared)
        assert c.call("status")["result"]["counts"]["sessions"] == len(inside)
    assert not os.path.exists(os.path.join(root, "new"))  # nothing was created
    assert "Traceback" not in daemon.log()


def test_a_symlink_loop_above_the_save_file_fails_closed(daemon: Daemon) -> None:
    """Nothing can be opened there, so nobody can tell whether an abort waits: not served.

    (It used to be served as if the inbox did not exist.)
    """
    save_file = os.path.join(daemon.dir, "root", "loop", "f.chat")
    with daemon.connect() as c:
        opened, prepared = calls(c, save_file)
        assert "result" in opened, opened
        assert prepared["error"]["code"] == protocol.ABORTED, prepared
        assert "cannot be used" in prepared["error"]["data"]["reason"]
        note = c.notification("session.aborted", 5.0)
        assert "symbolic links" in note["params"]["reason"]
    assert "Traceback" not in daemon.log()


def test_a_symlinked_save_file_is_not_followed(daemon: Daemon) -> None:
    """The save file itself may be a symlink: its inbox is a sibling of the link."""
    root = os.path.join(daemon.dir, "root")
    target = os.path.join(daemon.dir, "outside", "victim.chat")
    link = os.path.join(root, "link.chat")
    os.symlink(target, link)
    write_notice(link, "beside the link")
    with daemon.connect() as c:
        reply = c.call("prepare_prompt", {"messages": [], "save_file": link})
        assert reply["result"]["messages"] == [{"role": "user", "content": "beside the link"}]
    assert os.listdir(os.path.join(daemon.dir, "outside")) == []


def test_an_inbox_symlinked_out_of_the_root_is_never_followed(daemon: Daemon) -> None:
    root = os.path.join(daemon.dir, "root")
    outside = os.path.join(daemon.dir, "outside")
    with open(os.path.join(outside, "secret.txt"), "w") as handle:
        handle.write("TOP SECRET")
    with open(os.path.join(outside, "abort"), "w") as handle:
        handle.write("someone else's abort")
    save_file = os.path.join(root, "a.chat")
    os.symlink(outside, inbox_dir(save_file))
    with daemon.connect() as c:
        session = c.call("session.open", {"save_file": save_file})["result"]["session"]
        # It fails closed (it used to be served as if there were no inbox): an
        # inbox that exists but cannot be used may hide an abort.
        note = c.notification("session.aborted", 5.0)
        assert note["params"]["session"] == session
        assert "is a symbolic link, not followed" in note["params"]["reason"]
        reply = c.call("prepare_prompt", {"messages": [], "save_file": save_file})
        assert reply["error"]["code"] == protocol.ABORTED, reply
        assert "is a symbolic link, not followed" in reply["error"]["data"]["reason"]
    assert sorted(os.listdir(outside)) == ["abort", "secret.txt"]  # nothing taken, nothing read
    assert not os.path.exists(inbox_removed_dir(save_file))
    assert "is a symbolic link, not followed" in daemon.log()


def test_a_removed_directory_symlinked_out_of_the_root_is_never_followed(daemon: Daemon) -> None:
    root = os.path.join(daemon.dir, "root")
    outside = os.path.join(daemon.dir, "outside")
    save_file = os.path.join(root, "b.chat")
    write_notice(save_file, "stays home", name="note.txt")
    os.symlink(outside, inbox_removed_dir(save_file))
    with daemon.connect() as c:
        reply = c.call("prepare_prompt", {"messages": [], "save_file": save_file})
        assert reply["result"]["messages"] == []
    assert os.listdir(outside) == []
    assert os.listdir(inbox_dir(save_file)) == ["note.txt"]
    assert "is a symbolic link, not followed" in daemon.log()


def test_a_chain_of_a_thousand_symlinks_is_forbidden_or_resolved(daemon: Daemon) -> None:
    """``realpath`` recursed once per link: 1,200 made it raise ``RecursionError``.

    The daemon answered ``-32602`` "nested too deeply - at $.params", blaming
    the frame; the kernel itself stops at 40 links. Where this interpreter's
    ``realpath`` still recurses (Python 3.11, 3.12) the path is refused as having
    too many links; where it does not (3.13) the chain is followed to the
    directory it names, inside the root, and served.
    """
    root = os.path.join(daemon.dir, "root")
    os.symlink("real", os.path.join(root, "l0"))
    for i in range(1, 1201):
        os.symlink(f"l{i - 1}", os.path.join(root, f"l{i}"))
    save_file = os.path.join(root, "l1200", "a.chat")
    try:
        os.path.realpath(os.path.dirname(save_file))
    except RecursionError:
        recurses = True
    else:
        recurses = False
    with daemon.connect() as c:
        for answer in calls(c, save_file):
            if recurses:
                error = answer["error"]
                assert isinstance(error, dict) and error["code"] == protocol.FORBIDDEN, answer
                assert "too many symbolic links" in error["data"]["reason"]
            else:
                assert "result" in answer, answer


def test_a_path_swapped_while_it_is_resolved_is_never_an_internal_error(daemon: Daemon) -> None:
    """A directory swapped for a symlink in a loop: refused or served, never ``-32603``.

    ``realpath`` raised ``FileNotFoundError`` when a link it had seen was
    renamed away before it read it: an internal error with a traceback in the
    log, about one call in seven.
    """
    root = os.path.join(daemon.dir, "root")
    target = os.path.join(daemon.dir, "outside")
    write_notice(os.path.join(target, "a.chat"), "TOP SECRET", name="n.txt")
    swapped = os.path.join(root, "d")
    os.mkdir(swapped + ".real")
    os.symlink(target, swapped + ".link")
    os.lchown(swapped + ".link", 65534, 65534)  # an agent's link: the daemon never follows it
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            os.rename(swapped + ".real", swapped)
            os.rename(swapped, swapped + ".real")
            os.rename(swapped + ".link", swapped)
            os.rename(swapped, swapped + ".link")

    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    codes: dict[object, int] = {}
    try:
        with daemon.connect() as c:
            deadline = time.monotonic() + 3.0
            while time.monotonic() < deadline:
                for answer in calls(c, os.path.join(swapped, "a.chat")):
                    assert "TOP SECRET" not in str(answer)
                    error = answer.get("error")
                    code = error.get("code") if isinstance(error, dict) else None
                    codes[code] = codes.get(code, 0) + 1
    finally:
        stop.set()
        swapper.join(10)
    assert protocol.INTERNAL_ERROR not in codes, codes
    assert protocol.FORBIDDEN in codes, codes  # the race was run: the link was seen
    assert "Traceback" not in daemon.log()
    assert os.listdir(inbox_dir(os.path.join(target, "a.chat"))) == ["n.txt"]
