"""``python -m scoutd.simulate``: the simulator without the ``scoutd`` CLI."""

from __future__ import annotations

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
