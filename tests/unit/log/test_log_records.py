"""herd.log.records: (offset, timestamp) of every record of a v2 batch, for every codec, checked against the
timestamps the batches were built with and against kafka-python's own record reader."""

from __future__ import annotations

import struct
from collections.abc import Callable

import cramjam
import pytest
from batches import (
    BASE_TS,
    GZIP,
    LZ4,
    SNAPPY,
    ZSTD,
    client_batch,
    client_records,
    kio_batch,
    recompress,
    with_attributes,
)

from herd.log.api import CorruptRecordError
from herd.log.batch import CONTROL_BIT, HEADER_SIZE, parse_header, set_log_append_time
from herd.log.records import (
    XERIAL_MAGIC,
    first_record_at_or_after,
    iter_record_timestamps,
    offset_of_timestamp,
)

DAY = 24 * 3600 * 1000
# out of order, millisecond precision, a negative delta, and one far enough off to need a long varlong
STAMPS = [BASE_TS + 5_123, BASE_TS + 1_007, BASE_TS + 9_999, BASE_TS + 3_001, BASE_TS + 100 * DAY, BASE_TS + 2]


def records(batch: bytes) -> list[tuple[int, int]]:
    return list(iter_record_timestamps(batch, parse_header(batch)))


def expected(stamps: list[int], base_offset: int = 0) -> list[tuple[int, int]]:
    return [(base_offset + i, stamp) for i, stamp in enumerate(stamps)]


def xerial(data: bytes, block: int = 100) -> bytes:
    """Xerial snappy framing, in blocks of `block` bytes (so several blocks), as Java's producer writes."""
    out = bytearray(XERIAL_MAGIC + struct.pack(">ii", 1, 1))
    for start in range(0, len(data), block):
        chunk = bytes(cramjam.snappy.compress_raw(data[start : start + block]))
        out += struct.pack(">i", len(chunk)) + chunk
    return bytes(out)


def test_uncompressed_kio_batch_keeps_every_millisecond() -> None:
    assert records(kio_batch(STAMPS)) == expected(STAMPS)


def test_offsets_are_the_batch_base_plus_each_delta() -> None:
    batch = bytearray(kio_batch(STAMPS))
    struct.pack_into(">q", batch, 0, 1_000)  # the log's rewrite of the base offset
    assert records(bytes(batch)) == expected(STAMPS, 1_000)
    sparse = client_batch(STAMPS[:3], offsets=[0, 4, 7])  # a compacted batch: offset deltas with gaps
    assert records(sparse) == [(0, STAMPS[0]), (4, STAMPS[1]), (7, STAMPS[2])] == client_records(sparse)


@pytest.mark.parametrize("codec", [0, GZIP, SNAPPY, LZ4, ZSTD], ids=["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_codec_as_a_client_writes_it(codec: int) -> None:
    batch = client_batch(STAMPS, codec)
    assert records(batch) == expected(STAMPS) == client_records(batch)


def test_snappy_xerial_framing_with_several_blocks() -> None:
    batch = recompress(kio_batch(STAMPS, value=b"abc" * 30), SNAPPY, xerial)
    assert batch[HEADER_SIZE : HEADER_SIZE + 8] == XERIAL_MAGIC
    assert records(batch) == expected(STAMPS) == client_records(batch)


def test_raw_snappy_as_librdkafka_writes_it() -> None:
    batch = recompress(kio_batch(STAMPS), SNAPPY, lambda data: bytes(cramjam.snappy.compress_raw(data)))
    assert batch[HEADER_SIZE : HEADER_SIZE + 8] != XERIAL_MAGIC
    assert records(batch) == expected(STAMPS) == client_records(batch)


@pytest.mark.parametrize("codec", [0, LZ4])
def test_log_append_time_stamps_every_record_with_the_batch_max(codec: int) -> None:
    batch = bytearray(client_batch(STAMPS, codec))
    set_log_append_time(batch, parse_header(batch), BASE_TS + 7)
    assert records(bytes(batch)) == expected([BASE_TS + 7] * len(STAMPS)) == client_records(bytes(batch))


def test_a_batch_inside_a_larger_buffer_is_read_at_its_position() -> None:
    first, second = kio_batch([BASE_TS]), client_batch(STAMPS, ZSTD)
    buffer = memoryview(first + second)
    header = parse_header(buffer, len(first))
    assert list(iter_record_timestamps(buffer, header)) == expected(STAMPS)


def test_control_batches_are_read_like_any_other() -> None:
    """Kafka's searchForTimestamp and offsetOfMaxTimestamp iterate control batches' records too."""
    assert records(with_attributes(kio_batch(STAMPS[:2]), CONTROL_BIT)) == expected(STAMPS[:2])


def test_first_record_at_or_after_goes_in_offset_order() -> None:
    batch = client_batch(STAMPS, GZIP)
    header = parse_header(batch)
    for target in [BASE_TS, BASE_TS + 1_008, BASE_TS + 5_124, BASE_TS + 10_000, BASE_TS + 100 * DAY]:
        want = next(((o, s) for o, s in expected(STAMPS) if s >= target), None)
        assert first_record_at_or_after(batch, header, target) == want
    assert first_record_at_or_after(batch, header, BASE_TS + 100 * DAY + 1) is None
    assert first_record_at_or_after(batch, header, BASE_TS, min_offset=3) == (3, STAMPS[3])


def test_offset_of_timestamp_is_the_first_record_holding_it() -> None:
    stamps = [BASE_TS + 1, BASE_TS + 9, BASE_TS + 2, BASE_TS + 9]
    batch = client_batch(stamps, SNAPPY)
    header = parse_header(batch)
    assert offset_of_timestamp(batch, header, header.max_timestamp) == 1
    assert offset_of_timestamp(batch, header, BASE_TS + 5) is None


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: with_attributes(b, 5),  # codec 5 does not exist
        lambda b: recompress(b[: HEADER_SIZE + 1], 0, lambda d: d),  # records section cut after one byte
        lambda b: recompress(b, 0, lambda d: d[:-3]),  # last record cut short
        lambda b: recompress(kio_batch(STAMPS), GZIP, lambda d: d),  # says gzip, is not
        lambda b: recompress(kio_batch(STAMPS), SNAPPY, lambda d: XERIAL_MAGIC + bytes(8) + b"\x00\x00\x01\x00"),
    ],
    ids=["unknown-codec", "truncated-section", "truncated-record", "bad-gzip", "bad-xerial-block"],
)
def test_undecodable_records_raise_corrupt_record(damage: Callable[[bytes], bytes]) -> None:
    batch = damage(kio_batch(STAMPS))
    with pytest.raises(CorruptRecordError):
        records(batch)
