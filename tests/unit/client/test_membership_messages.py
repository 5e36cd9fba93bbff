"""The membership requests at every version: built through kio, read back as the broker reads them."""

from __future__ import annotations

import pytest

from herd.client.membership_messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    SyncGroupRequest,
    from_kio,
    to_kio,
)
from herd.client.wire import CLIENT_VERSIONS, encode_request, negotiate, request_builder
from herd.protocol.messages import decode_request

JOIN = JoinGroupRequest("g", 6000, 9000, "m1", "i1", "election", (("v1", b"meta"),), "why")
SYNC = SyncGroupRequest("g", 3, "m1", "i1", "election", "v1", (("m1", b"a"), ("m2", b"b")))
HEARTBEAT = HeartbeatRequest("g", 3, "m1", "i1")
LEAVE = LeaveGroupRequest("g", "m1", None, "closing")


def roundtrip(api_key: int, version: int, request):
    kio_request = to_kio(request, request_builder(api_key, version))
    frame = encode_request(kio_request, api_key, version, 7, "test")
    header, body = decode_request(api_key, version, frame[4:])
    assert header.correlation_id == 7 and header.client_id == "test"
    return body


@pytest.mark.parametrize("version", range(0, 10))
def test_join_group_every_version(version):
    body = roundtrip(11, version, JOIN)
    assert (body.group_id, body.member_id, body.protocol_type) == ("g", "m1", "election")
    assert [(p.name, p.metadata) for p in body.protocols] == [("v1", b"meta")]
    assert getattr(body, "group_instance_id", "i1") == "i1"  # from v5
    assert getattr(body, "reason", "why") == "why"  # from v8


@pytest.mark.parametrize("version", range(0, 6))
def test_sync_group_every_version(version):
    body = roundtrip(14, version, SYNC)
    assert (body.generation_id, body.member_id) == (3, "m1")
    assert [(a.member_id, a.assignment) for a in body.assignments] == [("m1", b"a"), ("m2", b"b")]
    assert getattr(body, "protocol_name", "v1") == "v1"


@pytest.mark.parametrize("version", range(0, 5))
def test_heartbeat_every_version(version):
    body = roundtrip(12, version, HEARTBEAT)
    assert (body.generation_id, body.member_id) == (3, "m1")


@pytest.mark.parametrize("version", range(0, 6))
def test_leave_group_single_member_before_v3_batch_after(version):
    body = roundtrip(13, version, LEAVE)
    if version < 3:
        assert body.member_id == "m1"
    else:
        assert [(m.member_id, m.group_instance_id) for m in body.members] == [("m1", None)]


def test_leave_answer_takes_the_member_error_from_a_batch():
    class Member:
        error_code = 25

    class Body:
        error_code = 0
        members = (Member(),)

    assert from_kio(LEAVE, Body()).error_code == 25


def test_negotiation_picks_the_highest_common_version():
    broker = {11: (0, 7), 12: (0, 99), 14: (6, 9), 99: (0, 3)}
    chosen = negotiate(broker)
    assert chosen[11] == 7 and chosen[12] == CLIENT_VERSIONS[12][1]
    assert 14 not in chosen and 99 not in chosen  # no common version, or not spoken by the client
