"""The group configs of groups another node coordinates (cluster mode), for the share partitions this node leads.

Kafka keeps group configs in its metadata log, which every broker reads; herd keeps them with the group in
`__consumer_offsets`, on the node that coordinates it. A share partition's leader needs its group's
share.auto.offset.reset, share.record.lock.duration.ms and share.isolation.level wherever it runs, so when the
group is coordinated elsewhere it asks that node with DescribeConfigs on the GROUP resource (as any client may,
herd.server.peers) and keeps the answer for `TTL_S`: a change reaches the leaders within that, as Kafka's reach
its brokers once they have read the metadata log. A node that cannot be asked leaves the last answer in place
(or none: the broker's settings then apply).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.static.primitive import i8

from herd.server.peers import PeerError

log = logging.getLogger(__name__)

TTL_S = 1.0
GROUP_RESOURCE = 32
DESCRIBE_CONFIGS, VERSION = 32, 4


class RemoteGroupConfigs:
    def __init__(self, broker: Any) -> None:
        """`broker`: the herd.server.broker.Broker that owns this (typed Any: that module imports this one)."""
        self._broker = broker
        self._cache: dict[str, tuple[float, dict[str, str]]] = {}

    def get(self, group_id: str, name: str) -> str | None:
        cached = self._cache.get(group_id)
        return cached[1].get(name) if cached is not None else None

    async def refresh(self, group_id: str) -> None:
        """Ask the group's coordinator for the group's configs unless this node coordinates it, or asked less
        than TTL_S ago."""
        broker = self._broker
        coordinator = broker.coordinator
        if coordinator is None or coordinator.hosts(group_id) or not coordinator.num_partitions:
            return
        cached = self._cache.get(group_id)
        now = time.monotonic()
        if cached is not None and now - cached[0] < TTL_S:
            return
        leader, _ = broker.cluster.leader(coordinator.topic, coordinator.partition_for(group_id))
        node = broker.node(leader) if leader != broker.node_id else None
        if node is None:
            return
        resource = DescribeConfigsResource(
            resource_type=i8(GROUP_RESOURCE), resource_name=group_id, configuration_keys=None
        )
        request = DescribeConfigsRequest(resources=(resource,), include_synonyms=False, include_documentation=False)
        try:
            answer: Any = await broker.peers.request(node.host, node.port, DESCRIBE_CONFIGS, VERSION, request)
        except PeerError as error:
            log.debug("cannot read the configs of group %s from node %d: %s", group_id, leader, error)
            return
        result = answer.results[0]
        if result.error_code:
            return
        if len(self._cache) > 10_000:  # groups come and go: keep it bounded
            self._cache.clear()
        self._cache[group_id] = (now, {c.name: c.value for c in result.configs if c.value is not None})
