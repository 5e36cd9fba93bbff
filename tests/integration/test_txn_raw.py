"""The transaction coordinator over a real socket, through a raw kio client and real clients (confluent-kafka,
aiokafka), on one in-process embedded broker: the API versions it advertises, a transaction from FindCoordinator to
its completion, the coordinator's state surviving a restart, a zombie producer fenced, and (once the data path's
`append_control` and the group coordinator's `complete_transaction` are merged: helpers A and C of issue 17)
commits whose markers land in a data partition and in `__consumer_offsets`. Every version of each API is covered
without sockets in tests/unit/server/test_txn_apis.py."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from batches import idempotent_batch
from inprocess import InProcessBroker
from kio.schema.errors import ErrorCode
from rawkafka import RawClient, part, req

from herd.log.batch import CONTROL_BIT, parse_header
from herd.runtime.transactions import Marker
from herd.server.transactions import MarkerSender
from herd.testing.wait import wait_until

PRODUCE, FETCH, API_VERSIONS, FIND, INIT, ADD_PARTITIONS, ADD_OFFSETS, END, CREATE, DELETE = (
    0,
    1,
    18,
    10,
    22,
    24,
    25,
    26,
    19,
    20,
)
OK = ErrorCode.none


def start(data_dir: str) -> InProcessBroker:
    broker = InProcessBroker(
        {
            "log.dirs": data_dir,
            "transaction.state.log.num.partitions": "3",
            "offsets.topic.num.partitions": "3",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "100",
        }
    )
    with RawClient(broker.port) as c:  # the first lookup of a transactional id makes __transaction_state
        r = c.request(FIND, 3, req(FIND, 3, key="any", key_type=1))
        assert r.error_code in (ErrorCode.coordinator_not_available, OK)
    broker.run(broker.server.broker.transactions.wait_loaded())
    return broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    b = start(str(tmp_path_factory.mktemp("txn-raw")))
    yield b
    b.stop()


def create(c: RawClient, topic: str) -> None:
    t = part(
        CREATE, 7, "CreatableTopic", name=topic, num_partitions=1, replication_factor=1, assignments=(), configs=()
    )
    r = c.request(CREATE, 7, req(CREATE, 7, topics=(t,), timeout=5000, validate_only=False))
    assert r.topics[0].error_code == OK


def init(c: RawClient, tid: str, **kw: Any) -> Any:
    return c.request(INIT, 5, req(INIT, 5, transactional_id=tid, transaction_timeout=60_000, **kw))


def add(c: RawClient, tid: str, p: Any, topic: str) -> Any:
    t = part(ADD_PARTITIONS, 3, "AddPartitionsToTxnTopic", name=topic, partitions=(0,))
    return c.request(
        ADD_PARTITIONS,
        3,
        req(
            ADD_PARTITIONS,
            3,
            v3_and_below_transactional_id=tid,
            v3_and_below_producer_id=p.producer_id,
            v3_and_below_producer_epoch=p.producer_epoch,
            v3_and_below_topics=(t,),
        ),
    )


def end(c: RawClient, tid: str, p: Any, commit: bool) -> Any:
    return c.request(
        END,
        4,
        req(END, 4, transactional_id=tid, producer_id=p.producer_id, producer_epoch=p.producer_epoch, committed=commit),
    )


def completed(c: RawClient, tid: str, timeout: float = 5.0) -> Any:
    """InitProducerId, retried while the transaction is being completed (CONCURRENT_TRANSACTIONS)."""
    # not a wait_until: the last answer is returned at the bound, for the caller to assert on
    deadline = time.monotonic() + timeout
    while True:
        r = init(c, tid)
        if r.error_code != ErrorCode.concurrent_transactions or time.monotonic() > deadline:
            return r
        time.sleep(0.02)


def test_the_transaction_apis_are_advertised(broker: InProcessBroker) -> None:
    with RawClient(broker.port) as c:
        r = c.request(API_VERSIONS, 3, req(API_VERSIONS, 3, client_software_name="raw", client_software_version="1"))
        ranges = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
        assert [ranges[k] for k in (FIND, INIT, ADD_PARTITIONS, ADD_OFFSETS, END)] == [
            (0, 6),
            (0, 5),
            (0, 5),
            (0, 4),
            (0, 4),
        ]
        assert [ranges[k] for k in (27, 65, 66)] == [(1, 1), (0, 0), (0, 1)]  # WriteTxnMarkers, Describe/List


def test_a_transaction_whose_partition_was_deleted_completes(broker: InProcessBroker) -> None:
    with RawClient(broker.port) as c:
        found = c.request(FIND, 3, req(FIND, 3, key="tx-a", key_type=1))
        assert (found.error_code, found.port) == (OK, broker.port)
        create(c, "gone")
        p = init(c, "tx-a")
        assert (p.error_code, p.producer_epoch) == (OK, 0)
        assert (
            add(c, "tx-a", p, "gone").results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
            == OK
        )
        assert c.request(DELETE, 4, req(DELETE, 4, topic_names=("gone",), timeout=5000)).responses[0].error_code == OK
        assert end(c, "tx-a", p, commit=False).error_code == OK
        again = completed(c, "tx-a")  # its marker was skipped and the transaction completed
        assert (again.error_code, again.producer_id, again.producer_epoch) == (OK, p.producer_id, 1)
        assert end(c, "tx-a", p, commit=True).error_code == ErrorCode.producer_fenced


def test_the_coordinators_state_survives_a_restart(tmp_path: Any) -> None:
    first = start(str(tmp_path))
    try:
        with RawClient(first.port) as c:
            p = init(c, "tx-r")
            assert init(c, "tx-r").producer_epoch == 1
    finally:
        first.stop()
    second = start(str(tmp_path))
    try:
        with RawClient(second.port) as c:
            r = init(c, "tx-r")
            assert (r.error_code, r.producer_id, r.producer_epoch) == (OK, p.producer_id, 2)
    finally:
        second.stop()


def last_batch_attributes(c: RawClient, topic: str) -> int:
    t = part(
        FETCH,
        4,
        "FetchTopic",
        topic=topic,
        partitions=(part(FETCH, 4, "FetchPartition", partition=0, fetch_offset=0, partition_max_bytes=1 << 20),),
    )
    r = c.request(
        FETCH,
        4,
        req(FETCH, 4, replica_id=-1, max_wait=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, topics=(t,)),
    )
    data = r.responses[0].partitions[0].records
    position, last = 0, None
    while position < len(data):
        header = parse_header(data, position)
        last, position = header, header.end
    assert last is not None
    return last.attributes


def test_a_commit_writes_a_marker_into_its_data_partition(broker: InProcessBroker) -> None:
    with RawClient(broker.port) as c:
        create(c, "out")
        p = init(c, "tx-d")
        add(c, "tx-d", p, "out")
        assert end(c, "tx-d", p, commit=True).error_code == OK
        assert completed(c, "tx-d").error_code == OK
        assert last_batch_attributes(c, "out") & CONTROL_BIT


def test_a_commit_with_offsets_completes_through_the_group_coordinator(broker: InProcessBroker) -> None:
    with RawClient(broker.port) as c:
        p = init(c, "tx-o")
        r = c.request(
            ADD_OFFSETS,
            4,
            req(
                ADD_OFFSETS,
                4,
                transactional_id="tx-o",
                producer_id=p.producer_id,
                producer_epoch=p.producer_epoch,
                group_id="grp",
            ),
        )
        assert r.error_code == OK
        assert end(c, "tx-o", p, commit=True).error_code == OK
        assert completed(c, "tx-o").error_code == OK


def test_write_txn_markers_from_another_nodes_coordinator(broker: InProcessBroker) -> None:
    """What a cluster node's coordinator sends for a partition this node leads (server/transactions.py)."""
    sender = MarkerSender(broker.server.broker)
    code = broker.run(sender._ask("127.0.0.1", broker.port, ("no-such-topic", 0), Marker(7, 0, True, 0)))
    assert code == ErrorCode.unknown_topic_or_partition


