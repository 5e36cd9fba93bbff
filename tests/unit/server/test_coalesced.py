"""herd.server.coalesced: callers share runs of a computation and each gets a result computed after it asked."""

from __future__ import annotations

import asyncio

import pytest

from herd.server.coalesced import Coalesced


def test_callers_during_a_run_share_the_next_one_and_none_gets_an_older_result() -> None:
    async def main() -> None:
        shared: Coalesced[int] = Coalesced()
        runs: list[int] = []
        gate = asyncio.Event()

        async def compute() -> int:
            runs.append(len(runs))
            started = len(runs)
            await gate.wait()
            return started

        first = asyncio.ensure_future(shared.get(compute))
        await asyncio.sleep(0)
        later = [asyncio.ensure_future(shared.get(compute)) for _ in range(5)]  # arrive while the first runs
        await asyncio.sleep(0)
        assert len(runs) == 1
        gate.set()
        assert await first == 1
        assert await asyncio.gather(*later) == [2] * 5  # one more run for all five, begun after they asked
        assert len(runs) == 2
        assert await shared.get(compute) == 3  # nothing running: a run of its own

    asyncio.run(main())


def test_a_failure_reaches_its_callers_and_is_not_kept() -> None:
    async def main() -> None:
        shared: Coalesced[int] = Coalesced()

        async def fail() -> int:
            raise RuntimeError("the database is gone")

        async def ok() -> int:
            return 7

        with pytest.raises(RuntimeError):
            await shared.get(fail)
        assert await shared.get(ok) == 7

    asyncio.run(main())
