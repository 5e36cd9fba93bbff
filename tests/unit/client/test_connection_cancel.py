"""A request's caller cancelled in the very turn its answer arrives (herd.client.connection.BrokerConnection).

Python 3.11's asyncio.wait_for returned such an answer and dropped the cancellation, so a cancelled task ran on (a
test's poll loop never ended, ba76fd2); `_exchange` now bounds a request with asyncio.timeout, which keeps it. The
answer is put in the connection's pending future here, as its read loop does when the frame comes in.
"""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest

from herd.client.connection import BrokerConnection


class _Writer:
    def write(self, data: bytes) -> None:
        self.data = data

    def close(self) -> None:
        pass


def test_a_caller_cancelled_as_its_answer_arrives_is_cancelled() -> None:
    async def main() -> None:
        connection = BrokerConnection("127.0.0.1", 9, "test")
        connection._writer = _Writer()  # type: ignore[assignment]
        for _ in range(50):
            task = asyncio.get_running_loop().create_task(
                connection._exchange(18, 0, ApiVersionsRequest(), lambda frame: "answer")
            )
            await asyncio.sleep(0)  # the request is written, its future pending
            pending = connection._pending.popleft()
            pending.future.set_result("answer")  # what the read loop does with the frame
            task.cancel()  # in the same turn: the task has not run since
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(main())
