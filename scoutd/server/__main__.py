"""``python -m scoutd.server ARGS``: the same as ``scoutd serve ARGS``."""

from __future__ import annotations

import sys

from ..cli import main

if __name__ == "__main__":
    sys.exit(main(["serve", *sys.argv[1:]]))
