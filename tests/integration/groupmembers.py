"""Consumer-group members of three real clients, admin calls, a producer and polling helpers, for the group
tests (the `members` fixture that stops a test's members is in tests/integration/conftest.py).

A `Member` is one consumer of kafka-python, confluent-kafka or aiokafka running in its own thread (aiokafka
on its own event loop there). It subscribes to one topic, polls, records every message it is given, commits
synchronously after each batch (and when partitions are revoked), and publishes what it holds: `assigned`
(the current partitions), `events` (every assignment and revocation the client reported) and `consumed`.
`stop()` closes it the client's normal way (a dynamic member leaves the group, a static one does not).

Run as a script, this module is a member in a child process that prints `ASSIGNED <partitions>` whenever its
assignment changes, so a test can SIGKILL it: a member that dies without leaving.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from herd.testing.wait import wait_until

CLIENTS = ("kafka-python", "confluent", "aiokafka")
SESSION_MS = 6000
HEARTBEAT_MS = 300
REBALANCE_MS = 10000  # max.poll.interval.ms: how long a join phase may wait for a member
METADATA_MS = 500  # how often clients refresh metadata (CreatePartitions is noticed through it)
# kafka-python (3.0.x kafka/cluster.py, update_metadata) clears a pending metadata update when an answer to an
# earlier request arrives, even one sent before the consumer subscribed: a consumer that joins its group while
# that request is in flight assigns itself nothing and waits metadata_max_age_ms (5 minutes by default) for
# the next refresh, which alone makes it rejoin. Subscribing kafka-python consumers of the tests refresh more
# often than that, and `kafka_python_subscriber` keeps them from joining before they know their topic.
KAFKA_PYTHON_METADATA_MS = 1000


# How long a kafka-python consumer's poll() waits for a join it has begun, whatever the poll's own timeout: longer
# than a join of the tests' members (their rebalance timeout, max.poll.interval.ms, is REBALANCE_MS), shorter than
# the 30 s a member is given to stop.
KAFKA_PYTHON_JOIN_WAIT_MS = REBALANCE_MS + 5000


def kafka_python_group_consumer(*topics: str, **config: Any) -> Any:
    """A kafka-python KafkaConsumer for a group, with kafka-python 3.0.12's dropped join mended.

    kafka-python 3.0.12 (coordinator/base.py join_group_async) bounds a join by what is left of the poll's
    timeout and, when that runs out, leaves the join running in the background. It looks for the join's
    result only while need_rejoin() holds; but a leader that rejoins because its topics' metadata changed
    (CreatePartitions) stops needing to as soon as its own JoinGroup answer lets it assign (_perform_assignment
    stores the metadata it assigned from). When that answer comes between two polls, the join's result is never
    taken: the member never applies its assignment and sends no heartbeat, and the coordinator expires it
    (seen in a fresh-clone run: a kafka-python leader's rejoin after the topic grew, then its session failed 6 s
    later; a leader polling for 30 ms every 0.4 s hung so 8 times of 8, and 0 of 8 with this). kafka-python 1.4.5
    to 2.x and
    the Java client count a pending join as a reason to rejoin (AbstractCoordinator.rejoinNeededOrPending,
    dpkp/kafka-python#1695), and so does this consumer; and a poll that finds a join needed waits for it up to
    KAFKA_PYTHON_JOIN_WAIT_MS, so that a join is awaited by the poll that began it rather than sent again."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(*topics, **config)
    coordinator = consumer._coordinator
    need_rejoin, poll = coordinator.need_rejoin, coordinator.poll

    def rejoin_needed_or_pending() -> bool:
        return bool(need_rejoin()) or coordinator._join_task is not None

    def poll_until_joined(timeout_ms: float | None = None) -> bool:
        if timeout_ms is not None and rejoin_needed_or_pending():
            timeout_ms = max(timeout_ms, KAFKA_PYTHON_JOIN_WAIT_MS)
        return bool(poll(timeout_ms=timeout_ms))

    coordinator.need_rejoin, coordinator.poll = rejoin_needed_or_pending, poll_until_joined
    return consumer


def kafka_python_subscriber(topic: str, **config: Any) -> Any:
    """A kafka-python consumer of a group (kafka_python_group_consumer) subscribed to `topic` that knows the
    topic's partitions before its first poll joins the group. Without the wait, its first join races its first
    Metadata request for the topic (sent after the retry backoff that follows the bootstrap's); losing it, the
    leader assigns itself nothing and rejoins once the metadata arrives."""
    config.setdefault("metadata_max_age_ms", KAFKA_PYTHON_METADATA_MS)
    consumer = kafka_python_group_consumer(topic, **config)
    # kafka/cluster.py update_metadata stores the partitions and then, in the same call, updates the coordinator's
    # metadata snapshot: a join started after this (FindCoordinator and two JoinGroup round trips) assigns from both.
    wait_for(lambda: consumer.partitions_for_topic(topic), what=f"kafka-python's metadata for {topic}")
    return consumer


BROKER_OVERRIDES = {"group.min.session.timeout.ms": "1000", "offsets.topic.num.partitions": "10", "num.partitions": "1"}

T = TypeVar("T")


def wait_for(
    condition: Callable[[], T],
    timeout: float = 30.0,
    what: str = "condition",
    interval: float = 0.02,
    ignore: tuple[type[BaseException], ...] = (),
) -> T:
    """Poll `condition` until it returns something truthy; fail with `what` after `timeout` seconds. An
    exception of `ignore` counts as not yet (e.g. a client's error while a node is not ready)."""
    return wait_until(condition, timeout, what, interval=interval, ignore=ignore)


def settled(members: list[Member], partitions: int, quiet_s: float = 1.0, timeout: float = 30.0) -> None:
    """Wait until the members are balanced and none has seen an assignment change for `quiet_s` (clients may
    rejoin on their own right after a group forms, e.g. a kafka-python leader that assigned before it had the
    topic's metadata)."""
    last, since = None, time.monotonic()

    def quiet() -> bool:
        nonlocal last, since
        state = (balanced(members, partitions), [m.event_count() for m in members])
        if state != last:
            last, since = state, time.monotonic()
            return False
        return state[0] and time.monotonic() - since >= quiet_s

    wait_until(
        quiet,
        timeout,
        lambda: (
            f"the members to settle, balanced and quiet for {quiet_s} s: "
            f"{[(m.name, sorted(m.assigned)) for m in members]}"
        ),
        interval=0.02,
    )


def balanced(members: Iterable[Member], partitions: int) -> bool:
    """Every partition held by exactly one member, and sizes differing by at most one."""
    held = [m.assigned for m in members]
    union = frozenset().union(*held)
    sizes = [len(h) for h in held]
    return sum(sizes) == partitions and union == frozenset(range(partitions)) and max(sizes) - min(sizes) <= 1


# -- topics and data -------------------------------------------------------------------------------------------


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)


