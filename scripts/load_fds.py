"""``scripts/load fds``: file-descriptor exhaustion (``accept()`` failing with EMFILE)."""

from __future__ import annotations

import argparse
import contextlib
import select
import socket
import time
from typing import Any

import _reliability as rel


def run_fds(args: argparse.Namespace) -> int:
    failures: list[str] = []
    prefix = ["sh", "-c", f'ulimit -n {args.limit} && exec "$@"', "sh"]
    daemon = rel.Daemon({"log_level": "info"}, prefix=prefix)
    document: dict[str, Any] = {"command": "fds", "limit": args.limit, "clients": args.clients}
    held: list[socket.socket] = []
    try:
        daemon.start()
        for _ in range(args.clients):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(2)
            try:
                sock.connect(daemon.socket_path)
            except OSError:
                sock.close()
                break
            held.append(sock)
        document["connected"] = len(held)
        rel.wait_for(lambda: "accept failed" in daemon.log(), 15, "accept() to fail with EMFILE")
        cpu_before = rel.cpu_seconds(daemon.pid)
        time.sleep(2.0)
        cpu = rel.cpu_seconds(daemon.pid) - cpu_before
        document["cpu_percent_while_exhausted"] = round(100 * cpu / 2.0, 1)
        if cpu > 1.0:
            failures.append(f"the daemon spun while out of descriptors ({cpu:.2f} s CPU in 2 s)")
        # the connections it did accept are served meanwhile
        waiting = []
        for sock in held:
            with contextlib.suppress(OSError):
                sock.sendall(b'{"jsonrpc":"2.0","id":1,"method":"status"}\n')
                waiting.append(sock)
        served = 0
        deadline = time.monotonic() + 1.0
        while waiting and time.monotonic() < deadline:
            ready, _, _ = select.select(waiting, [], [], max(0.0, deadline - time.monotonic()))
            for sock in ready:
                waiting.remove(sock)
                with contextlib.suppress(OSError):
                    served += b'"result"' in sock.recv(65536)
        document["served_while_exhausted"] = served
        if served == 0:
            failures.append("no connection was served while descriptors ran out")
        document["daemon_fds_while_exhausted"] = rel.open_fds(daemon.pid)
        freed = time.monotonic()
        for sock in held:
            sock.close()
        held = []

        def answers() -> bool:
            try:
                with rel.LineClient(daemon.socket_path, timeout=1) as client:
                    return "result" in client.call("status")
            except (OSError, EOFError, ValueError):
                return False

        rel.wait_for(answers, 30, "a new client to be served", interval=0.02)
        document["recovery_ms"] = round((time.monotonic() - freed) * 1000, 1)
        document["log_lines_accept_failed"] = daemon.log().count("accept failed")
        if not daemon.alive():
            failures.append("the daemon died")
    finally:
        for sock in held:
            sock.close()
        daemon.cleanup(keep=args.keep)
    return rel.emit(document, as_json=args.json, failures=failures)
