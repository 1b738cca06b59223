"""One table between error codes and exceptions, used by the daemon and the clients."""

from __future__ import annotations

import msgspec
import pytest

from scoutd import protocol
from scoutd.errors import Aborted, ConfigError, RemoteError, UnknownStrategy
from scoutd.protocol.error_table import error_for, exception_for
from scoutd.protocol.messages import ErrorObject


class _ErrorLine(msgspec.Struct):
    error: ErrorObject


def through_the_wire(exc: Aborted | UnknownStrategy | ConfigError) -> Exception:
    """The exception a client raises for ``exc`` raised in the daemon."""
    error = error_for(exc, 3, save_file="/c", session="s")
    line = protocol.encode_error(error.id, error.code, error.message, error.data)
    return exception_for(msgspec.json.decode(line, type=_ErrorLine).error)


@pytest.mark.parametrize(
    "exc",
    [Aborted("operator says stop"), UnknownStrategy("nope", ["b", "a"]), ConfigError("bad key x")],
)
def test_library_exceptions_come_back_as_themselves(
    exc: Aborted | UnknownStrategy | ConfigError,
) -> None:
    back = through_the_wire(exc)
    assert type(back) is type(exc)
    assert str(back) == str(exc)


def test_an_abort_carries_what_it_was_about() -> None:
    error = error_for(Aborted("stop"), "r", save_file="/c", session="s", prefix="aborted: ")
    assert (error.code, error.message, error.id) == (protocol.ABORTED, "aborted: stop", "r")
    assert error.data == protocol.AbortedData(reason="stop", save_file="/c", session="s")


def test_invalid_overrides_are_a_config_error_other_invalid_params_are_not() -> None:
    about_config = ErrorObject(
        code=protocol.INVALID_PARAMS, message="m", data={"path": "$.params.config.x", "error": "e"}
    )
    about_messages = ErrorObject(
        code=protocol.INVALID_PARAMS, message="m", data={"path": "$.params.configs", "error": "e"}
    )
    assert isinstance(exception_for(about_config), ConfigError)
    other = exception_for(about_messages)
    assert type(other) is RemoteError and other.code == protocol.INVALID_PARAMS


def test_anything_else_is_a_remote_error_with_code_and_data() -> None:
    error = ErrorObject(code=protocol.TOO_LARGE, message="too large", data={"limit": 5})
    exc = exception_for(error)
    assert isinstance(exc, RemoteError)
    assert (exc.code, exc.message, exc.data) == (protocol.TOO_LARGE, "too large", {"limit": 5})
