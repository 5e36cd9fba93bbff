"""The broker's transaction coordinator (herd.runtime.transactions), made the same way on an embedded node and a
cluster node: producer ids from InitProducerId's generator (one sequence for idempotent and transactional
producers), markers into `__consumer_offsets` through the group coordinator, and every marker written wakes the
fetches long-polling its partition (its last stable offset moved)."""

from __future__ import annotations

from herd.runtime.transactions import TransactionRuntime
from herd.server.apis.init_producer_id import new_producer_id
from herd.server.broker import Broker


def transaction_runtime(broker: Broker) -> TransactionRuntime:
    return TransactionRuntime(broker.cluster, broker.config, new_producer_id=new_producer_id,
                              groups=broker.coordinator,  # type: ignore[arg-type]  # complete_transaction: C's
                              on_marker=broker.notify_append)
