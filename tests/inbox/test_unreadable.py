"""The daemon reads for an agent only what the agent could read itself.

The agent may rename into its inbox, or to its abort marker's name, a file it
cannot read: one of root's in a directory the agent may write (its own home,
a shared directory without the sticky bit; no hard link needed, so
``fs.protected_hardlinks`` does not help). The daemon, root, read it and
handed it over: as a notice, as an abort's reason, as the reason of the
marker. Now a reader of another uid reads only what the owner of the inbox
(or of the chat's directory) could read by the mode bits: the file stays in
place unread, an abort still aborts (with a generic reason).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from scoutd.inbox import inbox_dir, inbox_removed_dir, write_notice
from tests.reliability.harness import AGENT, NOBODY, unprivileged_prefix, unprivileged_python
from tests.support.daemon import Daemon

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as uid 65534")
SECRET = "TOP SECRET"


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with Daemon(daemon={"allowed_uids": [0, NOBODY], "socket_mode": 0o666}) as running:
        os.chmod(running.dir, 0o755)
        yield running


def _chat(daemon: Daemon, name: str) -> tuple[str, str]:
    """The agent's chat directory (its own) with a root-only secret file in it."""
    chat = os.path.join(daemon.dir, name)
    os.mkdir(chat, 0o755)
    os.chown(chat, NOBODY, NOBODY)
    secret = os.path.join(chat, "root-only")
    with open(secret, "w") as handle:
        handle.write(SECRET)
    os.chmod(secret, 0o600)
    return os.path.join(chat, "agent.chat"), secret


def _as_agent(code: str, *args: str) -> None:
    """Run ``code`` as uid 65534; it must succeed."""
    run = subprocess.run(
        [*unprivileged_prefix(), sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert run.returncode == 0, run.stderr


def _agent_prepares(daemon: Daemon, save_file: str) -> dict[str, Any]:
    """The agent's own client: a session, then one prepare call; its answer and pushes."""
    agent = unprivileged_python(AGENT, daemon.socket_path, save_file)
    call = ["prepare_prompt", {"messages": [{"role": "user", "content": "go"}],
                               "save_file": save_file, "strategies": "inbox"}]  # fmt: skip
    out, _ = agent.communicate(json.dumps(call) + "\n", timeout=60)
    lines = out.splitlines()
    assert len(lines) == 2, out
    answer: dict[str, Any] = json.loads(lines[1])
    return answer


def test_a_root_only_file_moved_into_the_inbox_is_not_delivered(daemon: Daemon) -> None:
    save_file, secret = _chat(daemon, "notice")
    write_notice(save_file, "a real notice", name="b.txt")  # the inbox, made for the agent
    _as_agent("import os, sys; os.rename(*sys.argv[1:])", secret, inbox_dir(save_file) + "/a.txt")
    answer = _agent_prepares(daemon, save_file)
    texts = [m["content"] for m in answer["answer"]["result"]["messages"]]
    assert texts == ["go", "a real notice"]
    assert os.listdir(inbox_dir(save_file)) == ["a.txt"]  # left in place, unread
    assert SECRET not in json.dumps(answer)
    assert "may not read it" in daemon.log()


def test_a_root_only_file_moved_in_as_the_abort_aborts_unread(daemon: Daemon) -> None:
    save_file, secret = _chat(daemon, "abort")
    write_notice(save_file, "kept", name="b.txt")
    _as_agent("import os, sys; os.rename(*sys.argv[1:])", secret, inbox_dir(save_file) + "/abort")
    answer = _agent_prepares(daemon, save_file)
    assert answer["answer"]["error"]["code"] == -32001  # it aborts all the same
    assert SECRET not in json.dumps(answer)
    assert os.listdir(inbox_dir(save_file)) == ["b.txt"]
    assert os.listdir(inbox_removed_dir(save_file)) == ["abort"]


def test_a_root_only_file_moved_in_as_the_marker_aborts_unread(daemon: Daemon) -> None:
    save_file, secret = _chat(daemon, "marker")
    marker = save_file[: -len(".chat")] + ".inbox_aborted"
    _as_agent("import os, sys; os.rename(*sys.argv[1:])", secret, marker)
    answer = _agent_prepares(daemon, save_file)
    assert answer["answer"]["error"]["code"] == -32001  # aborted: a marker is there
    assert SECRET not in json.dumps(answer)


# The agent opens a session and prints the first two lines the daemon sends.
OPENS = r"""
import json, os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.settimeout(20); s.connect(sys.argv[1])
lines = s.makefile("rb")
params = {"save_file": sys.argv[2], "pid": os.getpid()}
s.sendall(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "session.open", "params": params})
          .encode() + b"\n")
for _ in range(2):
    print(lines.readline().decode().strip(), flush=True)
"""


def test_a_root_only_file_moved_in_as_the_marker_is_not_pushed_at_open(daemon: Daemon) -> None:
    """``session.open`` on a marked chat pushes the marker's reason: never the secret."""
    save_file, secret = _chat(daemon, "opened")
    marker = save_file[: -len(".chat")] + ".inbox_aborted"
    _as_agent("import os, sys; os.rename(*sys.argv[1:])", secret, marker)
    agent = unprivileged_python(OPENS, daemon.socket_path, save_file)
    out, _ = agent.communicate(timeout=60)
    pushed = json.loads(out.splitlines()[0])
    assert pushed["method"] == "session.aborted"
    assert pushed["params"]["reason"] == f"aborted by operator (abort marker {marker})"


def test_what_the_agent_can_read_is_delivered_as_ever(daemon: Daemon) -> None:
    """Notices of root (0644), of the agent (0600) and an abort of root: as before."""
    save_file, _ = _chat(daemon, "plain")
    write_notice(save_file, "from root", name="a.txt")
    _as_agent(
        "import os, sys; fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o600);"
        " os.write(fd, b'from the agent'); os.close(fd); os.utime(sys.argv[1], (0, 0))",
        inbox_dir(save_file) + "/b.txt",
    )
    answer = _agent_prepares(daemon, save_file)
    texts = [m["content"] for m in answer["answer"]["result"]["messages"]]
    assert texts == ["go", "from root", "from the agent"]