def test_confluent_kafka_zombie_is_fenced(broker: InProcessBroker) -> None:
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    group = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "fence-g"})
    zombie = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "ck-fence"})
    zombie.init_transactions(10)
    successor = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "ck-fence"})
    successor.init_transactions(10)
    zombie.begin_transaction()
    with pytest.raises(KafkaException) as e:  # AddOffsetsToTxn with the old epoch: PRODUCER_FENCED
        zombie.send_offsets_to_transaction([TopicPartition("in", 0, 5)], group.consumer_group_metadata(), 5)
    assert e.value.args[0].fatal() and e.value.args[0].name() == "_FENCED"
    md = broker.server.broker.transactions.shard_for("ck-fence").shard.transaction("ck-fence")
    assert md.producer_epoch == 1
    group.close()


def test_aiokafka_zombie_is_fenced(broker: InProcessBroker) -> None:
    import asyncio

    from aiokafka import AIOKafkaProducer, TopicPartition
    from aiokafka.errors import ProducerFenced

    async def main() -> None:
        zombie = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="aio-fence")
        await zombie.start()
        successor = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="aio-fence")
        await successor.start()
        assert successor._txn_manager.producer_epoch == zombie._txn_manager.producer_epoch + 1
        with pytest.raises(ProducerFenced):
            async with zombie.transaction():
                await zombie.send_offsets_to_transaction({TopicPartition("in", 0): 5}, "aio-g")
        await successor.stop()
        try:
            await zombie.stop()
        except ProducerFenced:
            pass

    asyncio.run(asyncio.wait_for(main(), 30))


