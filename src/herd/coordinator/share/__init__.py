"""Share groups (KIP-932): the group side of Kafka's queues, in the pure core.

So far: the `simple` assignor (`herd.coordinator.share.assignor`). The share group itself, its heartbeat, records
and the share-partition state are issue 32's next steps (docs/compatibility.md lists what herd serves).
"""
