"""The herd_cluster fixture: PostgreSQL and three nodes; an aiokafka consumer follows its group's coordinator
when the coordinator moves to another node (a real move of the `__consumer_offsets` partition's leadership,
with a leader-epoch bump), and its commits land. Skipped, in one line, where no PostgreSQL can be had.

aiokafka rather than confluent-kafka: the old coordinator answers a commit in flight NOT_COORDINATOR, which
librdkafka 2.16 sometimes does not get over (see test_confluent.py)."""

from __future__ import annotations

import asyncio

from plugin_clients import AioApp, produce, values

from herd.testing import HerdAdmin, HerdCluster


def test_a_consumer_follows_its_coordinator_to_another_node(herd_cluster: HerdCluster, herd_group: str) -> None:
    admin = HerdAdmin(herd_cluster.bootstrap)
    topic = admin.create_topic(partitions=1)
    produce(herd_cluster.bootstrap, topic, values(0, 3))

    async def story() -> None:
        async with AioApp(herd_cluster.bootstrap, topic, herd_group) as app:
            await app.consume(3)
            group = await asyncio.to_thread(admin.wait_for_members, herd_group, 1)
            before, member = group.coordinator.node_id, group.members[0].member_id
            moved = herd_cluster.nodes[0].faults.move_coordinator(herd_group, to=(before + 1) % 3)
            assert (moved["from"], moved["to"]) == (before, (before + 1) % 3)
            produce(herd_cluster.bootstrap, topic, values(3, 6))
            await app.consume(6)
            group = await asyncio.to_thread(admin.wait_for_members, herd_group, 1)
            assert (group.coordinator.node_id, group.members[0].member_id) == (moved["to"], member)
            assert admin.committed(herd_group) == {(topic, 0): 6}

    asyncio.run(story())
