"""The one exception type the core raises, and Kafka's mappings of a failed append to the error a client sees.

Error codes are kio's `ErrorCode` (Kafka's complete list, with Kafka's numbers; members in lower case), which the
handlers and responses use too, re-exported here. `CoordinatorError` is raised by validation guards and always
carries the code the wire needs; handlers catch it in one place and turn it into a response.
`append_error_to_response_error` is Kafka's mapping of a failed
`__consumer_offsets` append to the error a group member sees
(apache/kafka group-coordinator/.../GroupMetadataManager.java `appendGroupMetadataErrorToResponseError`),
and `append_error_to_commit_error` the one used for offset commits
(apache/kafka group-coordinator/.../GroupCoordinatorService.java `normalizeException` for OffsetCommit).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode as ErrorCode  # re-exported: the core names codes through this module


class CoordinatorError(Exception):
    """A request was refused; `code` is the Kafka error the client receives."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        name = code.name.upper()  # Kafka's name of the error, as clients print it
        super().__init__(f"{name}: {message}" if message else name)
        self.code = code
        self.message = message  # what an API with an ErrorMessage field answers (KIP-848's, for one)


class IllegalStateTransition(Exception):
    """A bug: the coordinator tried a group state change Kafka's table forbids. Nothing was changed."""


_GROUP_APPEND_ERRORS: dict[ErrorCode, ErrorCode] = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.message_too_large: ErrorCode.unknown_server_error,
    ErrorCode.record_list_too_large: ErrorCode.unknown_server_error,
    ErrorCode.invalid_fetch_size: ErrorCode.unknown_server_error,
}

_COMMIT_APPEND_ERRORS: dict[ErrorCode, ErrorCode] = {
    **_GROUP_APPEND_ERRORS,
    ErrorCode.message_too_large: ErrorCode.invalid_commit_offset_size,
    ErrorCode.record_list_too_large: ErrorCode.invalid_commit_offset_size,
    ErrorCode.invalid_fetch_size: ErrorCode.invalid_commit_offset_size,
}


def append_error_to_response_error(error: ErrorCode) -> ErrorCode:
    """The error a group member sees when a GroupMetadata append failed with `error`."""
    return _GROUP_APPEND_ERRORS.get(error, error)


def append_error_to_commit_error(error: ErrorCode) -> ErrorCode:
    """The error an OffsetCommit partition sees when its OffsetCommit append failed with `error`."""
    return _COMMIT_APPEND_ERRORS.get(error, error)
