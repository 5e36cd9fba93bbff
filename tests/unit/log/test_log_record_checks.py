"""herd.log.records.check_records: the records of a produced batch are checked as Kafka's LogValidator checks them
(decompression, each record's framing, the record count, offset deltas of compressed batches), on batches written
by a real client library (kafka-python) and then damaged with a fresh CRC, as a broken client would send them."""

from __future__ import annotations

import random
import struct

import cramjam
import crc32c
import pytest
from batches import GZIP, LZ4, SNAPPY, ZSTD, recompress
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from herd.log.api import CorruptRecordError, InvalidRecordError
from herd.log.batch import ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER_SIZE, parse_header
from herd.log.records import _walk, check_framing, check_records

CODECS = [0, GZIP, SNAPPY, LZ4, ZSTD]


def build(values: list[bytes | None], keys: list[bytes | None] | None = None, codec: int = 0,
          stamps: list[int] | None = None, headers: list[list[tuple[str, bytes]]] | None = None,
          offsets: list[int] | None = None) -> bytes:  # fmt: skip
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 26)  # fmt: skip
    for i, value in enumerate(values):
        builder.append(i if offsets is None else offsets[i],
                       timestamp=1_700_000_000_000 + (i if stamps is None else stamps[i]),
                       key=None if keys is None else keys[i], value=value,
                       headers=[] if headers is None else headers[i])  # fmt: skip
    data = bytes(builder.build())
    assert parse_header(data).attributes & 0x07 == codec, "kafka-python sent it uncompressed"
    return data


def fresh_crc(batch: bytes | bytearray) -> bytes:
    out = bytearray(batch)
    struct.pack_into(">I", out, CRC_OFFSET, crc32c.crc32c(bytes(out[ATTRIBUTES_OFFSET:])))
    return bytes(out)


def with_count(batch: bytes, count: int) -> bytes:
    out = bytearray(batch)
    struct.pack_into(">i", out, HEADER_SIZE - 4, count)
    struct.pack_into(">i", out, 23, count - 1)  # lastOffsetDelta, so that only the records disagree
    return fresh_crc(out)


def record_starts(batch: bytes) -> list[int]:
    """Where each record of an uncompressed batch starts, found by the slow walk."""
    from kio._kio_native import read_signed_varint

    header = parse_header(batch)
    pos, starts = HEADER_SIZE, []
    for _ in range(header.record_count):
        starts.append(pos)
        length, size = read_signed_varint(batch, pos)
        pos += size + length
    return starts


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("shape", ["one", "uniform", "many", "varying", "headers", "keys"])
def test_client_batches_pass(codec, shape):
    rnd = random.Random(7)
    n = {"one": 1, "many": 10_000}.get(shape, 300)
    values = [b"v" * rnd.randrange(0, 300) if shape == "varying" else b"value " * 20 for _ in range(n)]
    keys = [b"key-%d" % i for i in range(n)] if shape == "keys" else None
    headers = [[("h", b"x" * (i % 3))] for i in range(n)] if shape == "headers" else None
    stamps = [i * 7 for i in range(n)]  # timestamp deltas of 1, 2 and 3 bytes
    check_records(build(values, keys, codec, stamps, headers))


def test_null_values_and_several_batches_pass():
    check_records(build([None, b"", None]) + build([b"x" * 20] * 100, codec=GZIP) + build([b"y"] * 70))


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_corrupt_compressed_payload_is_refused(codec):
    """The case found: the compressed bytes damaged, the CRC recomputed. No codec may let it through."""
    batch = build([b"value-%d" % i * 5 for i in range(200)], codec=codec)
    refused = 0
    for where in (HEADER_SIZE + 2, (HEADER_SIZE + len(batch)) // 2, len(batch) - 3):
        damaged = bytearray(batch)
        damaged[where] ^= 0x55
        with pytest.raises((CorruptRecordError, InvalidRecordError)) as info:
            check_records(fresh_crc(damaged))
        assert "batch at byte 0" in str(info.value)
        refused += 1
    assert refused == 3


def test_gzip_that_does_not_decompress_is_corrupt_message():
    batch = build([b"value " * 20] * 50, codec=GZIP)
    damaged = bytearray(batch)
    damaged[len(batch) // 2] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="does not decompress"):
        check_records(fresh_crc(damaged))


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("delta", [-1, 1])
def test_record_count_must_match(codec, delta):
    batch = build([b"value %d " % i * 10 for i in range(100)], codec=codec)
    with pytest.raises(InvalidRecordError):
        check_records(with_count(batch, 100 + delta))


@pytest.mark.parametrize("codec", [GZIP, ZSTD])
def test_compressed_offset_deltas_must_run_from_zero(codec):
    with pytest.raises(InvalidRecordError, match="record 2 has offset delta 5"):
        check_records(build([b"value " * 20] * 3, codec=codec, offsets=[0, 1, 5]))


def test_uncompressed_offset_deltas_are_not_checked_as_in_kafka():
    check_records(build([b"a", b"b", b"c"], offsets=[0, 1, 5]))


def test_a_broken_record_in_the_middle_of_a_uniform_batch_is_found():
    batch = build([b"x" * 100] * 1000)
    start = record_starts(batch)[637]
    damaged = bytearray(batch)
    damaged[start + 8] ^= 0x02  # the value length (after length 2, attributes 1, ts 2, offset delta 2, key 1)
    with pytest.raises(InvalidRecordError, match="record 637"):
        check_records(fresh_crc(damaged))


def test_crc_is_reported_before_records():
    batch = build([b"x" * 100] * 10)
    damaged = bytearray(batch)
    damaged[HEADER_SIZE] ^= 0x40  # the first record's length, CRC left as it was
    with pytest.raises(CorruptRecordError, match="CRC32C mismatch"):
        check_records(bytes(damaged))


def test_compressed_section_of_valid_records_but_too_few():
    batch = build([b"x"] * 10)
    section = batch[HEADER_SIZE:]
    shorter = recompress(with_count(batch, 10)[:HEADER_SIZE] + section[: len(section) // 2], GZIP,
                         lambda data: bytes(cramjam.gzip.compress(data)))  # fmt: skip
    with pytest.raises(InvalidRecordError):
        check_records(shorter)


def reference(section: bytes, count: int, sequential: bool) -> bool:
    """The slow walk, record by record: True if the records are well framed."""
    try:
        end = _walk(section, 0, len(section), 0, count, sequential)
    except InvalidRecordError:
        return False
    return end == len(section)


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.sampled_from([0, 1, 5, 60, 61, 200]), min_size=1, max_size=120),
    uniform=st.booleans(),
    damage=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), max_size=2),
    sequential=st.booleans(),
    with_headers=st.booleans(),
)
def test_runs_agree_with_the_record_by_record_walk(sizes, uniform, damage, sequential, with_headers):
    """The strided run check accepts exactly what the one-record-at-a-time walk accepts, on damaged input too."""
    values = [b"v" * (sizes[0] if uniform else size) for size in sizes] * (3 if uniform else 1)
    n = len(values)
    headers = [[("h", b"x")] if with_headers and i % 2 else [] for i in range(n)]
    section = bytearray(build(values, stamps=[i * 11 for i in range(n)], headers=headers)[HEADER_SIZE:])
    for where, xor in damage:
        section[where % len(section)] ^= xor
    expected = reference(bytes(section), n, sequential)
    try:
        check_framing(bytes(section), 0, len(section), n, sequential=sequential)
        assert expected, "the run check accepted records the walk refuses"
    except InvalidRecordError:
        assert not expected, "the run check refused records the walk accepts"


