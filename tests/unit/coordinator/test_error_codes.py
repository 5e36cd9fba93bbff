"""The core names Kafka's error codes with kio's `ErrorCode`, the wire's own list, which the handlers use too.

It had its own enum of the codes it used, in upper case, under the same numbers. This keeps that list (name and
number as Kafka's Errors.java has them): kio has each one, with that number, so the swap changed no code a client
sees; and the text of an error, which clients may see, names it in upper case as Kafka does."""

from __future__ import annotations

from kio.schema.errors import ErrorCode as KioErrorCode

from herd.coordinator import CoordinatorError, ErrorCode

# the codes herd.coordinator.errors.ErrorCode had
CORE_CODES = {
    "UNKNOWN_SERVER_ERROR": -1,
    "NONE": 0,
    "UNKNOWN_TOPIC_OR_PARTITION": 3,
    "INVALID_FETCH_SIZE": 4,
    "NOT_LEADER_OR_FOLLOWER": 6,
    "REQUEST_TIMED_OUT": 7,
    "MESSAGE_TOO_LARGE": 10,
    "OFFSET_METADATA_TOO_LARGE": 12,
    "COORDINATOR_LOAD_IN_PROGRESS": 14,
    "COORDINATOR_NOT_AVAILABLE": 15,
    "NOT_COORDINATOR": 16,
    "RECORD_LIST_TOO_LARGE": 18,
    "NOT_ENOUGH_REPLICAS": 19,
    "ILLEGAL_GENERATION": 22,
    "INCONSISTENT_GROUP_PROTOCOL": 23,
    "INVALID_GROUP_ID": 24,
    "UNKNOWN_MEMBER_ID": 25,
    "INVALID_SESSION_TIMEOUT": 26,
    "REBALANCE_IN_PROGRESS": 27,
    "INVALID_COMMIT_OFFSET_SIZE": 28,
    "GROUP_AUTHORIZATION_FAILED": 30,
    "UNSUPPORTED_VERSION": 35,
    "INVALID_CONFIG": 40,
    "INVALID_REQUEST": 42,
    "INVALID_PRODUCER_EPOCH": 47,
    "INVALID_TXN_STATE": 48,
    "INVALID_PRODUCER_ID_MAPPING": 49,
    "INVALID_TRANSACTION_TIMEOUT": 50,
    "CONCURRENT_TRANSACTIONS": 51,
    "TRANSACTION_COORDINATOR_FENCED": 52,
    "OPERATION_NOT_ATTEMPTED": 55,
    "KAFKA_STORAGE_ERROR": 56,
    "NON_EMPTY_GROUP": 68,
    "GROUP_ID_NOT_FOUND": 69,
    "MEMBER_ID_REQUIRED": 79,
    "GROUP_MAX_SIZE_REACHED": 81,
    "FENCED_INSTANCE_ID": 82,
    "GROUP_SUBSCRIBED_TO_TOPIC": 86,
    "UNSTABLE_OFFSET_COMMIT": 88,
    "PRODUCER_FENCED": 90,
    "UNKNOWN_TOPIC_ID": 100,
    "TRANSACTIONAL_ID_NOT_FOUND": 105,
    "TRANSACTION_ABORTABLE": 120,
}


def test_kio_has_every_code_the_core_uses_under_the_same_number() -> None:
    for name, number in CORE_CODES.items():
        assert KioErrorCode[name.lower()] == number, name
    assert ErrorCode is KioErrorCode  # herd.coordinator's is kio's


def test_an_errors_text_names_it_in_upper_case() -> None:
    code = ErrorCode(42)
    assert str(CoordinatorError(code, "bad")) == "INVALID_REQUEST: bad"
    assert str(CoordinatorError(code)) == "INVALID_REQUEST"