def add_partitions(bootstrap: str, topic: str, total: int) -> None:
    from confluent_kafka.admin import AdminClient, NewPartitions

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_partitions([NewPartitions(topic, total)])[topic].result(15)


def produce(bootstrap: str, topic: str, partitions: int, n: int, start: int = 0) -> list[bytes]:
    """`n` messages spread round-robin over the partitions; returns their values."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    values = [b"m-%06d" % i for i in range(start, start + n)]
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=(start + i) % partitions)
    assert producer.flush(30) == 0, "messages left undelivered"
    return values


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int, **config: Any) -> dict[int, int]:
    """The group's committed offsets as confluent-kafka reads them (OffsetFetch); `config` adds consumer settings."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, **config})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=15)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in tps}


# -- members ---------------------------------------------------------------------------------------------------


class Producing(threading.Thread):
    """Numbered records to every partition of `topic` at a steady pace (confluent-kafka, idempotent, acks=all)
    until stopped; `acked` holds (when produce was called, value) of each acknowledged record, `errors` the
    delivery errors. Used by the failover and move tests."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, poll_s: float = 0.05) -> None:
        from confluent_kafka import Producer

        super().__init__(daemon=True)
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 60000,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self.topic, self.partitions, self.poll_s = topic, partitions, poll_s
        self.acked: list[tuple[float, bytes]] = []
        self.errors: list[Any] = []
        self._stop_event = threading.Event()

    def run(self) -> None:
        sent = 0
        while not self._stop_event.is_set():
            for _ in range(self.partitions):
                at = time.monotonic()
                self.producer.produce(
                    self.topic,
                    value=b"v-%07d" % sent,
                    partition=sent % self.partitions,
                    on_delivery=lambda e, m, at=at: self._delivered(e, m, at),
                )
                sent += 1
            self.producer.poll(self.poll_s)
        self.producer.flush(60)

    def _delivered(self, error: Any, message: Any, at: float) -> None:
        if error is not None:
            self.errors.append(error)
        else:
            self.acked.append((at, message.value()))

    def values(self) -> set[bytes]:
        """Every acknowledged value."""
        return {value for _, value in list(self.acked)}

    def since(self, moment: float) -> set[bytes]:
        return {value for at, value in list(self.acked) if at > moment}

    def stop(self) -> None:
        self._stop_event.set()
        self.join(90)


class Member(threading.Thread):
    """One consumer in a thread; see the module docstring."""

    client = ""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        group: str,
        *,
        name: str = "m",
        instance_id: str | None = None,
        assignor: str = "range",
        session_ms: int = SESSION_MS,
    ) -> None:
        super().__init__(name=f"{self.client}-{name}", daemon=True)
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        self.member_name, self.instance_id, self.assignor, self.session_ms = name, instance_id, assignor, session_ms
        self.assigned: frozenset[int] = frozenset()
        self.events: list[tuple[str, frozenset[int]]] = []
        self.timeline: list[tuple[float, str, frozenset[int]]] = []  # `events` with when (time.monotonic())
        self.stopped_at: float | None = None  # when `stop` was asked for
        self.consumed: list[tuple[int, int, bytes]] = []
        self.commit_failures = 0
        self.generation: int | None = None  # where the client tells it
        self.error: BaseException | None = None
        self._stop_event = threading.Event()
        self._lock = threading.Lock()

    def run(self) -> None:
        try:
            self._run()
        except BaseException as e:  # noqa: BLE001 - surfaced to the test through `check()`
            self.error = e

    def _run(self) -> None:
        raise NotImplementedError

    def stop(self, timeout: float = 30.0) -> None:
        if self.stopped_at is None:
            self.stopped_at = time.monotonic()
        self._stop_event.set()
        self.join(timeout)
        assert not self.is_alive(), f"{self.name} did not stop"
        self.check()

    def check(self) -> None:
        if self.error is not None:
            raise AssertionError(f"{self.name} failed: {self.error!r}") from self.error

    @property
    def stopping(self) -> bool:
        return self._stop_event.is_set()

    # called by the client-specific loops
    def _on_event(self, kind: str, partitions: Iterable[int], now: Iterable[int]) -> None:
        with self._lock:
            self.events.append((kind, frozenset(partitions)))
            self.timeline.append((time.monotonic(), kind, frozenset(partitions)))
            self.assigned = frozenset(now)

    def _on_messages(self, messages: Iterable[tuple[int, int, bytes]]) -> None:
        with self._lock:
            self.consumed.extend(messages)

    def event_count(self) -> int:
        with self._lock:
            return len(self.events)


class KafkaPythonMember(Member):
    client = "kafka-python"

    def _config(self) -> dict[str, Any]:
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

        assignors = {
            "range": RangePartitionAssignor,
            "roundrobin": RoundRobinPartitionAssignor,
            "cooperative-sticky": CooperativeStickyAssignor,
        }
        return dict(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            client_id=f"kp-{self.member_name}",
            group_instance_id=self.instance_id,
            session_timeout_ms=self.session_ms,
            heartbeat_interval_ms=HEARTBEAT_MS,
            max_poll_interval_ms=REBALANCE_MS,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            metadata_max_age_ms=METADATA_MS,
            partition_assignment_strategy=[assignors[self.assignor]],
            fetch_max_wait_ms=100,
        )

    def _run(self) -> None:
        from kafka.consumer.subscription_state import ConsumerRebalanceListener

        consumer = kafka_python_group_consumer(**self._config())
        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: Any) -> None:  # runs on kafka-python's IO thread: no commit
                member._on_event(
                    "revoked",
                    [tp.partition for tp in revoked],
                    [tp.partition for tp in consumer.assignment() if tp not in set(revoked)],
                )

            def on_partitions_assigned(self, assigned: Any) -> None:
                member.generation = consumer._coordinator._generation.generation_id
                member._on_event(
                    "assigned", [tp.partition for tp in assigned], [tp.partition for tp in consumer.assignment()]
                )

        consumer.subscribe([self.topic], listener=Listener())
        try:
            while not self.stopping:
                batches = consumer.poll(timeout_ms=1000)
                self._on_messages((m.partition, m.offset, m.value) for msgs in batches.values() for m in msgs)
                if batches:
                    self._commit(consumer)
        finally:
            consumer.close()

    def _commit(self, consumer: Any) -> None:
        from kafka.errors import CommitFailedError, KafkaError

        try:
            consumer.commit()
        except (CommitFailedError, KafkaError):
            self.commit_failures += 1


class ConfluentMember(Member):
    client = "confluent"

    def _config(self) -> dict[str, Any]:
        config = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "client.id": f"cf-{self.member_name}",
            "session.timeout.ms": self.session_ms,
            "heartbeat.interval.ms": HEARTBEAT_MS,
            "max.poll.interval.ms": REBALANCE_MS,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": METADATA_MS,
            "partition.assignment.strategy": self.assignor,
            "fetch.wait.max.ms": 100,
        }
        if self.instance_id is not None:
            config["group.instance.id"] = self.instance_id
        return config

    def _run(self) -> None:
        from confluent_kafka import Consumer

        consumer = Consumer(self._config())

        def on_assign(c: Any, partitions: Any) -> None:
            now = {tp.partition for tp in c.assignment()} | {tp.partition for tp in partitions}
            self._on_event("assigned", [tp.partition for tp in partitions], now)

        def on_revoke(c: Any, partitions: Any) -> None:
            self._commit(c)
            gone = {tp.partition for tp in partitions}
            # What stays is worked out from the member's own record, not c.assignment(): close() revokes too, and
            # assignment() on a handle being destroyed raised a _DESTROY error that escaped the thread in a form
            # Python's traceback module cannot format (a fresh-clone run's teardown error in test_moves).
            self._on_event("revoked", gone, self.assigned - gone)

        consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
        try:
            while not self.stopping:
                messages = [m for m in consumer.consume(num_messages=500, timeout=0.1) if m.error() is None]
                self._on_messages((m.partition(), m.offset(), m.value()) for m in messages)
                if messages:
                    self._commit(consumer)
        finally:
            consumer.close()

    def _commit(self, consumer: Any) -> None:
        from confluent_kafka import KafkaException

        try:
            consumer.commit(asynchronous=False)
        except KafkaException as e:
            if e.args[0].code() != -168:  # _NO_OFFSET: nothing consumed since the last commit
                self.commit_failures += 1


class ConsumerProtocolMember(ConfluentMember):
    """A confluent-kafka consumer on the KIP-848 consumer protocol (`group.protocol=consumer`): the coordinator
    assigns (its `assignor` is the server-side one, `group.remote.assignor`), its heartbeat interval and session
    timeout are the group's, so it sets neither."""

    client = "confluent-consumer"

    def _config(self) -> dict[str, Any]:
        config = super()._config()
        for classic_only in ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy"):
            del config[classic_only]
        config["group.protocol"] = "consumer"
        if self.assignor in ("uniform", "range"):
            config["group.remote.assignor"] = self.assignor
        return config


