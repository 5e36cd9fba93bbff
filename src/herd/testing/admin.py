"""`HerdAdmin`: the few admin operations a test needs, as blocking calls: create a topic, describe a group,
wait until a group reaches a state or a number of members, read a group's committed offsets.

Each call runs herd's own asynchronous admin client (herd.client.admin) in a fresh event loop. A test that
runs an event loop itself (an async test with aiokafka) must not block it in a wait: its consumer could not
heartbeat meanwhile, and the group would never settle. The waits refuse to run on a thread whose loop runs and
say to call them through `await asyncio.to_thread(...)`; the quick calls run on a worker thread there.

The waits poll DescribeGroups (and FindCoordinator) every 50 ms from the client id `herd-testing`: a fault
rule naming a group but no API matches those requests too, so give such rules an `api` (or a `client_id`).
"""

from __future__ import annotations

import asyncio
import re
import threading
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

from herd.testing.wait import wait_until_async

if TYPE_CHECKING:
    from herd.client.admin import Admin, GroupDescription

__all__ = ["HerdAdmin", "unique_name"]

T = TypeVar("T")
CLIENT_ID = "herd-testing"
POLL_S = 0.05
WAIT_TIMEOUT_S = 30.0


def unique_name(prefix: str, hint: str = "") -> str:
    """`prefix-hint-xxxxxxxx`: a legal topic or group name, readable (`hint`: the test's name) and unique."""
    hint = re.sub(r"[^a-zA-Z0-9._-]+", "-", hint).strip("-.")[:80]
    return "-".join(part for part in (prefix, hint, uuid.uuid4().hex[:8]) if part)


class HerdAdmin:
    """Blocking admin helpers against `bootstrap` (HOST:PORT[,HOST:PORT...])."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def create_topic(
        self, name: str | None = None, partitions: int = 1, configs: Mapping[str, str] | None = None
    ) -> str:
        """Create a topic (a fresh unique name when None); its name. Raises herd.client's AdminError."""
        topic = name or unique_name("herd-topic")

        async def create(admin: Admin) -> None:
            await admin.create_topic(topic, partitions, configs=configs)

        self._run(create, blocking=False)
        return topic

    def describe_group(self, group: str) -> GroupDescription:
        """The group's state and members (state "Dead" when it does not exist)."""

        async def describe(admin: Admin) -> GroupDescription:
            return await admin.describe_group(group)

        return self._run(describe, blocking=False)

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        """The group's committed offsets: (topic, partition) -> offset."""
        from herd.client.offsets import fetch_committed

        async def fetch(admin: Admin) -> dict[tuple[str, int], int]:
            found = await fetch_committed(admin.client, group)
            return {(tp.topic, tp.partition): c.offset for tp, c in found.items()}

        return self._run(fetch, blocking=False)

    def wait_for_group_state(self, group: str, state: str, timeout: float = WAIT_TIMEOUT_S) -> GroupDescription:
        """Wait until the group is in `state` (Kafka's names: Empty, PreparingRebalance, CompletingRebalance,
        Stable, Dead); its description then. Raises TimeoutError naming the last state seen."""
        return self.wait_for_group(group, lambda g: g.state == state, f"state {state}", timeout)

    def wait_for_members(
        self, group: str, n: int, state: str | None = "Stable", timeout: float = WAIT_TIMEOUT_S
    ) -> GroupDescription:
        """Wait until the group has `n` members and is in `state` (any state when None); its description."""

        def settled(g: GroupDescription) -> bool:
            return len(g.members) == n and (state is None or g.state == state)

        return self.wait_for_group(group, settled, f"{n} members" + (f" and state {state}" if state else ""), timeout)

    def wait_for_group(
        self, group: str, condition: Callable[[GroupDescription], bool], what: str, timeout: float = WAIT_TIMEOUT_S
    ) -> GroupDescription:
        """Wait until `condition(description)` holds; `what` names it in the TimeoutError."""

        async def poll(admin: Admin) -> GroupDescription:
            seen: list[GroupDescription] = []

            async def reached() -> GroupDescription | None:
                seen[:] = [await admin.describe_group(group)]
                return seen[0] if condition(seen[0]) else None

            def state() -> str:
                last = seen[0]
                return f"group {group!r} to reach {what} (it is {last.state} with {len(last.members)} members)"

            return await wait_until_async(reached, timeout, state, interval=POLL_S)

        return self._run(poll, blocking=True)

    def _run(self, operation: Callable[[Admin], Awaitable[T]], *, blocking: bool) -> T:
        """Run `operation(admin)` in an event loop of its own (on a worker thread if this one runs a loop)."""

        async def main() -> T:
            from herd.client.admin import Admin

            async with Admin(self.bootstrap, client_id=CLIENT_ID) as admin:
                return await operation(admin)

        if not _loop_running():
            return asyncio.run(main())
        if blocking:
            raise RuntimeError(
                "this wait blocks, and this thread runs an event loop (an async test): its "
                "clients could not work meanwhile; call it as `await asyncio.to_thread(...)`"
            )
        return _in_thread(lambda: asyncio.run(main()))


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _in_thread(call: Callable[[], T]) -> T:
    result: list[T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(call())
        except BaseException as e:  # handed to the caller's thread
            error.append(e)

    thread = threading.Thread(target=target, name="herd-testing-admin")
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]
