"""Worker for the inbox concurrency test: empty one inbox, report what it delivered.

Usage: ``python inbox_worker.py SAVE_FILE OUTPUT_JSON``. Prints ``ready``, waits
for ``go`` on stdin (the start barrier shared by all workers), then calls the
``inbox`` strategy until the inbox holds no visible file (bounded in calls and
time) and writes the delivered contents, a JSON list, to OUTPUT_JSON.
"""

from __future__ import annotations

import json
import os
import sys
import time

from scoutd.config import PromptConfig
from scoutd.strategies.inbox import inbox, inbox_dir

MAX_CALLS = 10_000
MAX_SECONDS = 60.0


def main(argv: list[str]) -> int:
    save_file, output = argv[1], argv[2]
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return 2
    config = PromptConfig()
    directory = inbox_dir(save_file)
    delivered: list[str] = []
    deadline = time.monotonic() + MAX_SECONDS
    for _ in range(MAX_CALLS):
        messages, report = inbox([], config, save_file=save_file)
        delivered.extend(message["content"] for message in messages)
        assert report.inbox_delivered == len(messages)
        visible = [name for name in os.listdir(directory) if not name.startswith(".")]
        if not visible or time.monotonic() > deadline:
            break
    partial = output + ".part"
    with open(partial, "w", encoding="utf-8") as stream:
        json.dump(delivered, stream)
    os.replace(partial, output)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