class AiokafkaMember(Member):
    client = "aiokafka"

    def _run(self) -> None:
        asyncio.run(self._main())

    def _config(self) -> dict[str, Any]:
        from aiokafka.coordinator.assignors.range import RangePartitionAssignor
        from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

        assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}
        return dict(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            client_id=f"ak-{self.member_name}",
            group_instance_id=self.instance_id,
            session_timeout_ms=self.session_ms,
            heartbeat_interval_ms=HEARTBEAT_MS,
            max_poll_interval_ms=REBALANCE_MS,
            rebalance_timeout_ms=REBALANCE_MS,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            metadata_max_age_ms=METADATA_MS,
            partition_assignment_strategy=(assignors[self.assignor],),
            fetch_max_wait_ms=100,
        )

    async def _revoking(self) -> None:
        """Called in the revocation callback, after the commit: a subclass may hold the member there."""

    async def _main(self) -> None:
        from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

        consumer = AIOKafkaConsumer(**self._config())
        member = self

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked: Any) -> None:
                await member._commit(consumer)
                await member._revoking()
                member._on_event("revoked", [tp.partition for tp in revoked], [])

            async def on_partitions_assigned(self, assigned: Any) -> None:
                member.generation = consumer._coordinator.generation
                member._on_event("assigned", [tp.partition for tp in assigned], [tp.partition for tp in assigned])

        await consumer.start()
        consumer.subscribe([self.topic], listener=Listener())
        try:
            while not self.stopping:
                batches = await consumer.getmany(timeout_ms=100)
                self._on_messages((m.partition, m.offset, m.value) for msgs in batches.values() for m in msgs)
                if batches:
                    await self._commit(consumer)
        finally:
            await consumer.stop()

    async def _commit(self, consumer: Any) -> None:
        from aiokafka.errors import CommitFailedError, KafkaError

        try:
            await consumer.commit()
        except (CommitFailedError, KafkaError):
            self.commit_failures += 1


