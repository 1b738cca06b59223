"""The worker process of ``scripts/fuzz-rpc`` (``fuzz-rpc _worker ...``).

It sends its share of generated frames on one connection, each followed by a
``status`` sentinel, checks that every frame got exactly the answer it is owed,
and prints its report as one JSON line. Its count of frames sent goes, now and
then, to a small file that the parent's progress bar reads.
"""

from __future__ import annotations

import collections
import json
import os
import random
import time

import _reliability as rel
from fuzz_rpc_frames import Frame
from fuzz_rpc_generator import Generator

ANSWER_TIMEOUT = 30.0  # seconds for the answers owed to one frame
PROGRESS_EVERY = 250  # frames between two progress counts a worker writes


def _check_answer(line: bytes, frame: Frame) -> tuple[str | None, int | None]:
    """(problem or None, error code or None) for one answer line."""
    try:
        message = json.loads(line)
    except ValueError:
        return f"answer is not JSON: {line[:200]!r}", None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or "id" not in message:
        return f"not a JSON-RPC response: {line[:200]!r}", None
    if ("result" in message) == ("error" in message):
        return f"needs exactly one of result/error: {line[:200]!r}", None
    rid = message["id"]
    if rid is not None and (frame.id is None or rid != frame.id):
        return f"answer id {rid!r} is not the frame's {frame.id!r}", None
    if "error" in message:
        error = message["error"]
        if (
            not isinstance(error, dict)
            or not isinstance(error.get("code"), int)
            or not isinstance(error.get("message"), str)
            or not set(error) <= {"code", "message", "data"}
        ):
            return f"malformed error object: {line[:200]!r}", None
        code = int(error["code"])
        if frame.expect is not None and code != frame.expect:
            return f"error {code}, not {frame.expect}: {line[:200]!r}", code
        return None, code
    if frame.expect is not None:
        return f"a result, not error {frame.expect}: {line[:200]!r}", None
    return None, None


def write_count(path: str, count: int) -> None:
    """Replace the count of frames sent at ``path`` (whole, by rename: never read half)."""
    with open(path + ".new", "w", encoding="ascii") as handle:
        handle.write(str(count))
    os.replace(path + ".new", path)


def read_count(path: str) -> int:
    """A worker's last count of frames sent; 0 before it wrote one."""
    try:
        with open(path, encoding="ascii") as handle:
            return int(handle.read() or 0)
    except (OSError, ValueError):
        return 0


def worker(
    socket_path: str, frames: int, seed: int, root: str, limit: int, counter: str | None = None
) -> int:
    """Send ``frames`` frames on one connection; print a JSON report.

    ``counter``: a file where the count of frames sent so far is written now
    and then, for the parent's progress bar.
    """
    rng = random.Random(seed)
    gen = Generator(rng, root, limit)
    client = rel.LineClient(socket_path, timeout=ANSWER_TIMEOUT)
    categories: collections.Counter[str] = collections.Counter()
    codes: collections.Counter[str] = collections.Counter()
    violations: list[str] = []
    slowest = 0.0
    answered = silent = 0
    for n in range(frames):
        if counter is not None and n % PROGRESS_EVERY == 0:
            write_count(counter, n)
        frame = gen.frame()
        categories[frame.category] += 1
        sentinel = f"~s{seed}-{n}"
        started = time.monotonic()
        client.send_raw(
            frame.data
            + b"\n"
            + json.dumps({"jsonrpc": "2.0", "id": sentinel, "method": "status"}).encode()
            + b"\n"
        )
        owed = 0 if frame.silent else 1
        got: list[bytes] = []
        seen_sentinel = False
        line = b""
        try:
            while not seen_sentinel or len(got) < owed:
                line = client.read_line(ANSWER_TIMEOUT)
                if not line:
                    violations.append(f"connection closed after a {frame.category} frame")
                    break
                if line.startswith(b'{"jsonrpc":"2.0","id":"' + sentinel.encode() + b'"'):
                    seen_sentinel = True
                else:
                    got.append(line)
        except TimeoutError:
            violations.append(f"{frame.category} frame: {len(got)} of {owed} answer(s) in time")
            line = b""  # the connection is out of step: stop here, the report says why
        if not line:
            break
        slowest = max(slowest, time.monotonic() - started)
        if len(got) != owed:
            kind = "notification" if frame.silent else "request"
            violations.append(
                f"{frame.category} {kind} got {len(got)} answer(s): {frame.data[:120]!r}"
            )
        for answer in got[:owed]:
            problem, code = _check_answer(answer, frame)
            codes[str(code) if code is not None else "result"] += 1
            if problem is not None:
                violations.append(f"{problem}; frame {frame.data[:120]!r}")
        answered += len(got)
        silent += frame.silent
    client.close()
    if counter is not None:
        write_count(counter, frames)
    print(
        json.dumps(
            {
                "frames": sum(categories.values()),
                "answered": answered,
                "silent": silent,
                "categories": dict(categories),
                "codes": dict(codes),
                "slowest_ms": round(slowest * 1000, 1),
                "violations": violations[:50],
                "violation_count": len(violations),
            }
        )
    )
    return 0