def test_a_producer_gone_mid_transaction_is_aborted_after_its_timeout(broker: InProcessBroker) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    with RawClient(broker.port) as c:
        create(c, "gone-in")
    group = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "gone-g"})
    gone = Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": "ck-gone", "transaction.timeout.ms": 1000}
    )
    gone.init_transactions(10)
    gone.begin_transaction()
    gone.send_offsets_to_transaction([TopicPartition("gone-in", 0, 5)], group.consumer_group_metadata(), 5)
    shard = broker.server.broker.transactions.shard_for("ck-gone").shard
    assert shard.transaction("ck-gone").state.kafka_name == "Ongoing"
    wait_until(
        lambda: shard.transaction("ck-gone").state.kafka_name == "CompleteAbort",
        5,
        "ck-gone's transaction to be aborted (CompleteAbort)",
        interval=0.05,
    )
    md = shard.transaction("ck-gone")
    assert (md.state.kafka_name, md.producer_epoch) == ("CompleteAbort", 1)  # aborted under a bumped epoch
    group.close()


def produce_txn(c: RawClient, tid: str, p: Any, topic: str, sequence: int) -> Any:
    data = part(
        PRODUCE,
        9,
        "PartitionProduceData",
        index=0,
        records=idempotent_batch(p.producer_id, p.producer_epoch, sequence, transactional=True),
    )
    t = part(PRODUCE, 9, "TopicProduceData", name=topic, partition_data=(data,))
    (answer,) = c.request(
        PRODUCE, 9, req(PRODUCE, 9, transactional_id=tid, acks=-1, timeout=5000, topic_data=(t,))
    ).responses
    return answer.partition_responses[0]


