"""The shard runtime's state machine (herd.runtime.machine), driven by hand: no loop, no log, no clock but a
manual one. A small recording shard stands for the coordinator's (the asyncio shell's tests, test_runtime.py,
drive the real ones end to end; the simulator drives the group coordinator's through this same machine)."""

from __future__ import annotations

from herd.coordinator import ErrorCode, ManualClock, Record, Result
from herd.coordinator.result import Marker, Reply
from herd.runtime.batches import LoadedBatch, decode_batches, read_batches
from herd.runtime.machine import ShardMachine, ShardState, StateDiverged


class Shard:
    """Records every call; `on_append_failed` answers each reply with the error code (as both cores do)."""

    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []
        self.unloaded_replies: tuple[Reply, ...] = ()
        self.loaded_result = Result()

    def replay(self, record: Record, producer_id: int = -1, producer_epoch: int = -1) -> None:
        self.calls.append(("replay", record.key, producer_id, producer_epoch))

    def replay_loaded_batch(
        self, records: list[tuple[bytes, bytes | None]], producer_id: int = -1, producer_epoch: int = -1
    ) -> int:
        self.calls.append(("loaded-batch", [k for k, _ in records], producer_id))
        return 0

    def replay_end_transaction_marker(self, producer_id: int, commit: bool, producer_epoch: int = -1) -> None:
        self.calls.append(("marker", producer_id, commit, producer_epoch))

    def on_loaded(self) -> Result:
        self.calls.append(("on_loaded",))
        return self.loaded_result

    def on_unloaded(self) -> Result:
        self.calls.append(("on_unloaded",))
        return Result(replies=self.unloaded_replies)

    def on_append_failed(self, result: Result, error: ErrorCode) -> Result:
        self.calls.append(("append-failed", error))
        return Result(replies=tuple(Reply(r.handle, int(error)) for r in result.replies))


class Timers:
    def __init__(self) -> None:
        self.cancelled = 0

    def cancel_all(self) -> None:
        self.cancelled += 1


class Driver:
    """What a driver sees: released replies in order, writer starts, refusals, failures."""

    def __init__(self, active: bool = True) -> None:
        self.shard = Shard()
        self.timers = Timers()
        self.released: list[tuple[object, object]] = []
        self.starts = 0
        self.refuse_next = False
        self.failures: list[tuple[BaseException, int]] = []
        self.machine = ShardMachine(
            self.shard,
            clock=ManualClock(1000),
            timers=self.timers,
            release=lambda replies: self.released.extend((r.handle, r.response) for r in replies),
            start_writing=self._start,
            refuse=self._refuse,
            on_failed=lambda error, answered: self.failures.append((error, answered)),
        )
        if active:
            assert self.machine.loaded()

    def _start(self) -> None:
        self.starts += 1

    def _refuse(self, batch: bytes) -> bool:
        refused, self.refuse_next = self.refuse_next, False
        return refused


def writes(handle: str, *keys: bytes, applied: bool = False) -> Result:
    return Result(tuple(Record(k, b"v", applied) for k in keys), (Reply(handle, "ok"),))


def answer(handle: str) -> Result:
    return Result(replies=(Reply(handle, "ok"),))


def test_records_are_replayed_at_once_and_answered_when_durable() -> None:
    d = Driver()
    m = d.machine
    m.apply(writes("a", b"k1", b"k2"))
    assert d.shard.calls[-2:] == [("replay", b"k1", -1, -1), ("replay", b"k2", -1, -1)]
    assert (d.starts, m.pending, d.released) == (1, True, [])
    entries = m.begin_write()
    assert [k for e in entries for _, records in decode_batches(e.batch or b"") for k, _ in records] == [b"k1", b"k2"]
    m.written()
    m.writer_stopped()
    assert d.released == [("a", "ok")] and not m.pending


def test_a_result_without_records_never_overtakes_an_earlier_write() -> None:
    d = Driver()
    m = d.machine
    m.apply(answer("idle"))
    assert d.released == [("idle", "ok")]  # nothing pending: at once
    m.apply(writes("w", b"k"))
    m.apply(answer("behind"))
    assert d.released == [("idle", "ok")]
    assert len(m.begin_write()) == 2
    m.written()
    assert d.released == [("idle", "ok"), ("w", "ok"), ("behind", "ok")]


def test_group_commit_takes_everything_staged_and_one_writer_runs() -> None:
    d = Driver()
    m = d.machine
    m.apply(writes("a", b"1"))
    m.apply(writes("b", b"2"))
    assert d.starts == 1
    assert [e.result.replies[0].handle for e in m.begin_write()] == ["a", "b"]
    m.apply(writes("c", b"3"))  # staged while the write is in flight: the next write takes it
    assert d.starts == 1 and len(m.staged) == 1
    m.written()
    assert d.released == [("a", "ok"), ("b", "ok")]
    assert [e.result.replies[0].handle for e in m.begin_write()] == ["c"]
    m.written()
    m.writer_stopped()
    m.apply(writes("d", b"4"))
    assert d.starts == 2


def test_a_transactional_result_and_a_marker_are_batches_of_their_producer() -> None:
    d = Driver()
    m = d.machine
    m.apply(Result((Record(b"k", b"v"),), (Reply("t", "ok"),), transaction=(7, 2)))
    m.apply(Result(replies=(Reply("m", "ok"),), marker=Marker(7, 2, True, 0)))
    assert d.shard.calls[-2:] == [("replay", b"k", 7, 2), ("marker", 7, True, 2)]
    data = b"".join(e.batch or b"" for e in m.begin_write())
    batches = list(read_batches(_with_offsets(data)))
    assert [(b.producer_id, b.producer_epoch, b.marker) for b in batches] == [(7, 2, None), (7, 2, True)]


