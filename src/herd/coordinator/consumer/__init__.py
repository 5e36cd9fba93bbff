"""KIP-848 consumer groups (the "consumer" rebalance protocol), in the pure core beside the classic coordinator.

The coordinator computes each group's target assignment itself (`assignors`: uniform, range) and brings each
member to it one heartbeat at a time (`reconcile`: Kafka's CurrentAssignmentBuilder), with no group-wide
barrier. The modules, read in this order:

- `assignment`: topic ids, assignments (topic id -> partitions) and the set operations both of the above use;
- `member`: a member's state as Kafka records it (ConsumerGroupMemberMetadata and CurrentMemberAssignment);
- `assignors`: the server-side assignors, `uniform` and `range`;
- `reconcile`: the member's next state towards the target assignment;
- `records`: the group's records in `__consumer_offsets` (types 3-8 and 16);
- `group`: a group rebuilt from those records;
- `topics`: the cluster's topics as the coordinator sees them.

The request handlers that use them are herd.coordinator.consumer_heartbeat (a module of the coordinator, beside
the classic handlers, since it works on the shard's context).
"""
