"""`MachineDriver`: the asyncio loop that GroupMember (herd.client.group, the classic protocol) and
ConsumerProtocolMember (herd.client.consumer_group_member, KIP-848) share around their pure membership machines.

One background task owns the machine: it waits for the next event (a function a request's task or a caller put
in the queue, returning the machine's actions) or for the machine's next deadline, feeds it in, adds what `tick`
says is due, and hands the actions to the subclass's `_perform`, in order; waiters on `_changed` are woken after
each batch. Requests run in tasks of their own (`_spawn`), so an answer the coordinator parks does not stop the
loop. The machine needs `start()`, `tick()`, `next_deadline()`, `close()`, `done` and `state`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from herd.client.heartbeat import Clock

__all__ = ["MachineDriver"]

log = logging.getLogger(__name__)

Event = Callable[[], list[Any]]


class MachineDriver:
    """The loop around a membership machine; a subclass sets `machine`, `clock`, `group_id` and `_perform`."""

    machine: Any
    clock: Clock
    group_id: str

    def _init_loop(self) -> None:
        self._events: asyncio.Queue[Event] = asyncio.Queue()
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def _start_loop(self, name: str) -> None:
        if self._task is not None:
            raise RuntimeError("the member was already started")
        self._task = asyncio.get_running_loop().create_task(self._run(), name=name)

    async def _stop_loop(self, timeout: float) -> None:
        """Hand the machine `close` and wait at most `timeout` seconds for the loop to end; cancel what is left."""
        if self._task is not None and not self._task.done():
            self._events.put_nowait(self.machine.close)
            try:
                await asyncio.wait_for(asyncio.shield(self._task), timeout)
            except TimeoutError:
                log.warning("group %s: close timed out in %s", self.group_id, self.machine.state.name)
                self._task.cancel()
        for task in list(self._tasks):
            task.cancel()

    async def _run(self) -> None:
        actions = self.machine.start()
        while True:
            await self._perform(actions)
            async with self._changed:
                self._changed.notify_all()
            if self.machine.done:
                return
            actions = await self._next_event()
            actions += self.machine.tick()

    async def _next_event(self) -> list[Any]:
        deadline = self.machine.next_deadline()
        timeout = None if deadline is None else max(0, deadline - self.clock.now_ms()) / 1000
        try:
            event = await asyncio.wait_for(self._events.get(), timeout)
        except TimeoutError:
            return []
        return event()

    async def _perform(self, actions: list[Any]) -> None:
        raise NotImplementedError

    def _spawn(self, coroutine: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coroutine)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
