"""aiokafka consumers, subscribed in a group on the plugin's session broker, through the coordinator's error
answers injected with herd_faults and through a coordinator move; the same story as test_confluent.py with an
asyncio client: it takes and commits what was produced, meets the fault, and must take and commit what comes
after. The herd_admin waits run through asyncio.to_thread, so that the consumer's loop keeps running.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import pytest
from plugin_clients import AioApp, produce, values

if TYPE_CHECKING:
    from herd.testing import Faults, HerdAdmin, HerdBroker


class Scene:
    """The fixtures of one test, and the steps its consumer goes through."""

    def __init__(self, broker: HerdBroker, topic: str, group: str, faults: Faults, admin: HerdAdmin) -> None:
        self.broker, self.topic, self.group, self.faults, self.admin = broker, topic, group, faults, admin

    def app(self, **config: object) -> AioApp:
        return AioApp(self.broker.bootstrap, self.topic, self.group, **config)

    async def settle(self, app: AioApp) -> str:
        """The first three values taken and committed, the group Stable with this one member: its id."""
        produce(self.broker.bootstrap, self.topic, values(0, 3))
        await app.consume(3)
        group = await asyncio.to_thread(self.admin.wait_for_members, self.group, 1)
        return group.members[0].member_id

    async def carry_on(self, app: AioApp) -> None:
        produce(self.broker.bootstrap, self.topic, values(3, 6))
        await app.consume(6)
        assert set(app.received) == set(values(0, 6))
        assert await asyncio.to_thread(self.admin.committed, self.group) == {(self.topic, 0): 6}

    async def member_id(self) -> str:
        group = await asyncio.to_thread(self.admin.wait_for_members, self.group, 1)
        return group.members[0].member_id


@pytest.fixture
def scene(
    herd_broker: HerdBroker, herd_topic: str, herd_group: str, herd_faults: Faults, herd_admin: HerdAdmin
) -> Scene:
    return Scene(herd_broker, herd_topic, herd_group, herd_faults, herd_admin)


def run(story: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(story())


def test_rebalance_in_progress_makes_it_join_again(scene: Scene) -> None:
    async def story() -> None:
        async with scene.app() as app:
            await scene.settle(app)
            rule = scene.faults.add(
                action="error", api="Heartbeat", group=scene.group, error="REBALANCE_IN_PROGRESS", count=1
            )
            await app.wait_hit(scene.faults, rule)
            await app.consume_until(lambda: len(app.assignments) == 2, "a second assignment")
            await scene.carry_on(app)

    run(story)


@pytest.mark.parametrize("api", ["Heartbeat", "OffsetCommit"])
def test_not_coordinator_sends_it_looking_for_the_coordinator(api: str, scene: Scene) -> None:
    async def story() -> None:
        async with scene.app() as app:
            member = await scene.settle(app)
            rule = scene.faults.add(action="error", api=api, group=scene.group, error="NOT_COORDINATOR", count=1)
            if api == "Heartbeat":
                await app.wait_hit(scene.faults, rule)
            await scene.carry_on(app)  # the first commit meets it
            assert scene.faults.list() == []
            assert app.assignments == [[0]]
            assert await scene.member_id() == member

    run(story)


def test_joining_through_not_coordinator_and_load_in_progress(scene: Scene) -> None:
    async def story() -> None:
        scene.faults.add(action="error", api="JoinGroup", group=scene.group, error="NOT_COORDINATOR", count=1)
        scene.faults.add(
            action="error", api="OffsetFetch", group=scene.group, error="COORDINATOR_LOAD_IN_PROGRESS", count=1
        )
        async with scene.app() as app:
            await scene.settle(app)
            assert scene.faults.list() == []
            await scene.carry_on(app)
            assert app.assignments == [[0]]

    run(story)


def test_unknown_member_id_makes_it_join_again_as_a_new_member(scene: Scene) -> None:
    # A static member: joining again under its group.instance.id, it replaces its old member id at once,
    # where a dynamic one would wait for the old id's session to end (test_confluent.py shows that one).
    async def story() -> None:
        async with scene.app(group_instance_id="worker-1") as app:
            before = await scene.settle(app)
            rule = scene.faults.add(
                action="error", api="Heartbeat", group=scene.group, error="UNKNOWN_MEMBER_ID", count=1
            )
            await app.wait_hit(scene.faults, rule)
            await app.consume_until(lambda: len(app.assignments) == 2, "a second assignment")
            assert await scene.member_id() != before
            await scene.carry_on(app)

    run(story)


def test_a_fenced_static_member_surfaces_the_error(scene: Scene) -> None:
    # Kafka answers FENCED_INSTANCE_ID to a JoinGroup or SyncGroup carrying a group.instance.id that another
    # process has taken over (aiokafka's Heartbeat, v1, carries none). aiokafka 0.14 has no class for error
    # 82: getmany() raises KafkaError("UnknownError()") (twice: to the waiting fetch, then from the next
    # call), and the consumer joins again as the member it was.
    async def story() -> None:
        async with scene.app(group_instance_id="worker-1") as app:
            await scene.settle(app)
            scene.faults.add(action="error", api="JoinGroup", member="worker-1", error="FENCED_INSTANCE_ID", count=1)
            scene.faults.add(action="error", api="Heartbeat", group=scene.group, error="REBALANCE_IN_PROGRESS", count=1)
            await app.consume_until(lambda: bool(app.errors), "an error")
            assert scene.faults.list() == []
            await scene.carry_on(app)
            assert app.errors and all(str(e) == "KafkaError: UnknownError()" for e in app.errors), app.errors

    run(story)


def test_a_coordinator_move_is_followed(scene: Scene) -> None:
    async def story() -> None:
        async with scene.app() as app:
            member = await scene.settle(app)
            moved = await asyncio.to_thread(scene.faults.move_coordinator, scene.group, unavailable_ms=200)
            assert moved["partition"][0] == "__consumer_offsets"
            await scene.carry_on(app)
            assert await scene.member_id() == member

    run(story)