MEMBERS: dict[str, type[Member]] = {
    m.client: m for m in (KafkaPythonMember, ConfluentMember, ConsumerProtocolMember, AiokafkaMember)
}


def start_members(
    client: str | Iterable[str], bootstrap: str, topic: str, group: str, n: int = 3, prefix: str = "m", **kw: Any
) -> list[Member]:
    clients = [client] * n if isinstance(client, str) else list(client)
    members = [MEMBERS[c](bootstrap, topic, group, name=f"{prefix}{i}", **kw) for i, c in enumerate(clients)]
    for m in members:
        m.start()
    return members


def stop_all(members: Iterable[Member]) -> None:
    members = [m for m in members if m.is_alive()]
    for m in members:
        m._stop_event.set()
    for m in members:
        m.stop()


def owned_twice(members: Iterable[Member]) -> list[str]:
    """Each moment a partition was held by two members at once, as the clients reported it: a member holds a
    partition from its "assigned" event until its "revoked" one (or until `stop` was asked for, since a closing
    client may leave without a revocation callback), and nobody may be given a partition before its holder gave it
    up."""
    spans: dict[int, list[tuple[float, float, str]]] = {}
    for member in members:
        held: dict[int, float] = {}
        for at, kind, partitions in list(member.timeline):
            for partition in partitions:
                if kind == "assigned":
                    held.setdefault(partition, at)
                elif partition in held:
                    spans.setdefault(partition, []).append((held.pop(partition), at, member.name))
        end = member.stopped_at if member.stopped_at is not None else float("inf")
        for partition, since in held.items():
            spans.setdefault(partition, []).append((since, end, member.name))
    overlaps = []
    for partition, intervals in spans.items():
        intervals.sort()
        latest_end, latest_who = float("-inf"), ""
        for start, end, who in intervals:
            if start < latest_end:
                overlaps.append(
                    f"partition {partition}: {latest_who} held it until {latest_end:.3f}, {who} from {start:.3f}"
                )
            if end > latest_end:
                latest_end, latest_who = end, who
    return overlaps


