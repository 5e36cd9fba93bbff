"""What every handler and timer operation returns.

`Result.records` are the `__consumer_offsets` records to append, in order. `Result.replies` are
responses for parked or immediate requests, keyed by the opaque handle the runtime passed in. The
runtime releases a Result's replies only when every record appended up to and including this Result
is durable (Kafka's deferred-event rule: a Result without records still waits for earlier writes).

If the append fails, the runtime must not send `replies`; it calls
`GroupCoordinatorShard.on_append_failed(result, error)` and handles the Result that returns instead
(error replies and, when Kafka does so, compensating state changes such as undoing a static member
replacement). `rollback` is the shard's private hook for that; the runtime never calls it directly.

`Result.marker` is a transaction marker to write (`complete_transaction`): the runtime appends it as a control
batch, replays it (`replay_end_transaction_marker`) and releases the replies once it is durable, in order with
every other write; a Result with a marker has no records.

`Result.transaction` is None for the coordinator's own writes. A TxnOffsetCommit sets it to (producer id,
producer epoch): the runtime then writes the records as one transactional batch of that producer and replays
each with its producer id and epoch, so they stay pending until the transaction's marker (txn_offsets.py). Results of
different producers cannot be merged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from herd.coordinator.errors import ErrorCode
from herd.coordinator.records import Record

Rollback = Callable[[ErrorCode], "Result"]


@dataclass(frozen=True, slots=True)
class Reply:
    handle: object
    response: object


class Marker(NamedTuple):
    """An end-transaction marker (Kafka's EndTransactionMarker in a control batch of the producer)."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int


@dataclass(frozen=True, slots=True)
class Result:
    records: tuple[Record, ...] = ()
    replies: tuple[Reply, ...] = ()
    rollback: Rollback | None = field(default=None, compare=False, repr=False)
    transaction: tuple[int, int] | None = None
    marker: Marker | None = None

    def __add__(self, other: Result) -> Result:
        return merge(self, other)


EMPTY = Result()


def merge(first: Result, second: Result) -> Result:
    if (first.marker or second.marker) and (first.records or second.records or (first.marker and second.marker)):
        raise ValueError("a transaction marker is a batch of its own")
    rollbacks = tuple(r for r in (first.rollback, second.rollback) if r is not None)
    transaction = first.transaction if first.records else second.transaction
    if first.records and second.records and first.transaction != second.transaction:
        raise ValueError("records of different transactions cannot share a batch")
    return Result(
        first.records + second.records,
        first.replies + second.replies,
        _undo_all(rollbacks) if rollbacks else None,
        transaction,
        first.marker or second.marker,
    )


def _undo_all(hooks: tuple[Rollback, ...]) -> Rollback:
    """One rollback running `hooks` last first (changes are undone in reverse order), their Results merged."""

    def rollback(error: ErrorCode) -> Result:
        out = EMPTY
        for hook in reversed(hooks):
            out = merge(out, hook(error))
        return out

    return rollback


class Effects:
    """Accumulates the records and replies of one handler call, then freezes them into a Result."""

    __slots__ = ("records", "replies", "rollbacks")

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.replies: list[Reply] = []
        self.rollbacks: list[Rollback] = []

    def reply(self, handle: object, response: object) -> None:
        self.replies.append(Reply(handle, response))

    def on_failure(self, hook: Rollback) -> None:
        self.rollbacks.append(hook)

    def result(self) -> Result:
        rollbacks = self.rollbacks
        return Result(tuple(self.records), tuple(self.replies), _undo_all(tuple(rollbacks)) if rollbacks else None)
