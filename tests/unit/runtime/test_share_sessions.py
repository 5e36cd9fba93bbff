"""Share sessions (herd.runtime.share_sessions) as Kafka 4.2's ShareSessionCache and SharePartitionManager keep them
(docs/kip-932/share-fetch-rules.md section 2; SharePartitionManagerTest's testNewContext* and
testAcknowledgeSessionUpdate* cases)."""

from __future__ import annotations

import uuid

import pytest

from herd.coordinator.errors import ErrorCode
from herd.runtime.share_sessions import ShareSessionError, ShareSessions

T = uuid.UUID(int=7)
P0, P1, P2 = (T, 0), (T, 1), (T, 2)


def refused(call, *args) -> ErrorCode:
    with pytest.raises(ShareSessionError) as caught:
        call(*args)
    return caught.value.code


def test_open_fetch_and_close() -> None:
    sessions = ShareSessions(10)
    session = sessions.open("g", "m", "conn", [P0, P1])
    assert session.epoch == 1 and list(session.partitions) == [P0, P1]
    assert refused(sessions.fetch, "g", "m", 2, [], []) == ErrorCode.invalid_share_session_epoch
    assert refused(sessions.fetch, "g", "x", 1, [], []) == ErrorCode.share_session_not_found
    session = sessions.fetch("g", "m", 1, [P2, P0], [P1])
    assert session.epoch == 2 and session.partitions == {P0: False, P2: True}  # P2 is new: named in the next answer
    session = sessions.fetch("g", "m", 2, [P1], [P1])  # forgetting wins over adding
    assert P1 not in session.partitions
    assert sessions.close("g", "m") is session and sessions.get("g", "m") is None
    assert refused(sessions.close, "g", "m") == ErrorCode.share_session_not_found


def test_the_epoch_wraps_past_int32_max_to_one() -> None:
    sessions = ShareSessions(10)
    session = sessions.open("g", "m", "conn", [])
    session.epoch = 2**31 - 1
    assert sessions.fetch("g", "m", 2**31 - 1, [], []).epoch == 1


def test_share_acknowledge_epochs() -> None:
    sessions = ShareSessions(10)
    sessions.open("g", "m", "conn", [P0])
    assert refused(sessions.acknowledge, "g", "m", 0) == ErrorCode.invalid_share_session_epoch
    assert refused(sessions.acknowledge, "g", "m", 5) == ErrorCode.invalid_share_session_epoch
    assert refused(sessions.acknowledge, "g", "x", 1) == ErrorCode.share_session_not_found
    session = sessions.acknowledge("g", "m", 1)
    assert session.epoch == 2 and list(session.partitions) == [P0]  # acknowledgements do not change partitions


def test_the_limit_counts_other_members_only_and_nothing_is_evicted() -> None:
    sessions = ShareSessions(1)
    sessions.open("g", "a", "c1", [P0])
    again = sessions.open("g", "a", "c2", [P1])  # a replaces its own session
    assert list(again.partitions) == [P1]
    assert refused(sessions.open, "g", "b", "c3", [P0]) == ErrorCode.share_session_limit_reached
    assert len(sessions) == 1


def test_a_closed_connection_closes_the_session_it_opened_if_still_its_own() -> None:
    sessions = ShareSessions(10)
    first = sessions.open("g", "a", "c1", [P0])
    assert sessions.connection_closed("c1") is first and sessions.get("g", "a") is None
    sessions.open("g", "a", "c1", [P0])
    newer = sessions.open("g", "a", "c2", [P0])  # reopened on another connection
    assert sessions.connection_closed("c1") is None  # c1's session was replaced: the newer one stays
    assert sessions.get("g", "a") is newer
    sessions.close("g", "a")
    assert sessions.connection_closed("c2") is None
