"""KIP-848 consumer groups (the "consumer" rebalance protocol), in the pure core beside the classic coordinator.

The coordinator computes each group's target assignment itself (`assignors`: uniform, range) and brings each
member to it one heartbeat at a time (`reconcile`: Kafka's CurrentAssignmentBuilder), with no group-wide
barrier. The modules, read in this order:

- `assignment`: topic ids, assignments (topic id -> partitions) and the set operations both of the above use;
- `member`: a member's state as Kafka records it (ConsumerGroupMemberMetadata and CurrentMemberAssignment);
- `assignors`: the server-side assignors, `uniform` and `range`;
- `reconcile`: the member's next state towards the target assignment.
"""
