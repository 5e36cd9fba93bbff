"""Static membership (KIP-345) with herd's GroupMember against a real broker.

A static member that closes sends no LeaveGroup; restarted with the same group.instance.id within the
session timeout it takes its place back without a rebalance (same generation, same assignment; the
coordinator tells a returning static leader to skip assigning, KIP-814). A second process claiming the same
instance id fences the first, which stops with FENCED_INSTANCE_ID.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Sequence

import pytest
from brokers import BrokerProcess

from herd.client.errors import ErrorCode
from herd.client.group import GroupMember
from herd.client.group_protocol import JoinedMember, SimpleProtocol
from herd.client.membership import MemberState

OVERRIDES = {
    "group.min.session.timeout.ms": "500",
    "offsets.topic.num.partitions": "5",
    "group.initial.rebalance.delay.ms": "0",
}


@pytest.fixture(scope="module")
def static_broker(tmp_path_factory) -> Iterable[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("client-static") / "data", OVERRIDES).start()
    yield broker
    broker.stop()


def by_instance(members: Sequence[JoinedMember]) -> dict[str, bytes]:
    return {m.member_id: (m.group_instance_id or "?").encode() for m in members}


def member(bootstrap: str, group: str, instance_id: str) -> GroupMember:
    return GroupMember(
        bootstrap,
        group,
        SimpleProtocol("work", "v1", by_instance),
        group_instance_id=instance_id,
        session_timeout_ms=5000,
        heartbeat_interval_ms=200,
        client_id=instance_id,
    )


def test_a_restarted_static_member_takes_its_place_back_without_a_rebalance(static_broker):
    group = f"static-{uuid.uuid4().hex[:8]}"

    async def main() -> None:
        a, b = member(static_broker.bootstrap, group, "a"), member(static_broker.bootstrap, group, "b")
        await a.start()
        await a.wait_for_assignment(10)
        await b.start()
        await b.wait_for(lambda m: m.state is MemberState.STABLE and a.generation_id == m.generation_id, 10)
        held_a = a.assignment
        generation = b.generation_id
        await a.close()  # static: no LeaveGroup
        again = member(static_broker.bootstrap, group, "a")
        async with again:
            back = await again.wait_for_assignment(10)
            assert back.data == held_a.data == b"a" and back.generation_id == generation
            assert back.member_id != held_a.member_id and back.member_id.startswith("a-")
            assert b.state is MemberState.STABLE and b.generation_id == generation
        await b.close()

    asyncio.run(main())


def test_a_second_member_with_the_same_instance_id_fences_the_first(static_broker):
    group = f"fence-{uuid.uuid4().hex[:8]}"

    async def main() -> None:
        first = member(static_broker.bootstrap, group, "same")
        async with first:
            await first.wait_for_assignment(10)
            second = member(static_broker.bootstrap, group, "same")
            async with second:
                await second.wait_for_assignment(10)
                await first.wait_done()
                assert first.state is MemberState.FAILED and first.error.code == ErrorCode.fenced_instance_id
                assert first.assignment is None and second.state is MemberState.STABLE

    asyncio.run(asyncio.wait_for(main(), 30))