def _with_offsets(data: bytes) -> bytes:
    """Batches as the log stores them: consecutive base offsets (the encoder leaves them 0)."""
    out, position, offset = b"", 0, 0
    while position < len(data):
        size = int.from_bytes(data[position + 8 : position + 12]) + 12
        batch = data[position : position + size]
        count = int.from_bytes(batch[57:61])
        out += offset.to_bytes(8) + batch[8:]
        position, offset = position + size, offset + count
    return out


def test_a_refused_batch_is_rolled_back_and_never_replayed() -> None:
    d = Driver()
    m = d.machine
    d.refuse_next = True
    m.apply(writes("a", b"k"))
    assert ("replay", b"k", -1, -1) not in d.shard.calls
    assert d.shard.calls[-1] == ("append-failed", ErrorCode.message_too_large)
    assert d.released == [("a", int(ErrorCode.message_too_large))]
    assert m.state is ShardState.ACTIVE and not m.pending and d.starts == 0


def test_a_refused_batch_whose_change_nothing_undoes_fails_the_shard_but_the_write_in_flight_lands() -> None:
    d = Driver()
    m = d.machine
    d.shard.unloaded_replies = (Reply("parked", "not-coordinator"),)
    m.apply(writes("flying", b"1"))
    m.begin_write()
    m.apply(writes("staged", b"2"))
    d.refuse_next = True
    m.apply(writes("diverged", b"3", applied=True))  # live state changed, no rollback
    assert m.state is ShardState.FAILED
    [(error, answered)] = d.failures
    assert isinstance(error, StateDiverged) and answered == 2
    storage = int(ErrorCode.kafka_storage_error)
    # the refusal's answer had queued behind the staged write: both are answered with the storage error
    assert d.released == [("staged", storage), ("diverged", storage), ("parked", "not-coordinator")]
    assert d.timers.cancelled == 1
    m.written()  # the write that was in flight is durable: answered
    assert d.released[-1] == ("flying", "ok")
    m.apply(answer("late"))
    assert d.released[-1] == ("late", storage)  # a failed shard rejects


def test_a_failed_write_fails_the_shard_and_answers_everything_pending_with_errors() -> None:
    d = Driver()
    m = d.machine
    m.apply(writes("a", b"1"))
    m.begin_write()
    m.apply(writes("b", b"2"))
    m.apply(answer("c"))
    error = OSError("disk")
    m.write_failed(error)
    m.writer_stopped()
    storage = int(ErrorCode.kafka_storage_error)
    assert d.released == [("a", storage), ("b", storage), ("c", storage)]
    assert d.failures == [(error, 3)]
    assert d.shard.calls[-1] == ("on_unloaded",) and d.timers.cancelled == 1
    assert m.state is ShardState.FAILED and not m.pending
    assert m.unavailable_error() is ErrorCode.not_coordinator
    assert not m.unload()  # nothing left to unload


def test_a_write_that_fails_after_the_shard_failed_is_still_answered() -> None:
    d = Driver()
    m = d.machine
    m.apply(writes("flying", b"1"))
    m.begin_write()
    m.fail(OSError("compaction"))
    m.write_failed(OSError("disk"))
    assert d.released[-1] == ("flying", int(ErrorCode.kafka_storage_error))
    assert len(d.failures) == 1


def test_loading_replays_batches_then_goes_active() -> None:
    d = Driver(active=False)
    m = d.machine
    assert m.unavailable_error() is ErrorCode.coordinator_load_in_progress
    m.apply(answer("early"))
    assert d.released == [("early", int(ErrorCode.kafka_storage_error))]
    m.load_batch(LoadedBatch(1, [(b"k", b"v")], -1, -1, None))
    m.load_batch(LoadedBatch(2, [], 5, 1, False))
    d.shard.loaded_result = writes("timers", b"r")
    assert m.loaded()
    assert d.shard.calls[1:] == [
        ("loaded-batch", [b"k"], -1),
        ("marker", 5, False, 1),
        ("on_loaded",),
        ("replay", b"r", -1, -1),
    ]
    assert m.state is ShardState.ACTIVE and m.pending and m.unavailable_error() is None


def test_a_load_that_fails_tells_the_driver_only_when_a_reload_may_help() -> None:
    d = Driver(active=False)
    d.machine.load_failed(None)
    assert d.machine.state is ShardState.FAILED and d.failures == []
    d = Driver(active=False)
    error = OSError("disk")
    d.machine.load_failed(error)
    assert d.failures == [(error, 0)]


def test_unloading_lets_pending_writes_finish_then_answers_parked_requests() -> None:
    d = Driver()
    m = d.machine
    d.shard.unloaded_replies = (Reply("parked", "not-coordinator"),)
    m.apply(writes("a", b"1"))
    assert m.unload()
    assert m.state is ShardState.UNLOADING and d.timers.cancelled == 1
    assert m.unavailable_error() is ErrorCode.not_coordinator
    m.apply(writes("b", b"2"))  # a timer or completion already under way: still written
    assert len(m.begin_write()) == 2
    m.written()
    m.writer_stopped()
    m.unloaded()
    assert d.released == [("a", "ok"), ("b", "ok"), ("parked", "not-coordinator")]
    assert m.state is ShardState.UNLOADED and d.timers.cancelled == 2


def test_an_unload_while_loading_wins_over_the_load() -> None:
    d = Driver(active=False)
    m = d.machine
    assert m.unload()
    m.unloaded()
    assert not m.loaded()
    assert m.state is ShardState.UNLOADED and ("on_unloaded",) not in d.shard.calls
