"""Building kio response objects for whichever version a request came in.

Each version of a Kafka message is its own kio module with its own classes, and older versions lack fields that
newer ones have. Handlers describe an answer once, with the fields of the newest version, and `Builder` makes
the classes of the requested version from it: fields that version does not have are dropped (a name no version
has raises `UnknownName`: tests/unit/protocol/test_built_names.py finds them in the source), and plain Python
values are turned into the types kio's writer expects (error codes into `ErrorCode`, millisecond durations into
`timedelta`, millisecond timestamps into aware `datetime`). `Builder` is herd.protocol.values' `MessageBuilder`
(which the client's request builder is too) plus the response itself.
"""

from __future__ import annotations

from collections.abc import Awaitable
from functools import cache
from typing import Any

from herd.protocol.messages import response_class
from herd.protocol.values import MessageBuilder, make, ms


class Builder(MessageBuilder):
    """`b("MetadataResponseTopic", name=..., ...)` builds that class of the response's version (None when the
    version has no such class), `b.response(...)` the response itself."""

    __slots__ = ("response_cls",)

    def __init__(self, api_key: int, api_version: int) -> None:
        self.response_cls = response_class(api_key, api_version)
        super().__init__(self.response_cls)

    def response(self, **values: Any) -> Any:
        return make(self.response_cls, values)

    def has(self, name: str) -> bool:
        """Whether the response's version has class `name` (UnknownName if no version has)."""
        if hasattr(self.module, name):
            return True
        self.check_class(name)
        return False


@cache
def builder(api_key: int, api_version: int) -> Builder:
    return Builder(api_key, api_version)


def ctx_builder(ctx: Any) -> Builder:
    return builder(ctx.header.api_key, ctx.header.api_version)


__all__ = ["Builder", "builder", "ctx_builder", "make", "ms"]


class LaterAnswers:
    """Answers of a response that wait for the log (a remote log's database, or OffsetForLeaderEpoch's history):
    `add` keeps each one's place in its list of answers, and `respond(response)` is the response itself when none
    waits, else a coroutine of it that puts each answer in its place first."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending: list[tuple[list[Any], int, Awaitable[Any]]] = []

    def add(self, answers: list[Any], answer: Awaitable[Any]) -> None:
        self._pending.append((answers, len(answers), answer))
        answers.append(None)

    def respond(self, response: Any) -> Any:
        return self._filled(response) if self._pending else response

    async def _filled(self, response: Any) -> Any:
        for answers, position, answer in self._pending:
            answers[position] = await answer
        return response