def test_a_transactional_write_to_a_partition_outside_the_transaction_is_refused(broker: InProcessBroker) -> None:
    """KIP-890 part 1: the first write of a transaction to a partition is verified with the coordinator."""
    with RawClient(broker.port) as c:
        create(c, "verified")
        p = init(c, "tx-v")
        refused = produce_txn(c, "tx-v", p, "verified", 0)  # never added to the transaction
        assert (refused.error_code, refused.error_message) == (
            ErrorCode.invalid_txn_state,
            "Partition was not added to the transaction",
        )
        assert (
            add(c, "tx-v", p, "verified").results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
            == OK
        )
        assert produce_txn(c, "tx-v", p, "verified", 0).error_code == OK
        assert produce_txn(c, "tx-v", p, "verified", 2).error_code == OK  # its transaction is ongoing here now
        assert end(c, "tx-v", p, commit=False).error_code == OK
        p = completed(c, "tx-v")  # aborted; the next epoch
        late = produce_txn(c, "tx-v", p, "verified", 0)  # a write after the abort, not added again
        assert late.error_code == ErrorCode.invalid_txn_state
        fetched = c.request(
            FETCH,
            4,
            req(
                FETCH,
                4,
                replica_id=-1,
                max_wait=0,
                min_bytes=0,
                max_bytes=1 << 20,
                isolation_level=1,
                topics=(
                    part(
                        FETCH,
                        4,
                        "FetchTopic",
                        topic="verified",
                        partitions=(
                            part(FETCH, 4, "FetchPartition", partition=0, fetch_offset=0, partition_max_bytes=1 << 20),
                        ),
                    ),
                ),
            ),
        )
        answer = fetched.responses[0].partitions[0]
        assert answer.last_stable_offset == answer.high_watermark  # no transaction left hanging


WRITE_MARKERS, DESCRIBE_TXNS, LIST_TXNS = 27, 65, 66
UNKNOWN_ID = ErrorCode.invalid_producer_id_mapping  # a producer id the coordinator never handed out


def every_version(api_key: int) -> list[tuple[int, int]]:
    """(api key, version) for every version herd advertises for `api_key`."""
    from herd.server.apis import MODULES

    spec = next(m for m in MODULES if m.API_KEY == api_key)
    return [(api_key, v) for v in range(spec.MIN_VERSION, spec.MAX_VERSION + 1)]


