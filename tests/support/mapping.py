"""A message that is a mapping but not a ``dict``: a client's or an SDK's own type."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["Message"]


class Message(Mapping[str, Any]):
    """A read-only mapping of the fields given."""

    def __init__(self, **fields: Any) -> None:
        self.fields = fields

    def __getitem__(self, key: str) -> Any:
        return self.fields[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.fields)

    def __len__(self) -> int:
        return len(self.fields)