def consumed_values(members: Iterable[Member]) -> list[bytes]:
    return [value for m in members for _, _, value in list(m.consumed)]


# -- admin -----------------------------------------------------------------------------------------------------


def admin_groups(client: str, bootstrap: str, group_ids: list[str]) -> tuple[dict[str, str], dict[str, Any]]:
    """(group id -> state from ListGroups, group id -> {"state", "members": [(client_id, partitions)]} from
    DescribeGroups), through `client`'s admin API."""
    return {"kafka-python": _kp_admin, "confluent": _cf_admin, "aiokafka": _ak_admin}[client](bootstrap, group_ids)


def _kp_admin(bootstrap: str, group_ids: list[str]) -> tuple[dict[str, str], dict[str, Any]]:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        listed = {g["group_id"]: g["group_state"] for g in admin.list_groups()}
        described = {}
        for gid, d in admin.describe_groups(group_ids).items():
            members = [
                (
                    m["client_id"],
                    sorted(p for t in m["member_assignment"]["assigned_partitions"] for p in t["partitions"]),
                )
                for m in d["members"]
            ]
            described[gid] = {"state": d["group_state"], "protocol": d["protocol_data"], "members": sorted(members)}
    finally:
        admin.close()
    return listed, described


def _cf_admin(bootstrap: str, group_ids: list[str]) -> tuple[dict[str, str], dict[str, Any]]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    result = admin.list_consumer_groups().result(15)
    listed = {g.group_id: g.state.name for g in result.valid}
    described = {}
    for gid, future in admin.describe_consumer_groups(group_ids).items():
        d = future.result(15)
        members = [(m.client_id, sorted(tp.partition for tp in m.assignment.topic_partitions)) for m in d.members]
        described[gid] = {"state": d.state.name, "protocol": d.partition_assignor, "members": sorted(members)}
    return listed, described