@pytest.mark.parametrize(
    "api_key,v",
    [
        *every_version(FIND),
        *every_version(INIT),
        *every_version(ADD_PARTITIONS),
        *every_version(ADD_OFFSETS),
        *every_version(END),
        *every_version(WRITE_MARKERS),
        *every_version(DESCRIBE_TXNS),
        *every_version(LIST_TXNS),
    ],
)
def test_every_version_of_the_transaction_apis_over_the_wire(broker: InProcessBroker, api_key: int, v: int) -> None:
    """Each version decoded from the socket and answered with what that request must get: a transactional id's
    coordinator, a producer id, the error for a producer id never handed out, a marker for a partition that does
    not exist, an unknown transactional id, the (filtered) list."""
    tid = f"wire-{api_key}-{v}"
    with RawClient(broker.port) as c:
        if api_key == FIND:
            if v < 1:  # v0 has no key type: a group
                assert c.request(FIND, v, req(FIND, v, key="g")).error_code == OK
            elif v < 4:
                assert c.request(FIND, v, req(FIND, v, key=tid, key_type=1)).error_code == OK
            else:
                (found,) = c.request(FIND, v, req(FIND, v, coordinator_keys=(tid,), key_type=1)).coordinators
                assert (found.key, found.error_code, found.port) == (tid, OK, broker.port)
        elif api_key == INIT:
            r = c.request(INIT, v, req(INIT, v, transactional_id=tid, transaction_timeout=60_000))
            assert (r.error_code, r.producer_epoch) == (OK, 0) and r.producer_id >= 0
        elif api_key == ADD_PARTITIONS:
            if v <= 3:
                t = part(ADD_PARTITIONS, v, "AddPartitionsToTxnTopic", name="wire", partitions=(0,))
                r = c.request(
                    ADD_PARTITIONS,
                    v,
                    req(
                        ADD_PARTITIONS,
                        v,
                        v3_and_below_transactional_id=tid,
                        v3_and_below_producer_id=1,
                        v3_and_below_producer_epoch=0,
                        v3_and_below_topics=(t,),
                    ),
                )
                codes = [
                    p.partition_error_code for t in r.results_by_topic_v3_and_below for p in t.results_by_partition
                ]
            else:
                t = part(ADD_PARTITIONS, v, "AddPartitionsToTxnTopic", name="wire", partitions=(0,))
                txn = part(
                    ADD_PARTITIONS,
                    v,
                    "AddPartitionsToTxnTransaction",
                    transactional_id=tid,
                    producer_id=1,
                    producer_epoch=0,
                    verify_only=False,
                    topics=(t,),
                )
                r = c.request(ADD_PARTITIONS, v, req(ADD_PARTITIONS, v, transactions=(txn,)))
                codes = [
                    p.partition_error_code
                    for x in r.results_by_transaction
                    for t in x.topic_results
                    for p in t.results_by_partition
                ]
            assert codes == [ErrorCode.unknown_topic_or_partition]  # checked before the coordinator
        elif api_key == ADD_OFFSETS:
            r = c.request(
                ADD_OFFSETS, v, req(ADD_OFFSETS, v, transactional_id=tid, producer_id=1, producer_epoch=0, group_id="g")
            )
            assert r.error_code == UNKNOWN_ID
        elif api_key == END:
            r = c.request(END, v, req(END, v, transactional_id=tid, producer_id=1, producer_epoch=0, committed=True))
            assert r.error_code == UNKNOWN_ID
        elif api_key == WRITE_MARKERS:
            topic = part(WRITE_MARKERS, v, "WritableTxnMarkerTopic", name="wire", partition_indexes=(0,))
            marker = part(
                WRITE_MARKERS,
                v,
                "WritableTxnMarker",
                producer_id=1,
                producer_epoch=0,
                transaction_result=False,
                topics=(topic,),
                coordinator_epoch=0,
            )
            (answer,) = c.request(WRITE_MARKERS, v, req(WRITE_MARKERS, v, markers=(marker,))).markers
            assert [p.error_code for t in answer.topics for p in t.partitions] == [ErrorCode.unknown_topic_or_partition]
        elif api_key == DESCRIBE_TXNS:
            (state,) = c.request(DESCRIBE_TXNS, v, req(DESCRIBE_TXNS, v, transactional_ids=(tid,))).transaction_states
            assert (state.transactional_id, state.error_code) == (tid, ErrorCode.transactional_id_not_found)
        else:
            fields = {"state_filters": ("Ongoing",), "producer_id_filters": (1,)}
            if v >= 1:
                fields["duration_filter"] = -1
            r = c.request(LIST_TXNS, v, req(LIST_TXNS, v, **fields))
            assert (r.error_code, r.transaction_states) == (OK, ())


def test_a_fenced_producers_first_write_is_refused_by_the_verification(broker: InProcessBroker) -> None:
    """KIP-890 part 1: the coordinator answers the verification of a producer an InitProducerId fenced with
    PRODUCER_FENCED, which Produce answers INVALID_PRODUCER_EPOCH; a coordinator that cannot answer now gives a
    retriable NOT_ENOUGH_REPLICAS (Kafka's ReplicaManager translation)."""
    from herd.server.apis._verify import produce_error

    with RawClient(broker.port) as c:
        create(c, "fenced-write")
        old = init(c, "tx-f")
        assert completed(c, "tx-f").producer_epoch == old.producer_epoch + 1  # the old epoch is fenced
        assert produce_txn(c, "tx-f", old, "fenced-write", 0).error_code == ErrorCode.invalid_producer_epoch
    assert produce_error(ErrorCode.coordinator_load_in_progress) == (
        ErrorCode.not_enough_replicas,
        "Unable to verify the partition has been added to the transaction. "
        "Underlying error: COORDINATOR_LOAD_IN_PROGRESS",
    )
    assert produce_error(ErrorCode.invalid_producer_id_mapping) == (ErrorCode.invalid_producer_id_mapping, None)
