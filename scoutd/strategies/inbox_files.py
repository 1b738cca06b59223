"""The former home of :mod:`scoutd.inbox.claim`; this name is that module itself.

Importing ``scoutd.strategies.inbox_files`` gives :mod:`scoutd.inbox.claim`
(the same module object, so setting ``SETTLE_TIME`` here changes the claim's).
"""

from __future__ import annotations

import sys

from ..inbox import claim
from ..inbox.claim import MAX_SETTLE_WAIT, SETTLE_TIME, NotSettled, Taken, settled, take

__all__ = ["MAX_SETTLE_WAIT", "SETTLE_TIME", "NotSettled", "Taken", "settled", "take"]

sys.modules[__name__] = claim
