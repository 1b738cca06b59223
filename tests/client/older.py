"""A daemon as it was before one of ``prepare_prompt``'s params existed.

The real daemon, run as ``python -m older_scoutd``, whose ``prepare_prompt``
params lack the fields named in ``$OLDER_WITHOUT`` (comma-separated): a
request that sends one is refused as an unknown field, as a daemon from
before it refuses it. The client must notice and go on without it.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Sequence

from ..support.daemon import Daemon
from .helpers import PROMPT

OLDER_MODULE = textwrap.dedent(
    '''
    """``python -m older_scoutd``: the daemon without some of ``prepare_prompt``'s params."""
    import os
    import sys

    import msgspec

    from scoutd.cli import main
    from scoutd.protocol import codec, messages

    without = set(os.environ["OLDER_WITHOUT"].split(","))
    current = messages.PreparePromptParams
    fields = msgspec.structs.fields(current)
    older = msgspec.defstruct(
        "PreparePromptParams",
        [
            (f.name, f.type, msgspec.field(default=f.default))
            for f in fields
            if f.name not in without
        ],
        kw_only=True,
        forbid_unknown_fields=True,
        omit_defaults=True,
        # what the handlers read of a missing field: its default
        namespace={
            **{f.name: f.default for f in fields if f.name in without},
            "__post_init__": current.__post_init__,
        },
    )
    envelope = msgspec.defstruct(
        "Envelope",
        [
            ("jsonrpc", str),
            ("method", str),
            ("params", older),
            ("id", int | str | None | msgspec.UnsetType, msgspec.UNSET),
        ],
        kw_only=True,
    )
    messages.METHOD_PARAMS["prepare_prompt"] = older
    codec._decode_prepare = msgspec.json.Decoder(envelope).decode
    sys.exit(main())
    '''
)


class OlderDaemon(Daemon):
    """A daemon subprocess whose ``prepare_prompt`` refuses the fields ``without``."""

    def __init__(self, without: Sequence[str]) -> None:
        super().__init__(prompt=PROMPT, env={"OLDER_WITHOUT": ",".join(without)})
        with open(os.path.join(self.dir, "older_scoutd.py"), "w") as handle:
            handle.write(OLDER_MODULE)

    def command(self) -> list[str]:
        command = super().command()
        return [command[0], "-m", "older_scoutd", *command[3:]]
