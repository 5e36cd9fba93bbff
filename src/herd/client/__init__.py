"""herd's Python client: group membership for any protocol type, consumer groups, and admin operations.

    herd.client.group            GroupMember: join, sync and heartbeat in the background (asyncio shell)
    herd.client.membership       the pure membership state machine it drives (MemberState, actions)
    herd.client.group_protocol   GroupProtocol, the protocol-type specific half; SimpleProtocol
    herd.client.consumer         ConsumerGroupProtocol ("consumer" type, assignors by Kafka name), GroupConsumer
    herd.client.admin            Admin: groups (list, describe, offsets, reset, delete, remove members), topics,
                                 configs, transactions, SCRAM users and ACLs
    herd.client.connection       KafkaClient: connections, ApiVersions negotiation, coordinator lookup
    herd.client.security         ClientSecurity (TLS, SASL PLAIN/SCRAM) from Kafka's client properties
    herd.client.consumer_protocol, herd.client.assignors   the embedded consumer protocol and the assignors

The names below are importable from `herd.client` directly; they load on first use, so importing one
submodule (say the consumer protocol codec) does not import the rest.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Admin": "herd.client.admin",
    "AuthenticationError": "herd.client.errors",
    "ClientSecurity": "herd.client.security",
    "GroupAssignment": "herd.client.group_protocol",
    "GroupConsumer": "herd.client.consumer",
    "GroupMember": "herd.client.group",
    "GroupProtocol": "herd.client.group_protocol",
    "JoinedMember": "herd.client.group_protocol",
    "KafkaClient": "herd.client.connection",
    "KafkaError": "herd.client.errors",
    "MemberState": "herd.client.membership",
    "SimpleProtocol": "herd.client.group_protocol",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'herd.client' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
