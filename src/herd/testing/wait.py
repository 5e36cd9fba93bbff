"""One way to wait for something in a test: `wait_until(predicate, timeout, what)` (and `await
wait_until_async(...)` in a coroutine) calls `predicate` until it returns something truthy, which it returns,
and raises `WaitTimeout` naming `what` (and the last value or exception seen) once `timeout` seconds have
passed. A test that waited for an event with an ad-hoc `while time.monotonic() < deadline` loop says here what
it waited for, with the same bound.

`WaitTimeout` is both an AssertionError (a test's expectation was not met; pytest shows it as one) and a
TimeoutError (what the waits of herd.testing.broker raised before).

`collect_until(poll, enough, timeout)` (and `collect_until_async`) is the other shape a test's loop takes: it
gathers what `poll()` returns (a consumer's records) until `enough(gathered)` or the bound, and returns what it
gathered, enough or not, for the test to assert on: a shortfall shows in that assertion with what did arrive.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

__all__ = ["WaitTimeout", "collect_until", "collect_until_async", "wait_until", "wait_until_async"]

_T = TypeVar("_T")

POLL_S = 0.05


class WaitTimeout(AssertionError, TimeoutError):
    """A wait ran out of time; the message names what it waited for."""


def _describe(what: str | Callable[[], str]) -> str:
    if callable(what):
        try:
            return what()
        except Exception as e:  # the description of a failure must not hide it
            return f"(describing the wait failed: {e!r})"
    return what


def _message(what: str | Callable[[], str], timeout: float, last: object, error: BaseException | None) -> str:
    text = f"timed out after {timeout:g} s waiting for {_describe(what)}"
    if error is not None:
        return f"{text}; the last try raised {error!r}"
    return f"{text}; the last try returned {last!r}"


def wait_until(
    predicate: Callable[[], _T | None],
    timeout: float,
    what: str | Callable[[], str],
    *,
    interval: float = POLL_S,
    ignore: tuple[type[BaseException], ...] = (),
) -> _T:
    """Call `predicate()` every `interval` seconds until it returns a truthy value, and return that value.
    Exceptions of the types in `ignore` count as a falsy answer (a client not yet connected); any other
    propagates. After `timeout` seconds (the predicate is tried once more at the bound), raise WaitTimeout
    with `what` (a string, or a callable giving one at the time of failure, to show the state then)."""
    deadline = time.monotonic() + timeout
    while True:
        last: object = None
        error: BaseException | None = None
        try:
            last = predicate()
        except ignore as e:
            error = e
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            raise WaitTimeout(_message(what, timeout, last, error)) from error
        time.sleep(min(interval, max(deadline - time.monotonic(), 0.0)))


async def wait_until_async(
    predicate: Callable[[], _T | None | Awaitable[_T | None]],
    timeout: float,
    what: str | Callable[[], str],
    *,
    interval: float = POLL_S,
    ignore: tuple[type[BaseException], ...] = (),
) -> _T:
    """`wait_until` in a coroutine: `predicate` may be a coroutine function; the pause is `asyncio.sleep`."""
    deadline = time.monotonic() + timeout
    while True:
        last: object = None
        error: BaseException | None = None
        try:
            value = predicate()
            last = await value if inspect.isawaitable(value) else value
        except ignore as e:
            error = e
        else:
            if last:
                return last  # type: ignore[return-value]
        if time.monotonic() >= deadline:
            raise WaitTimeout(_message(what, timeout, last, error)) from error
        await asyncio.sleep(min(interval, max(deadline - time.monotonic(), 0.0)))


def collect_until(poll: Callable[[], Iterable[_T]], enough: Callable[[list[_T]], bool], timeout: float) -> list[_T]:
    """Call `poll()` and gather what it returns, in order, until `enough(gathered)` holds or `timeout` seconds
    have passed (no call starts after the bound), and return what was gathered, enough or not: it never raises
    for the time, the test asserts on what it got. There is no pause between calls: `poll` waits itself (a
    consumer's poll with its timeout)."""
    gathered: list[_T] = []
    deadline = time.monotonic() + timeout
    while not enough(gathered) and time.monotonic() < deadline:
        gathered.extend(poll())
    return gathered


async def collect_until_async(
    poll: Callable[[], Awaitable[Iterable[_T]]], enough: Callable[[list[_T]], bool], timeout: float
) -> list[_T]:
    """`collect_until` in a coroutine: `poll` is a coroutine function."""
    gathered: list[_T] = []
    deadline = time.monotonic() + timeout
    while not enough(gathered) and time.monotonic() < deadline:
        gathered.extend(await poll())
    return gathered
