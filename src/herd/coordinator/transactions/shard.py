"""`TransactionCoordinatorShard`: the pure transaction coordinator of one `__transaction_state` partition.

The decisions are Kafka's (apache/kafka core/src/main/scala/kafka/coordinator/transaction/
TransactionCoordinator.scala: handleInitProducerId, prepareInitProducerIdTransit, handleAddPartitionsToTransaction,
handleVerifyPartitionsInTransaction, endTransaction, abortTimedOutTransactions; TransactionStateManager.scala:
timedOutTransactions, removeExpiredTransactionalIds, loadTransactionsForTxnTopicPartition), for transaction
version 0/1 clients (herd finalizes no transaction.version, so no client bumps the epoch on every transaction,
KIP-890 part 2).

How the runtime drives it (as `GroupCoordinatorShard`, herd.coordinator.shard):
- Requests: `init_producer_id(req, reply)`, `add_partitions(req, reply)` (AddPartitionsToTxn, AddOffsetsToTxn,
  and `verify_only` checks), `end_txn(req, reply)`, `describe_transaction(id, reply)`, `list_transactions(req,
  reply)`. Each returns a `Result`: the records to append (applied:
  live state already holds them) and the replies to release once they are durable.
- Markers: a Result may carry `Reply(WriteMarkers(...), None)`; once released the runtime writes the markers and
  calls `markers_written(job)`, whose Result holds the CompleteCommit/CompleteAbort record.
- Timers: every abort interval, Ongoing transactions older than their timeout are aborted with a bumped epoch
  (the producer is fenced); every expiration interval, ids idle for transactional.id.expiration.ms in Empty,
  CompleteCommit or CompleteAbort are forgotten (a tombstone).
- Load: `replay_loaded(key, value)` for every record, then `on_loaded()`, which arms the timers and asks for the
  markers of every transaction found in PrepareCommit/PrepareAbort (its completion was cut short). Unload:
  `on_unloaded()`.
- A failed append: `on_append_failed(result, error)` undoes the live changes of `result` and answers its replies
  with Kafka's mapping of the append error (TransactionStateManager.appendTransactionToLog); its markers are not
  written.

Where herd differs: Kafka throws IllegalStateException (UNKNOWN_SERVER_ERROR) when a KIP-360 retry names the
previous epoch of an id whose epoch is exhausted; herd answers it like any retry (no epoch bump is needed). Kafka
remembers a fence whose write failed (hasFailedEpochFence) so as not to bump twice; herd undoes the bump instead,
which gives the same epochs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from herd.coordinator.errors import ErrorCode, append_error_to_response_error
from herd.coordinator.records import Record
from herd.coordinator.result import Effects, Reply, Result
from herd.coordinator.timer import Clock, Timer
from herd.coordinator.transactions.config import TxnConfig
from herd.coordinator.transactions.messages import (
    AddPartitions,
    EndTxn,
    InitProducerId,
    ListTransactions,
    PartitionErrors,
    ProducerIdAndEpoch,
    TxnDescription,
    TxnListing,
    WriteMarkers,
)
from herd.coordinator.transactions.metadata import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    TransactionMetadata,
    epoch_exhausted,
)
from herd.coordinator.transactions.records import decode_key, decode_value, txn_record
from herd.coordinator.transactions.state import TxnState

log = logging.getLogger(__name__)

ABORT_TIMER = "txn-abort-timed-out"
EXPIRE_TIMER = "txn-expire-ids"

_S = TxnState
R = TypeVar("R")
_COMPLETED = (_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT)


class _Refused(Exception):
    def __init__(self, code: ErrorCode) -> None:
        self.code = code


class TransactionCoordinatorShard:
    def __init__(
        self,
        *,
        clock: Clock,
        timer: Timer,
        new_producer_id: Callable[[], int],
        config: TxnConfig | None = None,
        coordinator_epoch: int = 0,
    ) -> None:
        self._clock = clock
        self._timer = timer
        self._new_producer_id = new_producer_id
        self.config = config or TxnConfig()
        self.coordinator_epoch = coordinator_epoch
        self._txns: dict[str, TransactionMetadata] = {}

    # --- InitProducerId -------------------------------------------------------------------------

    def init_producer_id(self, req: InitProducerId, reply: object) -> Result:
        """Kafka's handleInitProducerId for a transactional id (the API module answers idempotent producers)."""
        return _answered(self._init_producer_id, req, reply, ProducerIdAndEpoch)

    def _init_producer_id(self, req: InitProducerId, reply: object, fx: Effects) -> None:
        if not req.transactional_id:
            raise _Refused(ErrorCode.invalid_request)
        if (req.producer_id == -1) != (req.producer_epoch == -1):
            raise _Refused(ErrorCode.invalid_request)  # KafkaApis.handleInitProducerIdRequest
        if not 0 < req.timeout_ms <= self.config.transaction_max_timeout_ms:
            raise _Refused(ErrorCode.invalid_transaction_timeout)
        md = self._txns.get(req.transactional_id)
        if md is None:
            md = TransactionMetadata(
                req.transactional_id, self._new_producer_id(), NO_PRODUCER_EPOCH, req.timeout_ms, _S.EMPTY, self._now()
            )
            self._txns[md.transactional_id] = md
            fx.on_failure(self._forget_on_failure(md.transactional_id))
        expected = (req.producer_id, req.producer_epoch) if req.producer_id >= 0 else None
        if expected is not None and not self._valid_expected_producer(md, *expected):
            raise _Refused(ErrorCode.producer_fenced)
        if md.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            raise _Refused(ErrorCode.concurrent_transactions)
        if md.state is _S.ONGOING:
            # Fence the producer and abort its transaction; the client retries (and then gets a bumped epoch).
            self._fence_and_abort(md, fx)
            fx.reply(reply, ProducerIdAndEpoch(ErrorCode.concurrent_transactions))
            return
        before = md.copy()
        if epoch_exhausted(md.producer_epoch) and (expected is None or expected[1] == md.producer_epoch):
            md.transition(
                _S.EMPTY,
                self._now(),
                producer_id=self._new_producer_id(),
                producer_epoch=0,
                last_producer_epoch=md.producer_epoch if expected is not None else NO_PRODUCER_EPOCH,
                previous_producer_id=md.producer_id,
                timeout_ms=req.timeout_ms,
                partitions=frozenset(),
                start_ms=-1,
            )
        else:
            epoch, last = self._bumped_epochs(md, None if expected is None else expected[1])
            md.transition(
                _S.EMPTY,
                self._now(),
                producer_epoch=epoch,
                last_producer_epoch=last,
                previous_producer_id=md.producer_id,
                timeout_ms=req.timeout_ms,
                partitions=frozenset(),
                start_ms=-1,
            )
        self._write(md, fx, before)
        log.info(
            "initialized transactional id %s with producer id %d and epoch %d",
            md.transactional_id,
            md.producer_id,
            md.producer_epoch,
        )
        fx.reply(reply, ProducerIdAndEpoch(ErrorCode.none, md.producer_id, md.producer_epoch))

    @staticmethod
    def _valid_expected_producer(md: TransactionMetadata, producer_id: int, epoch: int) -> bool:
        """prepareInitProducerIdTransit's isValidProducerId: a new id (epoch -1, recovering from
        UNKNOWN_PRODUCER_ID), the current producer id, or the previous one with an exhausted epoch (a retry of a
        rotation whose answer was lost)."""
        return (
            md.producer_epoch == NO_PRODUCER_EPOCH
            or producer_id == md.producer_id
            or (producer_id == md.previous_producer_id and epoch_exhausted(epoch))
        )

    @staticmethod
    def _bumped_epochs(md: TransactionMetadata, expected_epoch: int | None) -> tuple[int, int]:
        """prepareIncrementProducerEpoch: (new epoch, last epoch); raises _Refused(PRODUCER_FENCED)."""
        if expected_epoch is None:
            return md.producer_epoch + 1, NO_PRODUCER_EPOCH
        if md.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == md.producer_epoch:
            return md.producer_epoch + 1, md.producer_epoch
        if expected_epoch == md.last_producer_epoch:
            return md.producer_epoch, md.last_producer_epoch  # a retry of a bump whose answer was lost
        log.info(
            "transactional id %s: expected epoch %d is neither the current %d nor the previous %d",
            md.transactional_id,
            expected_epoch,
            md.producer_epoch,
            md.last_producer_epoch,
        )
        raise _Refused(ErrorCode.producer_fenced)

    # --- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------------

    def add_partitions(self, req: AddPartitions, reply: object) -> Result:
        """handleAddPartitionsToTransaction, or handleVerifyPartitionsInTransaction with `verify_only`."""
        return _answered(
            self._verify if req.verify_only else self._add_partitions,
            req,
            reply,
            lambda code: PartitionErrors.all(req.partitions, code),
        )

    def _producer(self, transactional_id: str, producer_id: int, producer_epoch: int) -> TransactionMetadata:
        """The id's metadata if the producer is its current one; raises _Refused(INVALID_REQUEST,
        INVALID_PRODUCER_ID_MAPPING or PRODUCER_FENCED)."""
        if not transactional_id:
            raise _Refused(ErrorCode.invalid_request)
        md = self._txns.get(transactional_id)
        if md is None or md.producer_id != producer_id:
            raise _Refused(ErrorCode.invalid_producer_id_mapping)
        if md.producer_epoch != producer_epoch:
            raise _Refused(ErrorCode.producer_fenced)
        return md

    def _verify(self, req: AddPartitions, reply: object, fx: Effects) -> None:
        md = self._producer(req.transactional_id, req.producer_id, req.producer_epoch)
        if md.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            raise _Refused(ErrorCode.concurrent_transactions)
        fx.reply(
            reply,
            PartitionErrors(
                {
                    tp: ErrorCode.none if tp in md.partitions else ErrorCode.transaction_abortable
                    for tp in req.partitions
                }
            ),
        )

    def _add_partitions(self, req: AddPartitions, reply: object, fx: Effects) -> None:
        md = self._producer(req.transactional_id, req.producer_id, req.producer_epoch)
        if md.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            raise _Refused(ErrorCode.concurrent_transactions)
        if md.state is _S.ONGOING and req.partitions <= md.partitions:
            raise _Refused(ErrorCode.none)  # already in the transaction: nothing to write
        before = md.copy()
        now = self._now()
        start = now if md.state in _COMPLETED else md.start_ms
        md.transition(_S.ONGOING, now, partitions=md.partitions | req.partitions, start_ms=start)
        self._write(md, fx, before)
        fx.reply(reply, PartitionErrors.all(req.partitions, ErrorCode.none))

    # --- EndTxn ---------------------------------------------------------------------------------

    def end_txn(self, req: EndTxn, reply: object) -> Result:
        """handleEndTransaction from a client (transaction version 0/1: the epoch must be the current one)."""
        return _answered(self._end_txn, req, reply, ProducerIdAndEpoch)

    def _end_txn(self, req: EndTxn, reply: object, fx: Effects) -> None:
        md = self._producer(req.transactional_id, req.producer_id, req.producer_epoch)
        state = md.state
        if state is _S.ONGOING:
            self._prepare_end(md, req.commit, fx)
            fx.reply(reply, ProducerIdAndEpoch(ErrorCode.none, md.producer_id, md.producer_epoch))
            return
        done = _S.COMPLETE_COMMIT if req.commit else _S.COMPLETE_ABORT
        preparing = _S.PREPARE_COMMIT if req.commit else _S.PREPARE_ABORT
        if state is done:  # a retry of an EndTxn that completed
            fx.reply(reply, ProducerIdAndEpoch(ErrorCode.none, md.producer_id, md.producer_epoch))
        elif state is preparing:  # a retry while the markers are being written
            raise _Refused(ErrorCode.concurrent_transactions)
        else:  # Empty, or the opposite outcome
            log.debug(
                "transactional id %s is %s: refusing EndTxn(%s)",
                md.transactional_id,
                state.kafka_name,
                "commit" if req.commit else "abort",
            )
            raise _Refused(ErrorCode.invalid_txn_state)

    def _prepare_end(
        self, md: TransactionMetadata, commit: bool, fx: Effects, *, before: TransactionMetadata | None = None
    ) -> None:
        """Ongoing -> PrepareCommit/PrepareAbort, written; its markers are written once it is durable."""
        before = before or md.copy()
        md.transition(_S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT, self._now())
        self._write(md, fx, before)
        fx.reply(self._markers(md, commit), None)

    def _fence_and_abort(self, md: TransactionMetadata, fx: Effects) -> None:
        """prepareFenceProducerEpoch then endTransaction(ABORT, isFromClient=false): the epoch is bumped (fencing
        the producer that holds it) and the transaction aborted under the new epoch."""
        if md.producer_epoch >= MAX_EPOCH:
            raise _Refused(ErrorCode.unknown_server_error)  # Kafka: IllegalStateException, cannot overflow
        before = md.copy()
        md.transition(
            _S.PREPARE_EPOCH_FENCE,
            self._now(),
            producer_epoch=md.producer_epoch + 1,
            last_producer_epoch=NO_PRODUCER_EPOCH,
        )
        self._prepare_end(md, False, fx, before=before)

    def _markers(self, md: TransactionMetadata, commit: bool) -> WriteMarkers:
        return WriteMarkers(
            md.transactional_id, md.producer_id, md.producer_epoch, commit, self.coordinator_epoch, md.partitions
        )

    # --- markers written ------------------------------------------------------------------------

    def markers_written(self, job: WriteMarkers) -> Result:
        """Every marker of `job` is written: PrepareCommit/PrepareAbort -> CompleteCommit/CompleteAbort (Kafka's
        prepareComplete once TransactionMarkerChannelManager has every partition's answer). A job that no longer
        matches the transaction (the shard was reloaded meanwhile) changes nothing."""
        md = self._txns.get(job.transactional_id)
        preparing = _S.PREPARE_COMMIT if job.commit else _S.PREPARE_ABORT
        if (
            md is None
            or md.state is not preparing
            or md.producer_id != job.producer_id
            or md.producer_epoch != job.producer_epoch
            or job.coordinator_epoch != self.coordinator_epoch
        ):
            log.info("markers of transactional id %s written, but it has moved on: %s", job.transactional_id, md)
            return Result()
        fx = Effects()
        before = md.copy()
        md.transition(_S.COMPLETE_COMMIT if job.commit else _S.COMPLETE_ABORT, self._now(), partitions=frozenset())
        self._write(md, fx, before)
        return fx.result()

    # --- timers ---------------------------------------------------------------------------------

    def abort_timed_out(self) -> Result:
        """abortTimedOutTransactions: every Ongoing transaction open longer than its timeout is aborted under a
        bumped epoch, which fences its producer. Re-arms itself."""
        now = self._now()
        fx = Effects()
        for md in list(self._txns.values()):
            if md.state is _S.ONGOING and md.start_ms + md.timeout_ms < now:
                log.info(
                    "aborting the transaction of %s (producer id %d, epoch %d): open for %d ms, longer than its "
                    "timeout of %d ms",
                    md.transactional_id,
                    md.producer_id,
                    md.producer_epoch,
                    now - md.start_ms,
                    md.timeout_ms,
                )
                try:
                    self._fence_and_abort(md, fx)
                except _Refused:
                    log.error("cannot abort the transaction of %s: its epoch is exhausted", md.transactional_id)
        self._timer.schedule(ABORT_TIMER, now + self.config.abort_timed_out_interval_ms, self.abort_timed_out)
        return fx.result()

    def expire_transactional_ids(self) -> Result:
        """removeExpiredTransactionalIds: ids idle for transactional.id.expiration.ms with no transaction open
        are forgotten, and a tombstone written for each. Re-arms itself."""
        now = self._now()
        fx = Effects()
        horizon = now - self.config.transactional_id_expiration_ms
        for md in list(self._txns.values()):
            if md.state.expiration_allowed and md.last_update_ms <= horizon:  # the states Dead may follow
                del self._txns[md.transactional_id]
                fx.records.append(txn_record(md.transactional_id, None))
                fx.on_failure(self._restore_on_failure(md))
                log.info("transactional id %s expired (idle since %d)", md.transactional_id, md.last_update_ms)
        self._timer.schedule(EXPIRE_TIMER, now + self.config.remove_expired_interval_ms, self.expire_transactional_ids)
        return fx.result()

    # --- writes and failures --------------------------------------------------------------------

    def _write(self, md: TransactionMetadata, fx: Effects, before: TransactionMetadata) -> None:
        fx.records.append(txn_record(md.transactional_id, md.value()))
        fx.on_failure(self._restore_on_failure(before))

    def _restore_on_failure(self, before: TransactionMetadata) -> Callable[[ErrorCode], Result]:
        def restore(_: ErrorCode) -> Result:
            self._txns[before.transactional_id] = before
            return Result()

        return restore

    def _forget_on_failure(self, transactional_id: str) -> Callable[[ErrorCode], Result]:
        """Undo the creation of an id (rollbacks run last first, so this runs after the restore of its state)."""

        def forget(_: ErrorCode) -> Result:
            self._txns.pop(transactional_id, None)
            return Result()

        return forget

    def on_append_failed(self, result: Result, error: ErrorCode) -> Result:
        """The records of `result` could not be appended: live state goes back to what it was, every request
        answered in `result` gets the mapped error (appendTransactionToLog's mapping), its markers are dropped."""
        out = result.rollback(error) if result.rollback is not None else Result()
        mapped = append_error_to_response_error(error)
        replies = tuple(
            Reply(r.handle, _error_like(r.response, mapped))
            for r in result.replies
            if not isinstance(r.handle, WriteMarkers)
        )
        return Result(out.records, out.replies + replies)

    # --- replay and load ------------------------------------------------------------------------

    def replay(self, record: Record, producer_id: int = -1, producer_epoch: int = -1) -> None:
        """Apply one record. Records live state already reflects (`applied`) are skipped. (The producer of a
        transactional batch: the runtime's contract, which the group coordinator's offsets use; never set here.)"""
        if not record.applied:
            self.replay_loaded(record.key, record.value)

    def replay_loaded(self, key: bytes, value: bytes | None) -> None:
        """Apply one record read back from the log: the id's whole state, or its removal (a tombstone). Raises
        ValueError for a record that cannot be decoded."""
        transactional_id = decode_key(key)
        if value is None:
            self._txns.pop(transactional_id, None)
            return
        self._txns[transactional_id] = TransactionMetadata.from_value(transactional_id, decode_value(value))

    def replay_end_transaction_marker(self, producer_id: int, commit: bool, producer_epoch: int = -1) -> None:
        """The runtime's loader hands control batches over; `__transaction_state` never holds any (only the
        coordinator writes it, without transactions), so one found there is skipped."""
        log.warning("skipping a transaction marker of producer %d in __transaction_state", producer_id)

    def replay_loaded_batch(
        self, records: list[tuple[bytes, bytes | None]], producer_id: int = -1, producer_epoch: int = -1
    ) -> int:
        """`replay_loaded` for each record of one batch; one that cannot be decoded is skipped with a warning
        (Kafka's loader skips unknown key versions). Returns how many were skipped."""
        skipped = 0
        for key, value in records:
            try:
                self.replay_loaded(key, value)
            except ValueError as error:
                log.warning("skipping an undecodable __transaction_state record: %s", error)
                skipped += 1
        return skipped

    def on_loaded(self) -> Result:
        """After replaying the partition: arm the timers, and write the markers of every transaction left in
        PrepareCommit or PrepareAbort (loadTransactionsForTxnTopicPartition)."""
        now = self._now()
        self._timer.schedule(ABORT_TIMER, now + self.config.abort_timed_out_interval_ms, self.abort_timed_out)
        self._timer.schedule(EXPIRE_TIMER, now + self.config.remove_expired_interval_ms, self.expire_transactional_ids)
        fx = Effects()
        for md in self._txns.values():
            if md.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
                log.info(
                    "completing the %s of transactional id %s after loading", md.state.kafka_name, md.transactional_id
                )
                fx.reply(self._markers(md, md.state is _S.PREPARE_COMMIT), None)
        return fx.result()

    def on_unloaded(self) -> Result:
        """The partition moved away: forget its transactions (markers under way complete nothing any more)."""
        self._timer.cancel(ABORT_TIMER)
        self._timer.cancel(EXPIRE_TIMER)
        self._txns.clear()
        return Result()

    # --- DescribeTransactions and ListTransactions ----------------------------------------------

    def describe_transaction(self, transactional_id: str, reply: object) -> Result:
        """handleDescribeTransactions for one id of this partition: TRANSACTIONAL_ID_NOT_FOUND if unknown."""
        md = self._txns.get(transactional_id)
        if not transactional_id:
            answer = TxnDescription(ErrorCode.invalid_request, transactional_id)
        elif md is None:
            answer = TxnDescription(ErrorCode.transactional_id_not_found, transactional_id)
        else:
            answer = TxnDescription(
                ErrorCode.none,
                transactional_id,
                md.state.kafka_name,
                md.timeout_ms,
                md.start_ms,
                md.producer_id,
                md.producer_epoch,
                md.partitions,
            )
        return Result(replies=(Reply(reply, answer),))

    def list_transactions(self, req: ListTransactions, reply: object) -> Result:
        """TransactionStateManager.listTransactionStates over this partition: the ids whose state, producer id
        and running time pass the filters, as (id, producer id, state name)."""
        now = self._now()
        listed = tuple(
            TxnListing(md.transactional_id, md.producer_id, md.state.kafka_name)
            for md in self._txns.values()
            if (not req.producer_ids or md.producer_id in req.producer_ids)
            and (not req.states or md.state.kafka_name in req.states)
            and not (req.duration_ms >= 0 and now - md.start_ms <= req.duration_ms)
        )
        return Result(replies=(Reply(reply, listed),))

    # --- inspection -----------------------------------------------------------------------------

    def transaction(self, transactional_id: str) -> TransactionMetadata | None:
        return self._txns.get(transactional_id)

    def size(self) -> int:
        return len(self._txns)

    def _now(self) -> int:
        return self._clock.now_ms()


def _answered(
    handle: Callable[[R, object, Effects], None], req: R, reply: object, refusal: Callable[[ErrorCode], object]
) -> Result:
    """`handle(req, reply, fx)`'s Result, or the reply `refusal(code)` when it refused the request (`_Refused`)."""
    fx = Effects()
    try:
        handle(req, reply, fx)
    except _Refused as refused:
        fx.reply(reply, refusal(refused.code))
    return fx.result()


def _error_like(response: object, error: ErrorCode) -> object:
    if isinstance(response, PartitionErrors):
        return PartitionErrors.all(frozenset(response.errors), error)
    return ProducerIdAndEpoch(error)
