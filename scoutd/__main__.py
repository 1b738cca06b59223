"""``python -m scoutd``: the same as the ``scoutd`` command."""

from __future__ import annotations

from .cli import run

if __name__ == "__main__":
    run()
