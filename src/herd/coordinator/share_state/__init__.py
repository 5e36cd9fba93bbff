"""The share coordinator's core (KIP-932): the durable state of share partitions in `__share_group_state`."""
