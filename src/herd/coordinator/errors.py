"""Kafka error codes used by the coordinator, and the one exception type the core raises.

`ErrorCode` carries Kafka's numeric codes (clients see them byte for byte). `CoordinatorError` is raised
by validation guards and always carries the code the wire needs; handlers catch it in one place and
turn it into a response. `append_error_to_response_error` is Kafka's mapping of a failed
`__consumer_offsets` append to the error a group member sees
(apache/kafka group-coordinator/.../GroupMetadataManager.java `appendGroupMetadataErrorToResponseError`),
and `append_error_to_commit_error` the one used for offset commits
(apache/kafka group-coordinator/.../GroupCoordinatorService.java `normalizeException` for OffsetCommit).
"""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    MESSAGE_TOO_LARGE = 10
    OFFSET_METADATA_TOO_LARGE = 12
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    GROUP_AUTHORIZATION_FAILED = 30
    UNSUPPORTED_VERSION = 35
    INVALID_CONFIG = 40
    INVALID_REQUEST = 42
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    MEMBER_ID_REQUIRED = 79
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    UNSTABLE_OFFSET_COMMIT = 88
    PRODUCER_FENCED = 90
    UNKNOWN_TOPIC_ID = 100
    TRANSACTIONAL_ID_NOT_FOUND = 105
    TRANSACTION_ABORTABLE = 120


class CoordinatorError(Exception):
    """A request was refused; `code` is the Kafka error the client receives."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        name = code.name.upper()  # Kafka's name of the error, as clients print it
        super().__init__(f"{name}: {message}" if message else name)
        self.code = code


class IllegalStateTransition(Exception):
    """A bug: the coordinator tried a group state change Kafka's table forbids. Nothing was changed."""


_GROUP_APPEND_ERRORS: dict[ErrorCode, ErrorCode] = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.UNKNOWN_SERVER_ERROR,
}

_COMMIT_APPEND_ERRORS: dict[ErrorCode, ErrorCode] = {
    **_GROUP_APPEND_ERRORS,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}


def append_error_to_response_error(error: ErrorCode) -> ErrorCode:
    """The error a group member sees when a GroupMetadata append failed with `error`."""
    return _GROUP_APPEND_ERRORS.get(error, error)


def append_error_to_commit_error(error: ErrorCode) -> ErrorCode:
    """The error an OffsetCommit partition sees when its OffsetCommit append failed with `error`."""
    return _COMMIT_APPEND_ERRORS.get(error, error)
