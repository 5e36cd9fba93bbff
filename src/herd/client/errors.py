"""The client's errors: Kafka's error codes with a message, and the failures of the transport.

`KafkaError` carries a kio `ErrorCode` (the broker said so) and a message; `ConnectionLost` is a
`KafkaError` with NETWORK_EXCEPTION for a connection that broke or timed out (nothing was said, the
request may or may not have been applied); `AuthenticationError` a failed SASL exchange or TLS handshake, which
no one retries. `UnsupportedApi` is raised before anything is sent when the
broker does not serve the API (or no version both sides know). Coordinator errors are grouped in
`COORDINATOR_ERRORS`: on those a client finds the coordinator again and retries.
"""

from __future__ import annotations

from typing import Final

from kio.schema.errors import ErrorCode

__all__ = [
    "COORDINATOR_ERRORS",
    "AuthenticationError",
    "ConnectionLost",
    "ErrorCode",
    "KafkaError",
    "UnsupportedApi",
    "error_name",
    "raise_for",
]

COORDINATOR_ERRORS: Final = frozenset(
    {
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_not_available,
        ErrorCode.coordinator_load_in_progress,
    }
)


def error_name(code: int) -> str:
    """Kafka's constant name of an error code, e.g. 'REBALANCE_IN_PROGRESS'."""
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"UNKNOWN_ERROR_{code}"


class KafkaError(Exception):
    """An error code from the broker (or NETWORK_EXCEPTION from the transport), with a message."""

    def __init__(self, code: int, message: str | None = None) -> None:
        self.code = ErrorCode(code)
        self.message = message or error_name(code)
        super().__init__(self.message)

    @property
    def retriable(self) -> bool:
        return bool(self.code.retriable)


class ConnectionLost(KafkaError):
    """The connection broke, could not be made, or a request on it timed out."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.network_exception, message)


class AuthenticationError(KafkaError):
    """The broker refused the client's credentials (SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM, ...) or
    the TLS handshake failed (a certificate not trusted, or refused). Never retried: trying again cannot help, as
    Java's AuthenticationException is not retriable."""

    @property
    def retriable(self) -> bool:
        return False


class UnsupportedApi(KafkaError):
    """The broker serves no version of this API that the client speaks."""

    def __init__(self, api_name: str) -> None:
        super().__init__(ErrorCode.unsupported_version, f"the broker does not support {api_name}")


def raise_for(code: int, message: str | None = None) -> None:
    """Raise KafkaError for a non-zero error code."""
    if code:
        raise KafkaError(code, message or None)
