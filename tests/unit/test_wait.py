"""herd.testing.wait: `wait_until` returns the predicate's first truthy answer or raises WaitTimeout naming what
it waited for; `collect_until` returns what it gathered by its bound, enough or not, and never raises for the
time (issue 30 item 2)."""

from __future__ import annotations

import asyncio
import time

import pytest

from herd.testing.wait import WaitTimeout, collect_until, collect_until_async, wait_until, wait_until_async


def test_wait_until_returns_the_first_truthy_answer() -> None:
    answers = iter([0, None, "", "ready", "later"])
    assert wait_until(lambda: next(answers), 5, "an answer", interval=0) == "ready"


def test_wait_until_names_what_it_waited_for_and_the_last_answer() -> None:
    with pytest.raises(WaitTimeout, match=r"timed out after 0.1 s waiting for the thing; the last try returned 0"):
        wait_until(lambda: 0, 0.1, "the thing", interval=0.01)
    assert issubclass(WaitTimeout, AssertionError) and issubclass(WaitTimeout, TimeoutError)


def test_wait_until_ignores_only_the_named_exceptions() -> None:
    def refused() -> bool:
        raise ConnectionRefusedError

    with pytest.raises(WaitTimeout, match="the last try raised ConnectionRefusedError"):
        wait_until(refused, 0.1, "a connection", interval=0.01, ignore=(OSError,))
    with pytest.raises(ConnectionRefusedError):
        wait_until(refused, 5, "a connection")


def test_wait_until_describes_the_state_at_the_time_of_failure() -> None:
    state = {"seen": 1}

    def poll() -> bool:
        state["seen"] += 1
        return False

    with pytest.raises(WaitTimeout, match=r"waiting for 3 things \(saw \d+\)"):
        wait_until(poll, 0.05, lambda: f"3 things (saw {state['seen']})", interval=0.01)


def test_wait_until_async_awaits_a_coroutine_predicate() -> None:
    answers = iter([False, False, 7])

    async def ask() -> int:
        return next(answers)

    assert asyncio.run(wait_until_async(ask, 5, "seven", interval=0)) == 7
    with pytest.raises(WaitTimeout, match="waiting for never"):
        asyncio.run(wait_until_async(lambda: False, 0.05, "never", interval=0.01))


def test_collect_until_stops_when_enough_and_keeps_the_order() -> None:
    batches = iter([[1, 2], [], [3], [4, 5, 6], [7]])
    polls = []

    def poll() -> list[int]:
        polls.append(1)
        return next(batches)

    assert collect_until(poll, lambda got: len(got) >= 4, 5) == [1, 2, 3, 4, 5, 6]
    assert len(polls) == 4
    assert collect_until(poll, lambda got: True, 5) == []  # enough already: no poll at all
    assert len(polls) == 4


def test_collect_until_returns_a_shortfall_at_its_bound_without_raising() -> None:
    def poll() -> list[str]:
        time.sleep(0.01)
        return ["x"]

    started = time.monotonic()
    got = collect_until(poll, lambda got: len(got) >= 10**9, 0.1)
    assert 0.1 <= time.monotonic() - started < 5
    assert 1 <= len(got) and set(got) == {"x"}


def test_collect_until_async() -> None:
    batches = iter([["a"], ["b", "c"], ["d"]])

    async def poll() -> list[str]:
        return next(batches)

    assert asyncio.run(collect_until_async(poll, lambda got: len(got) >= 3, 5)) == ["a", "b", "c"]

    async def slow() -> list[str]:
        await asyncio.sleep(0.01)
        return []

    assert asyncio.run(collect_until_async(slow, lambda got: bool(got), 0.05)) == []
