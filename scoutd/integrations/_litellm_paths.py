"""Whether an operator's abort can reach the chat a LiteLLM proxy request names.

Apart from :mod:`scoutd.integrations.litellm` to keep that module to its hook.
"""

from __future__ import annotations

import errno
import os
import stat

from ..inbox.names import inbox_dir
from ..paths import display_path

__all__ = ["unreachable"]


def unreachable(save_file: str) -> str | None:
    """Why no operator's abort can reach the chat of ``save_file``, or None.

    Its directory does not exist, or a name on the way to its inbox is longer
    than the file system allows (``ENAMETOOLONG``): ``scoutd abort`` cannot
    write there, so the chat would be served unsupervised for good. A directory
    that exists but cannot be looked at is left to the inbox's own check, which
    fails closed (docs/RELIABILITY.md, "An abort fails closed").
    """
    directory = os.path.dirname(save_file)
    try:
        missing = not stat.S_ISDIR(os.stat(directory).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        missing = True
    except OSError as exc:  # EACCES, ELOOP...: the inbox's check fails closed on it
        missing = exc.errno == errno.ENAMETOOLONG
    if missing:
        return (
            f"the chat's directory {display_path(directory)} does not exist, so no "
            "operator's abort can reach the chat (a mistyped path, or one not sent as its "
            "bytes? a new chat's directory must be made first)"
        )
    inbox = inbox_dir(save_file)
    try:
        os.lstat(inbox)
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            return (
                f"the chat's inbox {display_path(inbox)} has a name longer than the file "
                "system allows, so no operator's abort can reach the chat"
            )
    return None
