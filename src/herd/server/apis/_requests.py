"""What the busiest handlers read of their requests: one Protocol per message, over every version served.

kio makes each version of a request its own class, so a handler's `request` is one of up to eleven classes.
Each Protocol below names the fields a handler reads directly, which every version it serves has (checked
against kio by tests/unit/server/test_request_types.py); a field only some versions have is read with
`getattr(request, name, default)` and noted in the docstring. Nested entries stay `Any`: their fields differ
between versions more than the top level's do (a topic by name or by id).
"""

from __future__ import annotations

import datetime
from typing import Any, Protocol


class ProduceRequest(Protocol):
    """Produce v3-v13."""

    @property
    def transactional_id(self) -> str | None: ...
    @property
    def acks(self) -> int: ...
    @property
    def topic_data(self) -> tuple[Any, ...]: ...  # TopicProduceData: name (v3-v12) or topic_id (v13)


class OffsetCommitRequest(Protocol):
    """OffsetCommit v2-v10; retention_time (v2-v4) and group_instance_id (v7+) by getattr."""

    @property
    def group_id(self) -> str: ...
    @property
    def generation_id_or_member_epoch(self) -> int: ...
    @property
    def member_id(self) -> str: ...
    @property
    def topics(self) -> tuple[Any, ...]: ...  # OffsetCommitRequestTopic: name (v2-v9) or topic_id (v10)


class JoinGroupRequest(Protocol):
    """JoinGroup v0-v9; rebalance_timeout (v1+), group_instance_id (v5+) and reason (v8+) by getattr."""

    @property
    def group_id(self) -> str: ...
    @property
    def session_timeout(self) -> datetime.timedelta: ...
    @property
    def member_id(self) -> str: ...
    @property
    def protocol_type(self) -> str: ...
    @property
    def protocols(self) -> tuple[Any, ...]: ...  # JoinGroupRequestProtocol: name, metadata


class HeartbeatRequest(Protocol):
    """Heartbeat v0-v4; group_instance_id (v3+) by getattr."""

    @property
    def group_id(self) -> str: ...
    @property
    def generation_id(self) -> int: ...
    @property
    def member_id(self) -> str: ...


class SyncGroupRequest(Protocol):
    """SyncGroup v0-v5; group_instance_id (v3+), protocol_type and protocol_name (v5) by getattr."""

    @property
    def group_id(self) -> str: ...
    @property
    def generation_id(self) -> int: ...
    @property
    def member_id(self) -> str: ...
    @property
    def assignments(self) -> tuple[Any, ...]: ...  # SyncGroupRequestAssignment: member_id, assignment
