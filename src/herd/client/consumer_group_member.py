"""`ConsumerProtocolMember`: the asyncio shell that keeps a consumer-protocol (KIP-848) member in its group, the
driver of herd.client.consumer_membership as herd.client.group's GroupMember drives the classic machine.

One background task owns the machine: it waits for the next event (an answer, a failed request, `close`) or the
machine's next deadline, feeds it in, and carries out the actions in order. ConsumerGroupHeartbeats go to the
group's coordinator in tasks of their own, their answers come back as events; the callbacks (`on_assigned`,
`on_revoked`, `on_lost`) run inline, so a revocation (and the commit a consumer makes in it) is over before the
heartbeat that frees the partitions. The machine speaks in topic ids; this shell names them from the cluster's
metadata (asking again while an id is unknown: a topic created a moment ago) and hands the callbacks a
GroupAssignment whose `data` is a consumer-protocol assignment, as GroupMember's callbacks get, with the member
epoch as its generation, so that GroupConsumer commits at the member's epoch either way.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from herd.client.connection import KafkaClient
from herd.client.consumer_membership import (
    Action,
    Assigned,
    Closed,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerMembership,
    CoordinatorDead,
    Failed,
    Lost,
    Partitions,
    Revoked,
    Send,
    State,
)
from herd.client.consumer_protocol import Assignment, TopicPartition, encode_assignment
from herd.client.errors import AuthenticationError, KafkaError, UnsupportedApi
from herd.client.group_protocol import GroupAssignment
from herd.client.heartbeat import Clock, SystemClock
from herd.client.machine_driver import MachineDriver
from herd.client.wire import RequestBuilder

__all__ = ["ConsumerProtocolMember"]

log = logging.getLogger(__name__)

CONSUMER_GROUP_HEARTBEAT = 68
Callback = Callable[[GroupAssignment], Any]
NAMING_TIMEOUT_S = 30.0  # how long an assigned topic id may stay unknown to the metadata


@dataclass(frozen=True, slots=True)
class MemberConfig:
    group_id: str
    group_instance_id: str | None


class ConsumerProtocolMember(MachineDriver):
    """A member of a consumer group on the consumer protocol, kept in the group in the background."""

    def __init__(
        self,
        client: KafkaClient,
        group_id: str,
        topics: Sequence[str],
        *,
        group_instance_id: str | None = None,
        rack_id: str | None = None,
        rebalance_timeout_ms: int = 300_000,
        server_assignor: str | None = None,
        topic_regex: str | None = None,
        on_assigned: Callback | None = None,
        on_revoked: Callback | None = None,
        on_lost: Callback | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.client = client
        self.clock = clock or SystemClock()
        self.config = MemberConfig(group_id, group_instance_id)
        self.machine = ConsumerMembership(
            group_id,
            tuple(topics),
            self.clock,
            instance_id=group_instance_id,
            rack_id=rack_id,
            rebalance_timeout_ms=rebalance_timeout_ms,
            server_assignor=server_assignor,
            retry_backoff_ms=int(client.backoff.initial_ms),
            topic_regex=topic_regex,
        )
        self.callbacks: dict[type, Callback | None] = {Assigned: on_assigned, Revoked: on_revoked, Lost: on_lost}
        self.names: dict[uuid.UUID, str] = {}
        self.group_id = group_id
        self._init_loop()

    # -- what the member knows -----------------------------------------------------------------------------

    @property
    def state(self) -> State:
        return self.machine.state

    @property
    def member_id(self) -> str:
        return self.machine.member_id

    @property
    def error(self) -> KafkaError | None:
        return self.machine.error

    @property
    def assignment(self) -> GroupAssignment | None:
        """What the member owns, at its epoch (None before its first epoch)."""
        if self.machine.epoch <= 0:
            return None
        return self._as_assignment(self.machine.owned)

    # -- life cycle ----------------------------------------------------------------------------------------

    async def start(self) -> None:
        self._start_loop(f"herd-848-{self.config.group_id}")

    async def wait_for_assignment(self, timeout: float | None = None) -> GroupAssignment:
        """Wait until the member is STABLE; raises its fatal error, or TimeoutError."""
        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(lambda: self.machine.state is State.STABLE or self.machine.done), timeout
            )
        if self.machine.error is not None:
            raise self.machine.error
        held = self.assignment
        if held is None:
            raise RuntimeError(f"the member is {self.machine.state.name}")
        return held

    async def close(self, timeout: float = 10.0) -> None:
        """Revoke, leave the group (a static member with epoch -2) and stop; waits at most `timeout` seconds."""
        await self._stop_loop(timeout)

    # -- the loop ------------------------------------------------------------------------------------------

    async def _perform(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Send):
                self._spawn(self._send(action.request))
            elif isinstance(action, (Assigned, Revoked, Lost)):
                await self._callback(action)
            elif isinstance(action, CoordinatorDead):
                log.info("group %s: coordinator lost (%s)", self.config.group_id, action.reason)
                self.client.coordinator_dead(self.config.group_id)
            elif isinstance(action, Failed):
                log.error("group %s: member stopped: %s", self.config.group_id, action.error)
            elif isinstance(action, Closed):
                pass

    async def _send(self, request: ConsumerGroupHeartbeatRequest) -> None:
        try:
            _, body = await self.client.send_to_coordinator(
                self.config.group_id, CONSUMER_GROUP_HEARTBEAT, lambda b: _to_kio(request, b)
            )
        except (UnsupportedApi, AuthenticationError) as exc:  # fatal: asking again cannot help
            error = exc
            self._events.put_nowait(lambda: self.machine.fail(error))
            return
        except KafkaError as exc:
            reason = str(exc)
            self._events.put_nowait(lambda: self.machine.request_failed(request, reason))
            return
        except Exception as exc:  # a bug here must stop the member, not leave it waiting for an answer forever
            log.exception("group %s: ConsumerGroupHeartbeat failed", self.config.group_id)
            failure = KafkaError(-1, f"ConsumerGroupHeartbeat failed: {exc!r}")
            self._events.put_nowait(lambda: self.machine.fail(failure))
            return
        response = _from_kio(body)
        self._events.put_nowait(lambda: self.machine.receive(request, response))

    async def _callback(self, action: Assigned | Revoked | Lost) -> None:
        callback = self.callbacks[type(action)]
        if callback is None:
            return
        try:
            held = self._as_assignment(action.partitions) if isinstance(action, Revoked | Lost) else None
            if held is None:
                held = self._as_assignment(await self._named(action.partitions))
            result = callback(held)
            if inspect.isawaitable(result):
                await result
        except Exception:  # a failing callback must not stop the member
            log.exception("group %s: %s callback failed", self.config.group_id, type(action).__name__)

    async def _named(self, partitions: Partitions) -> Partitions:
        """`partitions`, once the metadata names every topic id in them (or NAMING_TIMEOUT_S passed)."""
        deadline = asyncio.get_running_loop().time() + NAMING_TIMEOUT_S
        while set(partitions) - set(self.names):
            # a regular expression may match any topic: every topic's metadata then
            metadata = await self.client.metadata(None if self.machine.topic_regex else list(self.machine.topics))
            for name, topic in metadata.topics.items():
                if topic.topic_id is not None:
                    self.names[uuid.UUID(topic.topic_id)] = name
            if not set(partitions) - set(self.names) or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(self.client.backoff.initial_ms / 1000)
        return partitions

    def _as_assignment(self, partitions: Partitions) -> GroupAssignment:
        named = tuple(
            sorted(
                TopicPartition(self.names[topic_id], p)
                for topic_id, parts in partitions.items()
                if topic_id in self.names
                for p in parts
            )
        )
        return GroupAssignment(
            generation_id=self.machine.epoch,
            member_id=self.machine.member_id,
            leader_id="",
            protocol_name=self.machine.server_assignor or "",
            data=encode_assignment(Assignment(named)),
        )


def _to_kio(request: ConsumerGroupHeartbeatRequest, b: RequestBuilder) -> Any:
    owned = None
    if request.owned is not None:
        owned = tuple(
            b("TopicPartitions", topic_id=topic_id, partitions=tuple(sorted(parts)))
            for topic_id, parts in sorted(request.owned.items())
        )
    return b.request(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout=request.rebalance_timeout_ms,
        subscribed_topic_names=request.subscribed_topic_names,
        subscribed_topic_regex=request.subscribed_topic_regex,
        server_assignor=request.server_assignor,
        topic_partitions=owned,
    )


def _ms(value: Any) -> int:
    """A kio duration (a timedelta) or a plain number of milliseconds, as milliseconds."""
    return int(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value)


def _from_kio(body: Any) -> ConsumerGroupHeartbeatResponse:
    assignment: Mapping[uuid.UUID, frozenset[int]] | None = None
    if body.assignment is not None:
        assignment = {tp.topic_id: frozenset(int(p) for p in tp.partitions) for tp in body.assignment.topic_partitions}
    return ConsumerGroupHeartbeatResponse(
        int(body.error_code),
        body.error_message,
        body.member_id,
        int(body.member_epoch),
        _ms(body.heartbeat_interval),
        assignment,
    )
