"""Fleet mode: notices and aborts for many hosts through Redis Streams (docs/OPERATIONS.md).

Optional (``scoutd[fleet]``, a ``[fleet]`` table in the config): without it
nothing here is imported. The pure parts (:mod:`.wire`: the Structs on the
streams and the key names; :mod:`.select`: which chats a command reaches) are
apart from the I/O: :mod:`.deliver` writes into inboxes and keeps the record
of delivered commands, :mod:`.link` opens the Redis connection, :mod:`.agent`
is the daemon's side and :mod:`.operator` the operator's.
"""

from __future__ import annotations
