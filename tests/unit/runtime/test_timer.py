"""AsyncioTimer: keyed deadlines on a real event loop (short deadlines are awaited, never slept through)."""

from __future__ import annotations

import asyncio

from herd.coordinator import Result
from herd.runtime import AsyncioTimer, WallClock


def _timer(fired: list[str], done: asyncio.Event, last: str) -> AsyncioTimer:
    def on_result(result: Result) -> None:
        fired.append(result.replies[0].handle)  # the operations below name themselves in a reply handle
        if fired[-1] == last:
            done.set()

    return AsyncioTimer(asyncio.get_running_loop(), WallClock(), on_result)


def _op(name: str):  # noqa: ANN202
    from herd.coordinator.result import Reply

    return lambda: Result(replies=(Reply(name, None),))


def test_operations_fire_in_deadline_order_and_their_results_are_handed_on():
    async def main() -> list[str]:
        fired: list[str] = []
        done = asyncio.Event()
        timer = _timer(fired, done, "late")
        now = WallClock().now_ms()
        timer.schedule("b", now + 20, _op("late"))
        timer.schedule("a", now + 1, _op("early"))
        assert timer.deadline("a") == now + 1 and len(timer) == 2
        await asyncio.wait_for(done.wait(), 5)
        assert len(timer) == 0
        return fired

    assert asyncio.run(main()) == ["early", "late"]


def test_scheduling_a_key_again_replaces_it_and_cancel_removes_it():
    async def main() -> list[str]:
        fired: list[str] = []
        done = asyncio.Event()
        timer = _timer(fired, done, "last")
        now = WallClock().now_ms()
        timer.schedule("k", now + 1, _op("replaced"))
        timer.schedule("k", now + 5, _op("replacement"))
        timer.schedule("gone", now + 1, _op("cancelled"))
        timer.cancel("gone")
        timer.cancel("never-scheduled")
        timer.schedule("z", now + 30, _op("last"))
        await asyncio.wait_for(done.wait(), 5)
        return fired

    assert asyncio.run(main()) == ["replacement", "last"]


def test_an_operation_may_schedule_its_own_key_again_and_cancel_all_stops_everything():
    async def main() -> list[str]:
        fired: list[str] = []
        done = asyncio.Event()
        timer = _timer(fired, done, "second")
        clock = WallClock()

        def first() -> Result:
            timer.schedule("k", clock.now_ms() + 1, _op("second"))
            return _op("first")()

        timer.schedule("k", clock.now_ms(), first)
        await asyncio.wait_for(done.wait(), 5)
        timer.schedule("x", clock.now_ms(), _op("never"))
        timer.schedule("y", clock.now_ms() + 1, _op("never"))
        timer.cancel_all()
        assert len(timer) == 0
        sentinel = asyncio.Event()  # a second timer firing after both deadlines proves they were dropped
        _timer(fired, sentinel, "sentinel").schedule("s", clock.now_ms() + 3, _op("sentinel"))
        await asyncio.wait_for(sentinel.wait(), 5)
        return fired

    assert asyncio.run(main()) == ["first", "second", "sentinel"]


def test_a_failing_operation_is_logged_and_the_timer_keeps_working(caplog):
    async def main() -> list[str]:
        fired: list[str] = []
        done = asyncio.Event()
        timer = _timer(fired, done, "after")
        now = WallClock().now_ms()
        timer.schedule("bad", now, lambda: 1 / 0)
        timer.schedule("good", now + 2, _op("after"))
        await asyncio.wait_for(done.wait(), 5)
        return fired

    assert asyncio.run(main()) == ["after"]
    assert "coordinator timer operation bad failed" in caplog.text
