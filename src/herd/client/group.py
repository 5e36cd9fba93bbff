"""`GroupMember`: the asyncio shell that drives the membership machine for any protocol type.

One background task owns the machine. It waits for the next event (an answer, a failed request, the
leader's assignment, a call to `rejoin` or `close`) or for the machine's next deadline, feeds it in with
`tick`, and carries out the actions that come back, in order: requests go to the group's coordinator in
tasks of their own (so a JoinGroup parked by the coordinator does not stop heartbeats being scheduled),
whose results come back as events; the leader's `assign` runs in a task too; the user's callbacks
(`on_assigned`, `on_revoked`, `on_lost`, plain functions or coroutines) run inline, so a revocation
callback finishes before the next JoinGroup is sent. Nothing in this module decides anything about the
protocol; that is all in herd.client.membership.

    async with GroupMember("127.0.0.1:9092", "workers", SimpleProtocol("election", "v1"),
                           on_assigned=lambda a: print("leader" if a.is_leader else "follower")) as member:
        await member.wait_for_assignment()
        ...

A fatal error (FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL, ...) stops the member; `error` holds it and
`wait_for_assignment` raises it.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from herd.client.connection import KafkaClient
from herd.client.errors import AuthenticationError, KafkaError, UnsupportedApi
from herd.client.group_protocol import GroupAssignment, GroupProtocol
from herd.client.heartbeat import Clock, SystemClock
from herd.client.machine_driver import MachineDriver
from herd.client.membership import (
    Action,
    Assigned,
    Closed,
    ComputeAssignment,
    CoordinatorDead,
    Failed,
    Lost,
    MembershipConfig,
    MembershipMachine,
    MemberState,
    Revoked,
    Send,
)
from herd.client.membership_messages import (
    API_KEYS,
    HeartbeatRequest,
    JoinGroupRequest,
    MembershipRequest,
    SyncGroupRequest,
    from_kio,
    to_kio,
)
from herd.client.security import ClientSecurity

__all__ = ["Callback", "GroupMember", "MemberState", "request_timeout_ms"]

log = logging.getLogger(__name__)

Callback = Callable[[GroupAssignment], Any]


class GroupMember(MachineDriver):
    """A member of a Kafka group of any protocol type, kept in the group in the background."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        group_id: str,
        protocol: GroupProtocol,
        *,
        group_instance_id: str | None = None,
        session_timeout_ms: int = 10_000,
        rebalance_timeout_ms: int = 30_000,
        heartbeat_interval_ms: int = 3_000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1_000,
        client_id: str = "herd",
        request_timeout_ms: int = 30_000,
        on_assigned: Callback | None = None,
        on_revoked: Callback | None = None,
        on_lost: Callback | None = None,
        client: KafkaClient | None = None,
        clock: Clock | None = None,
        security: ClientSecurity | Mapping[str, str] | None = None,
    ) -> None:
        self.config = MembershipConfig(
            group_id,
            session_timeout_ms,
            rebalance_timeout_ms,
            heartbeat_interval_ms,
            retry_backoff_ms,
            retry_backoff_max_ms,
            group_instance_id,
        )
        self.protocol = protocol
        self.clock = clock or SystemClock()
        self.machine = MembershipMachine(self.config, protocol, self.clock)
        self._own_client = client is None
        self.client = client or KafkaClient(
            bootstrap_servers, client_id=client_id, request_timeout_ms=request_timeout_ms, security=security
        )
        self.callbacks: dict[type, Callback | None] = {Assigned: on_assigned, Revoked: on_revoked, Lost: on_lost}
        self.group_id = group_id
        self._init_loop()

    # -- what the member knows -----------------------------------------------------------------------------

    @property
    def state(self) -> MemberState:
        return self.machine.state

    @property
    def assignment(self) -> GroupAssignment | None:
        """What the member holds now (None while it holds nothing)."""
        return self.machine.held

    @property
    def member_id(self) -> str:
        return self.machine.member_id

    @property
    def generation_id(self) -> int:
        return self.machine.generation_id

    @property
    def error(self) -> KafkaError | None:
        return self.machine.error

    # -- life cycle ----------------------------------------------------------------------------------------

    async def __aenter__(self) -> GroupMember:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Join the group in the background (returns at once; see `wait_for_assignment`)."""
        self._start_loop(f"herd-member-{self.config.group_id}")

    async def wait_for_assignment(self, timeout: float | None = None) -> GroupAssignment:
        """Wait until the member is STABLE; raises its fatal error, or TimeoutError."""
        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(lambda: self.machine.state is MemberState.STABLE or self.machine.done), timeout
            )
        if self.machine.error is not None:
            raise self.machine.error
        if self.machine.held is None:
            raise RuntimeError(f"the member is {self.machine.state.name}")
        return self.machine.held

    async def wait_for(self, predicate: Callable[[GroupMember], bool], timeout: float | None = None) -> None:
        """Wait until `predicate(self)` holds, checked after every change; raises TimeoutError."""
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: predicate(self)), timeout)

    async def wait_done(self) -> None:
        """Wait until the member has stopped: closed, or failed (see `error`)."""
        if self._task is not None:
            await asyncio.shield(self._task)

    def rejoin(self, reason: str = "rejoin requested") -> None:
        """Ask for a rebalance."""
        self._events.put_nowait(lambda: self.machine.rejoin(reason))

    async def close(self, timeout: float = 10.0) -> None:
        """Revoke, leave the group (dynamic members only) and stop; waits at most `timeout` seconds."""
        await self._stop_loop(timeout)
        if self._own_client:
            await self.client.close()

    # -- the loop ------------------------------------------------------------------------------------------

    async def _perform(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Send):
                self._spawn(self._send(action.request))
            elif isinstance(action, ComputeAssignment):
                self._spawn(self._assign(action))
            elif isinstance(action, (Assigned, Revoked, Lost)):
                await self._callback(action)
            elif isinstance(action, CoordinatorDead):
                log.info("group %s: coordinator lost (%s)", self.config.group_id, action.reason)
                self.client.coordinator_dead(self.config.group_id)
            elif isinstance(action, Failed):
                log.error("group %s: member stopped: %s", self.config.group_id, action.error)
            elif isinstance(action, Closed):
                pass

    async def _send(self, request: MembershipRequest) -> None:
        timeout = self._timeout_ms(request)
        try:
            _, body = await self.client.send_to_coordinator(
                self.config.group_id, API_KEYS[type(request)], lambda b: to_kio(request, b), timeout
            )
        except (UnsupportedApi, AuthenticationError) as exc:  # fatal: asking again cannot help
            error = exc  # `exc` is unbound when the except block ends, before the event runs
            self._events.put_nowait(lambda: self.machine.fail(error))
            return
        except KafkaError as exc:
            reason = str(exc)
            self._events.put_nowait(lambda: self.machine.request_failed(request, reason))
            return
        response = from_kio(request, body)
        self._events.put_nowait(lambda: self.machine.receive(request, response))

    def _timeout_ms(self, request: MembershipRequest) -> int:
        return request_timeout_ms(request, self.config, self.client.request_timeout_ms)

    async def _assign(self, action: ComputeAssignment) -> None:
        try:
            result = self.protocol.assign(action.protocol_name, action.members)
            if inspect.isawaitable(result):
                result = await result
            assignments = dict(result)
        except Exception as exc:  # the user's assignor failed: the member cannot lead this generation
            log.exception("group %s: assignment failed", self.config.group_id)
            error = KafkaError(-1, f"assignment failed: {exc}")
            self._events.put_nowait(lambda: self.machine.assignment_failed(action.generation_id, error))
            return
        self._events.put_nowait(lambda: self.machine.assignment_ready(action.generation_id, assignments))

    async def _callback(self, action: Assigned | Revoked | Lost) -> None:
        callback = self.callbacks[type(action)]
        if callback is None:
            return
        try:
            result = callback(action.assignment)
            if inspect.isawaitable(result):
                await result
        except Exception:  # a failing callback must not stop the member
            log.exception("group %s: %s callback failed", self.config.group_id, type(action).__name__)


def request_timeout_ms(request: MembershipRequest, config: MembershipConfig, default_ms: int) -> int:
    """How long a member waits for the answer to `request` before it gives its connection up (the client's
    request timeout is `default_ms`): JoinGroup and SyncGroup may be parked for a whole rebalance (Java allows
    rebalance timeout + 5s); a heartbeat unanswered for a session timeout is useless, so its connection is
    given up then. The simulator's members use it too (tests/simulation/members.py)."""
    if isinstance(request, (JoinGroupRequest, SyncGroupRequest)):
        return max(default_ms, config.rebalance_timeout_ms + 5000)
    if isinstance(request, HeartbeatRequest):
        return min(default_ms, config.session_timeout_ms)
    return default_ms
