"""The error table's less travelled entries: prefixes, ids, and malformed data.

A client must turn whatever error the daemon sends into the right exception,
also when ``data`` is missing, of the wrong type, or only partly filled in;
the daemon must keep the request id and the structured data of every kind.
"""

from __future__ import annotations

from typing import Any

import pytest

from scoutd import protocol
from scoutd.errors import Aborted, ConfigError, RemoteError, UnknownStrategy
from scoutd.protocol.error_table import (
    about_base,
    about_overrides,
    about_replace,
    error_for,
    exception_for,
    too_large_limit,
)
from scoutd.protocol.messages import ErrorObject


def test_every_kind_keeps_the_request_id_the_prefix_and_its_data() -> None:
    unknown = error_for(UnknownStrategy("nope", ["b", "a"]), 7, prefix="p: ")
    assert (unknown.code, unknown.id) == (protocol.UNKNOWN_STRATEGY, 7)
    assert unknown.message == "p: unknown prompt strategy 'nope'; available: a, b"
    assert unknown.data == protocol.UnknownStrategyData(name="nope", available=["a", "b"])
    config = error_for(ConfigError("bad key x"), "r", prefix="invalid configuration: ")
    assert (config.code, config.id) == (protocol.CONFIG_INVALID, "r")
    assert config.message == "invalid configuration: bad key x"
    assert config.data == protocol.ConfigInvalidData(error="bad key x")
    aborted = error_for(Aborted("stop"), None)
    assert (aborted.message, aborted.id) == ("stop", None)  # no prefix by default
    assert aborted.data == protocol.AbortedData(reason="stop", save_file=None, session=None)


def _error(code: int, data: Any, message: str = "the message") -> ErrorObject:
    return ErrorObject(code=code, message=message, data=data)


def test_an_abort_takes_its_reason_from_the_data_else_the_message() -> None:
    back = exception_for(_error(protocol.ABORTED, {"reason": "stop"}, "aborted: stop"))
    assert type(back) is Aborted and back.reason == "stop"
    for data in (None, {}, {"reason": 3}, ["reason", "x"]):
        back = exception_for(_error(protocol.ABORTED, data, "aborted: why"))
        assert type(back) is Aborted and back.reason == "aborted: why"


def test_an_unknown_strategy_needs_its_name_and_list() -> None:
    back = exception_for(_error(protocol.UNKNOWN_STRATEGY, {"name": "n", "available": [1, "b"]}))
    assert type(back) is UnknownStrategy
    assert (back.name, back.available) == ("n", ["1", "b"])
    for data in ({"name": "n"}, {"available": ["a"]}, {"name": 1, "available": ["a"]}, "n"):
        other = exception_for(_error(protocol.UNKNOWN_STRATEGY, data))
        assert type(other) is RemoteError
        assert (other.code, other.data) == (protocol.UNKNOWN_STRATEGY, data)


def test_a_config_error_takes_its_detail_from_the_data_else_the_message() -> None:
    back = exception_for(_error(protocol.CONFIG_INVALID, {"error": "bad key"}, "invalid: bad key"))
    assert type(back) is ConfigError and str(back) == "bad key"
    for data in (None, {"error": None}, {"error": ["x"]}):
        back = exception_for(_error(protocol.CONFIG_INVALID, data, "invalid: bad"))
        assert type(back) is ConfigError and str(back) == "invalid: bad"
    overrides = {"path": "$.params.config", "error": "Expected `object`"}
    back = exception_for(_error(protocol.INVALID_PARAMS, overrides, "invalid params: ..."))
    assert type(back) is ConfigError and str(back) == "Expected `object`"


@pytest.mark.parametrize(
    ("path", "about"),
    [
        ("$.params.config", True),
        ("$.params.config.epoch_size", True),
        ("$.params.config[0]", True),
        ("$.params.configs", False),
        ("$.params.config_x", False),
        ("$.params", False),
        ("$.PARAMS.CONFIG", False),
        (None, False),
        (3, False),
    ],
)
def test_which_paths_are_about_the_overrides(path: Any, about: bool) -> None:
    assert about_overrides(path) is about


@pytest.mark.parametrize(
    ("code", "data", "about"),
    [
        (protocol.INVALID_PARAMS, {"path": "$.params.base"}, True),
        (protocol.INVALID_PARAMS, {"path": "$.params.base.x"}, False),
        (protocol.INVALID_PARAMS, {"path": "$.params.messages"}, False),
        (protocol.INVALID_PARAMS, None, False),
        (protocol.INVALID_PARAMS, ["$.params.base"], False),
        (protocol.UNKNOWN_SESSION, {"path": "$.params.base"}, False),
    ],
)
def test_which_errors_say_the_base_is_wrong(code: int, data: Any, about: bool) -> None:
    assert about_base(RemoteError(code, "m", data)) is about


@pytest.mark.parametrize(
    ("code", "data", "limit"),
    [
        (protocol.TOO_LARGE, {"limit": 100}, 100),
        (protocol.TOO_LARGE, {"limit": "100"}, None),
        (protocol.TOO_LARGE, {}, None),
        (protocol.TOO_LARGE, None, None),
        (protocol.TOO_LARGE, [100], None),
        (protocol.FORBIDDEN, {"limit": 100}, None),
    ],
)
def test_the_limit_of_a_too_large_error(code: int, data: Any, limit: int | None) -> None:
    assert too_large_limit(_error(code, data)) == limit


@pytest.mark.parametrize(
    ("code", "data", "refused"),
    [
        (protocol.INVALID_PARAMS, {"error": "Object contains unknown field `delta_replace`"}, True),
        (protocol.INVALID_PARAMS, {"error": "Object contains unknown field `delta`"}, False),
        (protocol.INVALID_PARAMS, {"other": "`delta_replace`"}, False),
        (protocol.INVALID_PARAMS, "`delta_replace`", False),
        (protocol.INVALID_PARAMS, None, False),
        (protocol.INVALID_REQUEST, {"error": "unknown field `delta_replace`"}, False),
    ],
)
def test_only_an_invalid_params_error_naming_delta_replace_refuses_it(
    code: int, data: object, refused: bool
) -> None:
    """A client falls back to the running delta only when the daemon refused the param."""
    assert about_replace(RemoteError(code, "invalid params", data)) is refused
