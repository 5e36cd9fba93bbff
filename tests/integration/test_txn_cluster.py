"""The transaction coordinator in cluster mode (nodes sharing PostgreSQL): `__transaction_state` made by the
first FindCoordinator for a transactional id and its partitions led by the nodes; the coordinator of an id moves
when its node stops (a controlled shutdown hands its partitions over) and the new one has the id's state from the
shared log: a KIP-360 epoch bump by the same producer succeeds there."""

from __future__ import annotations

import time
from typing import Any

from kio.schema.errors import ErrorCode
from rawkafka import RawClient, req

from herd.testing import HerdCluster
from herd.testing.wait import wait_until

FIND, INIT = 10, 22
TID = "tx-cluster"


def coordinator(cluster: HerdCluster, via: int, timeout: float = 30.0) -> int:
    """The index of the node FindCoordinator (asked of node `via`) names for TID, once one is named."""
    host, port = cluster.address(via).rsplit(":", 1)

    def named() -> list[int] | None:
        with RawClient(int(port), host) as c:
            r = c.request(FIND, 3, req(FIND, 3, key=TID, key_type=1))
        if r.error_code == ErrorCode.none:
            return [next(i for i, n in enumerate(cluster.nodes) if n.running and n.port == r.port)]
        assert r.error_code == ErrorCode.coordinator_not_available, r
        return None

    return wait_until(named, timeout, f"node {via} to name the coordinator of {TID}", interval=0.1)[0]


def init(cluster: HerdCluster, node: int, timeout: float = 30.0, **kw: Any) -> Any:
    """InitProducerId at `node`, retried while it loads the id's partition."""
    # not a wait_until: the last answer is returned at the bound, for the caller to assert on
    deadline = time.monotonic() + timeout
    host, port = cluster.address(node).rsplit(":", 1)
    while True:
        with RawClient(int(port), host) as c:
            r = c.request(INIT, 5, req(INIT, 5, transactional_id=TID, transaction_timeout=60_000, **kw))
        if (
            r.error_code not in (ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator)
            or time.monotonic() > deadline
        ):
            return r
        time.sleep(0.1)


def test_the_coordinator_moves_with_its_partition_and_keeps_the_ids_state(new_cluster: HerdCluster) -> None:
    new_cluster.overrides.update({"transaction.state.log.num.partitions": "2", "offsets.topic.num.partitions": "2"})
    new_cluster.start(nodes=2, balanced=False)
    first = coordinator(new_cluster, via=0)
    p = init(new_cluster, first)
    assert (p.error_code, p.producer_epoch) == (ErrorCode.none, 0)
    new_cluster.terminate(first)  # controlled shutdown: its partitions go to the other node
    second = coordinator(new_cluster, via=1 - first)
    assert second == 1 - first
    bumped = init(new_cluster, second, producer_id=p.producer_id, producer_epoch=0)
    assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (ErrorCode.none, p.producer_id, 1)
