"""Calling an API handler (herd.server.apis) directly, as a connection would, for unit tests of handlers."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from herd.server.broker import Deferred


async def answered(outcome: Any) -> Any:
    """A handler's response, once it is known (as the connection has it sent): `handle` returns it, a coroutine
    that ends with it, or a Deferred whose future ends it."""
    if isinstance(outcome, Deferred):
        return outcome.respond(await asyncio.wait_for(outcome.future, 5))
    if inspect.isawaitable(outcome):
        return await asyncio.wait_for(outcome, 5)
    return outcome
