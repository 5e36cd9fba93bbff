"""GroupConsumer without a broker: what it does before it holds any partition."""

from __future__ import annotations

import asyncio
import time

from herd.client.consumer import GroupConsumer
from herd.client.consumer_protocol import TopicPartition


def test_getmany_with_nothing_assigned_waits_its_timeout_instead_of_returning_at_once() -> None:
    """A poll loop around getmany must not spin while the member has no partition (Java's poll blocks for its
    timeout too): it waits up to `timeout_ms`, and returns as soon as partitions are assigned."""

    async def main() -> None:
        consumer = GroupConsumer("127.0.0.1:9", "g", ["t"])  # never started: nothing assigned
        started = time.monotonic()
        assert await consumer.getmany(timeout_ms=300) == {}
        assert time.monotonic() - started >= 0.29

        async def assign() -> None:
            await asyncio.sleep(0.05)
            consumer.positions[TopicPartition("t", 0)] = 0
            consumer._has_partitions.set()

        task = asyncio.get_running_loop().create_task(assign())
        started = time.monotonic()
        assert await consumer.getmany(timeout_ms=30_000) == {}
        assert time.monotonic() - started < 25  # woken by the assignment, not by the 30 s timeout
        await task

    asyncio.run(main())