def _ak_admin(bootstrap: str, group_ids: list[str]) -> tuple[dict[str, str], dict[str, Any]]:
    async def main() -> tuple[dict[str, str], dict[str, Any]]:
        from aiokafka.admin import AIOKafkaAdminClient
        from aiokafka.protocol.group import MemberAssignment

        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            listed = {g[0]: "?" for g in await admin.list_consumer_groups()}
            described = {}
            for response in await admin.describe_consumer_groups(group_ids):
                for _error, gid, state, _, protocol, members, *_ in response.groups:
                    parsed = []
                    for _member_id, *rest in members:
                        client_id, assignment = rest[-4], rest[-1]
                        partitions = (
                            sorted(p for _, ps in MemberAssignment.decode(assignment).assignment for p in ps)
                            if assignment
                            else []
                        )
                        parsed.append((client_id, partitions))
                    described[gid] = {"state": state, "protocol": protocol, "members": sorted(parsed)}
        finally:
            await admin.close()
        return listed, described

    return asyncio.run(main())


# -- a member in a child process -------------------------------------------------------------------------------


class ChildMember:
    """A member of `client` in a child process; `kill()` is SIGKILL: it dies without leaving the group."""

    def __init__(self, client: str, bootstrap: str, topic: str, group: str, **kw: Any) -> None:
        args = [
            sys.executable,
            __file__,
            "--client",
            client,
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--group",
            group,
            "--options",
            json.dumps(kw),
        ]
        from processes import show_on_failure  # here: this module is the child's script too, run without tests/

        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=self._stderr, env={**os.environ, "PYTHONUNBUFFERED": "1"}
        )
        self.assigned: frozenset[int] = frozenset()
        self.printed: list[str] = []
        show_on_failure(f"{client} member in a child process", self.proc, self._output)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.printed.append(line.decode(errors="replace").rstrip())
            if line.startswith(b"ASSIGNED"):
                self.assigned = frozenset(json.loads(line[len(b"ASSIGNED") :]))

    def _output(self) -> str:
        """What it printed: its stdout lines, then the end of its stderr."""
        size = os.fstat(self._stderr.fileno()).st_size
        tail = os.pread(self._stderr.fileno(), 64 * 1024, max(0, size - 64 * 1024)).decode(errors="replace")
        return "\n".join([*self.printed, tail])

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        self.assigned = frozenset()


def _child_main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("--client", "--bootstrap", "--topic", "--group", "--options"):
        parser.add_argument(name, required=True)
    args = parser.parse_args()
    member = MEMBERS[args.client](args.bootstrap, args.topic, args.group, name="child", **json.loads(args.options))
    member.start()
    last: frozenset[int] | None = None
    while member.is_alive():
        if member.assigned != last:
            last = member.assigned
            print("ASSIGNED", json.dumps(sorted(last)), flush=True)
        time.sleep(0.02)


if __name__ == "__main__":
    _child_main()