# -- decompression is bounded ------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_records_larger_than_the_first_scratch_buffer_pass(codec):
    """Eight records of 1 MiB each: the scratch buffer (1 MiB at first) grows until they fit."""
    check_records(build([bytes(1 << 20)] * 8, codec=codec), max_decompressed_bytes=64 << 20)


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_records_beyond_the_decompressed_limit_are_too_large(codec):
    from herd.log.api import RecordTooLargeError

    batch = build([bytes(1 << 20)] * 8, codec=codec)
    with pytest.raises(RecordTooLargeError, match="decompresses to more than 4194304 bytes"):
        check_records(batch, max_decompressed_bytes=4 << 20)


def test_a_decompression_bomb_is_refused_without_decompressing_it_whole():
    """1 MB of gzip that inflates to 1 GiB of zeros: refused once 64 MiB are out, not after taking 1 GiB (the
    one-shot decompress this replaced held the whole output)."""
    import tracemalloc
    import zlib

    from herd.log.api import RecordTooLargeError

    deflate = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = bytes(1 << 20)
    bomb = b"".join(deflate.compress(chunk) for _ in range(1024)) + deflate.flush()
    batch = recompress(build([b"v"]), GZIP, lambda _section: bomb)
    assert len(batch) < 1_100_000
    tracemalloc.start()
    try:
        with pytest.raises(RecordTooLargeError):
            check_records(batch)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 160 << 20  # the scratch buffers (64 MiB and the 32 MiB before it), not 1 GiB


NOW = 1_800_000_000_000
HOUR = 3_600_000


def test_timestamps_too_far_ahead_or_behind_are_refused_as_kafka_refuses_them() -> None:
    """LogValidator.validateTimestamp (CreateTime): each record more than after.max.ms ahead of the broker's clock
    or before.max.ms behind it is listed by its index in the batch, in Kafka's words; -1 (no timestamp) passes."""
    from batches import client_batch

    from herd.log.api import LONG_MAX, InvalidTimestampError
    from herd.log.records import check_timestamps

    fine = client_batch([NOW - 10 * HOUR, NOW, NOW + HOUR], GZIP)
    check_timestamps(fine, NOW, LONG_MAX, HOUR)  # Kafka 4.x's defaults: an hour ahead at most, any age
    ahead = client_batch([NOW, NOW + 2 * HOUR, NOW + HOUR, NOW + HOUR + 1])
    with pytest.raises(InvalidTimestampError) as raised:
        check_timestamps(fine + ahead, NOW, LONG_MAX, HOUR)
    assert raised.value.error_code == 32
    assert str(raised.value) == "One or more records have been rejected due to invalid timestamp"
    assert raised.value.record_errors == [
        (
            1,
            f"Timestamp {NOW + 2 * HOUR} of message with offset 1 is out of range. The timestamp should be within "
            f"[{NOW - LONG_MAX}, {NOW + HOUR}]",
        ),
        (
            3,
            f"Timestamp {NOW + HOUR + 1} of message with offset 3 is out of range. The timestamp should be within "
            f"[{NOW - LONG_MAX}, {NOW + HOUR}]",
        ),
    ]
    with pytest.raises(InvalidTimestampError) as raised:  # before.max.ms set: old records read one by one
        check_timestamps(client_batch([NOW - HOUR, NOW - 1000], ZSTD), NOW, 60_000, LONG_MAX)
    ((index, message),) = raised.value.record_errors
    # Java's long arithmetic: now + Long.MAX_VALUE wraps around, and the message shows it so
    assert index == 0 and message.endswith(f"within [{NOW - 60_000}, {NOW + LONG_MAX - 2**64}]")
    check_timestamps(client_batch([-1, -1]), NOW, 0, 0)  # records without a timestamp pass
