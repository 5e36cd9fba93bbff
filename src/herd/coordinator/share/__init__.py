"""Share groups (KIP-932): the group side of Kafka's queues, in the pure core.

So far, two pieces not yet wired to any API: the `simple` assignor (`herd.coordinator.share.assignor`) and the
state of one share partition (`herd.coordinator.share.partition`: acquisition, acknowledgement, locks, delivery
counts, the start offset). The share group itself, its heartbeat and records, share sessions, ShareFetch and
ShareAcknowledge, and durable share state are issue 32's next steps.
"""
