"""A coordinator runtime on real log files (or the log's fault-injecting in-memory filesystem) for tests that
run on a real asyncio loop. Nothing here is a mock: the runtime, the shard, the log and the cluster are herd's."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from herd.cluster.topics import Cluster
from herd.config import BrokerConfig
from herd.coordinator import GroupCoordinatorShard as Shard
from herd.coordinator.member import MemberProtocol
from herd.coordinator.requests import (
    CommitPartition,
    CommitTopic,
    FetchGroup,
    FetchTopic,
    JoinGroup,
    OffsetCommit,
    OffsetFetch,
    SyncAssignment,
    SyncGroup,
)
from herd.log.fs import FileSystem
from herd.log.store import SegmentStore
from herd.runtime import CoordinatorRuntime

PROTOCOLS = (MemberProtocol("range", b"sub"),)


def make_runtime(data_dir: Path, fs: FileSystem | None = None, **props: str) -> CoordinatorRuntime:
    settings = {
        "log.dirs": str(data_dir),
        "offsets.topic.num.partitions": "4",
        "group.initial.rebalance.delay.ms": "0",
        "group.min.session.timeout.ms": "10",
        **props,
    }
    config = BrokerConfig.from_properties(settings)
    store = SegmentStore(str(data_dir), fs)
    cluster = Cluster(store, config.log_config(), 0)
    cluster.load()
    return CoordinatorRuntime(cluster, config)


async def started(runtime: CoordinatorRuntime, partitions: list[int] | None = None) -> CoordinatorRuntime:
    runtime.start(partitions)
    await runtime.wait_loaded()
    return runtime


async def resolve(outcome: Any, timeout: float = 5.0) -> Any:
    """The response of a runtime call, awaiting it if it is a future."""
    if isinstance(outcome, asyncio.Future):
        return await asyncio.wait_for(outcome, timeout)
    return outcome


def group_on(runtime: CoordinatorRuntime, partition: int, prefix: str = "g") -> str:
    """A group id that the runtime places on `partition`."""
    return next(f"{prefix}{i}" for i in range(10_000) if runtime.partition_for(f"{prefix}{i}") == partition)


def commit(group: str, offsets: dict[int, int], topic: str = "t", **kw: Any) -> OffsetCommit:
    partitions = tuple(CommitPartition(p, o) for p, o in offsets.items())
    return OffsetCommit(group_id=group, topics=(CommitTopic(topic, partitions),), **kw)


def fetch(group: str, partitions: tuple[int, ...], topic: str = "t") -> OffsetFetch:
    return OffsetFetch(groups=(FetchGroup(group, (FetchTopic(topic, partitions),)),))


def offsets_of(response: Any) -> dict[int, int]:
    return {p.partition_index: p.committed_offset for t in response.groups[0].topics for p in t.partitions}


async def stable_group(runtime: CoordinatorRuntime, group: str, n: int, **join: Any) -> list[str]:
    """`n` members joined (v9 two-step) and synced; returns their member ids (the first is the leader)."""
    args = {
        "group_id": group,
        "session_timeout_ms": 10_000,
        "rebalance_timeout_ms": 10_000,
        "protocols": PROTOCOLS,
        "client_id": "c",
        "client_host": "/127.0.0.1",
        **join,
    }
    ids = []
    for _ in range(n):
        first = await resolve(runtime.call(group, Shard.join_group, JoinGroup(**args)))
        ids.append(first.member_id)
    joins = [runtime.call(group, Shard.join_group, JoinGroup(member_id=m, **args)) for m in ids]
    answers = [await resolve(j) for j in joins]
    generation, leader = answers[0].generation_id, answers[0].leader
    syncs = [
        runtime.call(
            group,
            Shard.sync_group,
            SyncGroup(
                group_id=group,
                generation_id=generation,
                member_id=m,
                assignments=tuple(SyncAssignment(x, x.encode()) for x in ids) if m == leader else (),
            ),
        )
        for m in ids
    ]
    for s in syncs:
        assert (await resolve(s)).error_code == 0
    return [leader] + [m for m in ids if m != leader]


async def until(condition: Callable[[], Awaitable[bool] | bool], timeout: float = 5.0) -> None:
    """Yield to the loop until `condition` holds (each check lets one loop iteration run; no timed sleeps)."""

    async def loop() -> None:
        while True:
            value = condition()
            if asyncio.iscoroutine(value):
                value = await value
            if value:
                return
            await asyncio.sleep(0)

    await asyncio.wait_for(loop(), timeout)
