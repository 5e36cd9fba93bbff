"""A consuming application, twice: `ConfluentApp` (confluent-kafka) and `AioApp` (aiokafka), each subscribed
in a group and committing every message it takes (at least once), so that the plugin's tests can drive a real
client through injected faults and check what it did: every value received, the commits landed, how many times
it was assigned partitions.

`produce` writes values with confluent-kafka's producer. The deadlines below bound a wait for something the
client must do (they fail a test that would hang), they time nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from herd.testing.wait import wait_until, wait_until_async

if TYPE_CHECKING:
    from herd.testing import FaultRule, Faults

DEADLINE_S = 30.0
# Heartbeats every 100 ms, so that a fault on Heartbeat takes effect at once; the session timeout is the
# broker's least (group.min.session.timeout.ms).
SESSION_MS = 6000
HEARTBEAT_MS = 100


def produce(bootstrap: str, topic: str, values: Iterable[bytes]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(DEADLINE_S) == 0, "values left undelivered"


def values(start: int, stop: int) -> list[bytes]:
    return [b"v%03d" % i for i in range(start, stop)]


def wait_hit(faults: Faults, rule: FaultRule, keep_going: Callable[[], object]) -> None:
    """Call `keep_going()` until the rule (added with count=1) has been applied, and so removed."""

    tries = 0

    def applied() -> bool:  # from the second try on, keep going first: the rule is checked after each step
        nonlocal tries
        tries += 1
        if tries > 1:
            keep_going()
        return not any(r.id == rule.id for r in faults.list())

    wait_until(applied, DEADLINE_S, f"the fault {rule} to be applied", interval=0)


class ConfluentApp:
    """A confluent-kafka consumer in `group`, subscribed to `topic`; `config` adds or overrides settings."""

    def __init__(self, bootstrap: str, topic: str, group: str, **config: Any) -> None:
        from confluent_kafka import Consumer

        self.assignments: list[list[int]] = []
        self.received: list[bytes] = []
        self.errors: list[Any] = []
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": HEARTBEAT_MS,
                **config,
            }
        )
        self.consumer.subscribe([topic], on_assign=self._assigned)

    def _assigned(self, consumer: Any, partitions: list[Any]) -> None:
        self.assignments.append(sorted(p.partition for p in partitions))

    def poll(self, timeout: float = 0.1) -> None:
        """One poll: a message is kept and committed (synchronously), an error kept in `errors`."""
        message = self.consumer.poll(timeout)
        if message is None:
            return
        if message.error() is not None:
            self.errors.append(message.error())
            return
        self.received.append(message.value())
        self.consumer.commit(message, asynchronous=False)

    def consume_until(self, condition: Callable[[], bool], what: str = "the condition") -> None:
        def consumed() -> bool:
            if condition():
                return True
            self.poll()
            return condition()

        wait_until(
            consumed, DEADLINE_S, lambda: f"{what} ({len(self.received)} received, errors {self.errors})", interval=0
        )

    def consume(self, n: int) -> None:
        """Poll until `n` distinct values have been received in all."""
        self.consume_until(lambda: len(set(self.received)) >= n, f"{n} distinct values received")

    def close(self) -> None:
        self.consumer.close()


class AioApp:
    """An aiokafka consumer in `group`, subscribed to `topic`; use as `async with`."""

    def __init__(self, bootstrap: str, topic: str, group: str, **config: Any) -> None:
        from aiokafka import AIOKafkaConsumer
        from aiokafka.abc import ConsumerRebalanceListener

        app = self

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            async def on_partitions_revoked(self, revoked: Any) -> None:
                pass

            async def on_partitions_assigned(self, assigned: Any) -> None:
                app.assignments.append(sorted(tp.partition for tp in assigned))

        self.assignments: list[list[int]] = []
        self.received: list[bytes] = []
        self.errors: list[Exception] = []
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            retry_backoff_ms=50,
            **config,
        )
        self.consumer.subscribe([topic], listener=Listener())

    async def __aenter__(self) -> AioApp:
        await self.consumer.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.consumer.stop()

    async def poll(self) -> None:
        """One fetch: what arrives is kept and committed; an error raised is kept in `errors`."""
        from aiokafka.errors import KafkaError

        try:
            batches = await self.consumer.getmany(timeout_ms=100)
        except KafkaError as e:
            self.errors.append(e)
            return
        for records in batches.values():
            self.received += [r.value for r in records]
        if batches:
            await self.consumer.commit()

    async def consume_until(self, condition: Callable[[], bool], what: str = "the condition") -> None:
        async def consumed() -> bool:
            if condition():
                return True
            await self.poll()
            return condition()

        await wait_until_async(
            consumed, DEADLINE_S, lambda: f"{what} ({len(self.received)} received, errors {self.errors})", interval=0
        )

    async def consume(self, n: int) -> None:
        await self.consume_until(lambda: len(set(self.received)) >= n, f"{n} distinct values received")

    async def wait_hit(self, faults: Faults, rule: FaultRule) -> None:
        """Keep consuming until the rule (count=1) has been applied."""

        tries = 0

        async def applied() -> bool:  # from the second try on, poll first: the rule is checked after each poll
            nonlocal tries
            tries += 1
            if tries > 1:
                await self.poll()
            return not any(r.id == rule.id for r in await asyncio.to_thread(faults.list))

        await wait_until_async(applied, DEADLINE_S, f"the fault {rule} to be applied", interval=0)
