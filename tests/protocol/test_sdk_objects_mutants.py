"""Where an SDK's objects are not looked for: in a message that is no mapping, or
while what is loaded as pydantic has no model class.

Only a message, a value of a message and an item of a list value of a message are
read (docs/FORMATS.md); a list or tuple given as a message is left as it is, even
when a model lies in it and another message of the conversation holds one. A
module named pydantic without a ``BaseModel`` class (one still being imported, a
stand-in) means no model can exist: nothing is read, nothing fails.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import pydantic
import pytest

from scoutd.protocol.sdk_objects import model_class, sent_forms


class Said(pydantic.BaseModel):
    role: str = "assistant"
    content: str | None = None


@pytest.mark.parametrize("kind", [list, tuple])
def test_a_model_inside_a_message_of_no_mapping_is_left_as_it_is(kind: type) -> None:
    inner = Said(content="inside")
    odd: Any = kind([inner, {"role": "user", "content": "x"}])
    result = sent_forms([Said(content="hi"), odd, "text"])
    assert result is not None
    assert result[0] == {"content": "hi"}
    assert result[1] is odd
    assert result[1][0] is inner
    assert result[2] == "text"


@pytest.mark.parametrize("base", ["absent", "no class", "a class"])
def test_a_pydantic_module_without_a_model_class(
    base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    stand_in = types.ModuleType("pydantic")
    if base == "no class":
        stand_in.BaseModel = "not a class"  # type: ignore[attr-defined]
    elif base == "a class":
        stand_in.BaseModel = Said  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pydantic", stand_in)
    messages = [{"role": "user", "content": "x"}, Said(content="hi")]
    if base == "a class":
        assert model_class() is Said
        assert sent_forms(messages) == [messages[0], {"content": "hi"}]
    else:
        assert model_class() is None
        assert sent_forms(messages) is None
