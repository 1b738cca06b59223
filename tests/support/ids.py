"""Another user than the one running the tests, and the mark of a test that needs root to
make files of it: uid and gid 65534 (``nobody``)."""

from __future__ import annotations

import os

import pytest

NOBODY = 65534
AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to own files as another uid")
