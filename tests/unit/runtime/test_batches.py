"""The runtime's v2 batch codec against kio's record writer and reader, and against the log's checks."""

from __future__ import annotations

import datetime
import io

import cramjam
import crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch
from kio.records.schema import Record as KioRecord
from kio.records.writers import write_new_batch
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from herd.coordinator import Record
from herd.log.batch import validate_batches
from herd.log.records import control_batch
from herd.runtime.batches import LoadedBatch, decode_batches, encode_batch, read_batches

NOW = 1_700_000_000_000  # a whole second: kio's datetime round trip is exact
records = st.lists(
    st.builds(Record, st.binary(min_size=1, max_size=300), st.none() | st.binary(max_size=300)), min_size=1, max_size=80
)


def kio_batch(
    rs: list[Record], now_ms: int, attributes: int = 0, producer: tuple[int, int, int] = (-1, -1, -1)
) -> bytes:
    stamp = TZAwareMicros.parse(datetime.datetime.fromtimestamp(now_ms / 1000, datetime.UTC))
    producer_id, producer_epoch, base_sequence = producer
    batch = NewRecordBatch(
        producer_id=i64(producer_id),
        producer_epoch=i16(producer_epoch),
        base_sequence=i32(base_sequence),
        attributes=i16(attributes),
        records=tuple(
            KioRecord(attributes=i8(0), timestamp=stamp, offset=i64(i), key=r.key, value=r.value, headers=())
            for i, r in enumerate(rs)
        ),
    )
    buffer = io.BytesIO()
    write_new_batch(buffer, batch)
    return buffer.getvalue()


@given(records)
def test_encoding_is_byte_identical_to_kio_and_valid_for_the_log(rs: list[Record]) -> None:
    data = encode_batch(rs, NOW)
    assert data == kio_batch(rs, NOW)
    (header,) = validate_batches(data)
    assert header.record_count == len(rs) and header.max_timestamp == NOW


@given(st.lists(records, min_size=1, max_size=4))
def test_decoding_reads_what_kio_reads(batches: list[list[Record]]) -> None:
    data = b"".join(encode_batch(rs, NOW) for rs in batches)
    decoded = list(decode_batches(data))
    assert [records_ for _, records_ in decoded] == [[(r.key, r.value) for r in rs] for rs in batches]
    batch, _ = read_batch(data, 0)
    assert [(r.key, r.value) for r in batch.records] == decoded[0][1]
    assert [next_offset for next_offset, _ in decoded] == [len(rs) for rs in batches]


def test_control_batches_and_keyless_records_are_skipped_but_an_empty_key_is_a_key() -> None:
    control = kio_batch([Record(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00")], NOW, attributes=0x20)
    assert list(decode_batches(control)) == [(1, [])]
    assert list(decode_batches(_with_null_key(Record(b"k", b"v")))) == [(1, [])]
    assert list(decode_batches(kio_batch([Record(b"", b"v")], NOW))) == [(1, [(b"", b"v")])]


def _with_null_key(record: Record) -> bytes:
    stamp = TZAwareMicros.parse(datetime.datetime.fromtimestamp(NOW / 1000, datetime.UTC))
    batch = NewRecordBatch(
        producer_id=i64(-1),
        producer_epoch=i16(-1),
        base_sequence=i32(-1),
        attributes=i16(0),
        records=(
            KioRecord(attributes=i8(0), timestamp=stamp, offset=i64(0), key=None, value=record.value, headers=()),
        ),
    )
    buffer = io.BytesIO()
    write_new_batch(buffer, batch)
    return buffer.getvalue()


def test_a_compressed_batch_is_decompressed() -> None:
    rs = [Record(b"k%d" % i, b"v%d" % i) for i in range(5)]
    plain = encode_batch(rs, NOW)
    records_section = plain[61:]
    compressed = bytes(cramjam.gzip.compress(records_section))
    body = bytearray(plain[21:61]) + compressed
    body[0:2] = (1).to_bytes(2, "big")  # attributes: gzip
    crc = crc32c.crc32c(bytes(body))
    head = plain[:8] + (len(body) + 9).to_bytes(4, "big") + plain[12:17] + crc.to_bytes(4, "big")
    assert [r for _, r in decode_batches(head + bytes(body))] == [[(r.key, r.value) for r in rs]]


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[:-1],  # torn
        lambda b: b[:30] + bytes([b[30] ^ 1]) + b[31:],  # a flipped bit under the CRC
    ],
)
def test_a_damaged_batch_raises_value_error(damage) -> None:
    data = damage(encode_batch([Record(b"key", b"value")], NOW))
    with pytest.raises(ValueError):
        list(decode_batches(data))


@given(records, st.integers(0, 2**63 - 1), st.integers(0, 2**15 - 1))
def test_a_transactional_batch_is_kafkas_and_loads_with_its_producer(rs: list[Record], pid: int, epoch: int) -> None:
    """Kafka's coordinator writes a transaction's records with the producer's id and epoch, base sequence 0 and
    the transactional bit (CoordinatorRuntime's MemoryRecordsBuilder)."""
    data = encode_batch(rs, NOW, pid, epoch)
    assert data == kio_batch(rs, NOW, attributes=0x10, producer=(pid, epoch, 0))
    (header,) = validate_batches(data)
    assert (header.producer_id, header.producer_epoch, header.attributes) == (pid, epoch, 0x10)
    assert list(read_batches(data)) == [LoadedBatch(len(rs), [(r.key, r.value) for r in rs], pid, epoch, None)]


def test_a_plain_batch_loads_without_a_producer_even_if_it_names_one() -> None:
    rs = [Record(b"k", b"v")]
    assert list(read_batches(encode_batch(rs, NOW))) == [LoadedBatch(1, [(b"k", b"v")], -1, -1, None)]
    idempotent = kio_batch(rs, NOW, producer=(5, 0, 0))  # not transactional: not pending
    assert list(read_batches(idempotent)) == [LoadedBatch(1, [(b"k", b"v")], -1, -1, None)]


@pytest.mark.parametrize(("control_type", "commit"), [(0, False), (1, True)])
def test_a_marker_is_kafkas_control_batch(control_type: int, commit: bool) -> None:
    """ControlRecordType ABORT 0 / COMMIT 1 (key: version 0, type), EndTransactionMarker v0 (coordinator epoch),
    in a transactional control batch of the producer with base sequence -1 (MemoryRecords.withEndTransactionMarker)."""
    control = Record(b"\x00\x00\x00" + bytes([control_type]), b"\x00\x00\x00\x00\x00\x07")
    data = control_batch(9, 1, commit, 7, NOW, 0)  # as the coordinator writes it (partition leader epoch 0)
    assert data == kio_batch([control], NOW, attributes=0x30, producer=(9, 1, -1))
    (header,) = validate_batches(data)
    assert (header.producer_id, header.producer_epoch, header.record_count) == (9, 1, 1)
    assert list(decode_batches(data)) == [(1, [])]


@pytest.mark.parametrize("commit", [False, True])
def test_a_control_batch_loads_as_its_marker(commit: bool) -> None:
    data = control_batch(9, 1, commit, 7, NOW, 0)  # as the coordinator writes it (partition leader epoch 0)
    assert list(read_batches(data)) == [LoadedBatch(1, [], 9, 1, commit)]
