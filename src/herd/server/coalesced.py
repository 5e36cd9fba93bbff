"""`Coalesced`: many callers of one async computation share its runs, and each still gets a result computed after
it asked. While a run is under way, every caller that arrives waits for the one next run, which starts when the
current one ends; so however many HTTP clients poll a view (the console refreshes every 2 s per open tab), at most
one run is under way and one waiting, and nobody is answered from before their request."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Coalesced(Generic[T]):
    __slots__ = ("_running", "_next")

    def __init__(self) -> None:
        self._running: asyncio.Task[T] | None = None
        self._next: asyncio.Task[T] | None = None

    async def get(self, compute: Callable[[], Awaitable[T]]) -> T:
        loop = asyncio.get_running_loop()
        if self._running is None or self._running.done():
            self._running = loop.create_task(self._run(compute))
            return await asyncio.shield(self._running)
        if self._next is None:
            self._next = loop.create_task(self._after(self._running, compute))
        return await asyncio.shield(self._next)

    @staticmethod
    async def _run(compute: Callable[[], Awaitable[T]]) -> T:
        return await compute()

    async def _after(self, previous: asyncio.Task[T], compute: Callable[[], Awaitable[T]]) -> T:
        await asyncio.wait([previous])
        self._running, self._next = self._next, None  # this run is the current one now
        return await compute()
