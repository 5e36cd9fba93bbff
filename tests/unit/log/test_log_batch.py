"""Record batch v2 header parsing and validation (herd.log.batch) against batches written by kio."""

from __future__ import annotations

import struct

import crc32c
import pytest
from batches import make_batch, records_of
from hypothesis import given
from hypothesis import strategies as st

from herd.log.api import CorruptRecordError, InvalidRecordError, RecordTooLargeError, UnsupportedMagicError
from herd.log.batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE,
    TIMESTAMP_TYPE_BIT,
    parse_header,
    set_base_offset,
    set_log_append_time,
    valid_prefix,
    validate_batches,
)


def test_header_fields_match_what_kio_wrote() -> None:
    batch = make_batch([b"a", b"bb", b"ccc"])
    header = parse_header(batch)
    assert HEADER_SIZE == 61
    assert (header.magic, header.record_count, header.last_offset_delta) == (2, 3, 2)
    assert header.size == len(batch)
    assert header.producer_id == -1


def test_several_batches_in_one_buffer() -> None:
    data = make_batch([b"a"]) + make_batch([b"b", b"c"])
    headers = validate_batches(data)
    assert [h.record_count for h in headers] == [1, 2]
    assert headers[1].position == headers[0].end


@pytest.mark.parametrize("byte", range(ATTRIBUTES_OFFSET, 120))
def test_a_flipped_bit_in_the_crc_covered_bytes_is_corrupt(byte: int) -> None:
    batch = bytearray(make_batch([b"value-" * 10]))
    batch[byte] ^= 0x10
    with pytest.raises(CorruptRecordError):
        validate_batches(batch)


def test_a_flipped_bit_in_the_crc_itself_is_corrupt() -> None:
    batch = bytearray(make_batch([b"v"]))
    batch[CRC_OFFSET] ^= 1
    with pytest.raises(CorruptRecordError):
        validate_batches(batch)


@pytest.mark.parametrize("magic", [0, 1])
def test_old_magic_is_unsupported(magic: int) -> None:
    batch = bytearray(make_batch([b"v"]))
    batch[16] = magic
    with pytest.raises(UnsupportedMagicError):
        validate_batches(batch)


def test_every_truncation_is_corrupt() -> None:
    batch = make_batch([b"v" * 50])
    for cut in range(1, len(batch)):
        with pytest.raises(CorruptRecordError):
            validate_batches(batch[:cut])


def test_impossible_length_is_corrupt() -> None:
    batch = bytearray(make_batch([b"v"]))
    struct.pack_into(">i", batch, 8, 10)
    with pytest.raises(CorruptRecordError):
        validate_batches(batch)


def _with_count(batch: bytes, count: int) -> bytes:
    data = bytearray(batch)
    struct.pack_into(">i", data, 57, count)
    struct.pack_into(">I", data, CRC_OFFSET, crc32c.crc32c(bytes(data[ATTRIBUTES_OFFSET:])))
    return bytes(data)


def test_empty_or_miscounted_batches_are_invalid() -> None:
    batch = make_batch([b"a", b"b"])
    for count in (0, 1, 3):
        with pytest.raises(InvalidRecordError):
            validate_batches(_with_count(batch, count))
    with pytest.raises(InvalidRecordError):
        validate_batches(b"")


def test_too_large_batch() -> None:
    batch = make_batch([b"x" * 1000])
    with pytest.raises(RecordTooLargeError):
        validate_batches(batch, max_batch_bytes=len(batch) - 1)
    validate_batches(batch, max_batch_bytes=len(batch))


def test_base_offset_rewrite_keeps_the_crc_valid() -> None:
    data = bytearray(make_batch([b"a", b"b"]))
    set_base_offset(data, parse_header(data), 1234)
    validate_batches(data)
    assert records_of(bytes(data)) == [(1234, b"a"), (1235, b"b")]


def test_log_append_time_sets_the_bit_and_max_timestamp_with_a_fresh_crc() -> None:
    data = bytearray(make_batch([b"a"]))
    set_log_append_time(data, parse_header(data), 1_800_000_000_000)
    header = validate_batches(data)[0]
    assert header.attributes & TIMESTAMP_TYPE_BIT
    assert header.max_timestamp == 1_800_000_000_000


def test_valid_prefix_allows_a_gap_compaction_left_but_stops_at_an_overlap() -> None:
    first, second = bytearray(make_batch([b"a", b"b"])), bytearray(make_batch([b"c"]))
    set_base_offset(second, parse_header(second), 5)  # offsets 2-4 were compacted away
    assert len(valid_prefix(bytes(first + second), 0)) == 2
    set_base_offset(second, parse_header(second), 1)  # overlaps offset 1
    assert len(valid_prefix(bytes(first + second), 0)) == 1
    set_base_offset(second, parse_header(second), 2)
    assert len(valid_prefix(bytes(first + second), 0)) == 2


@given(st.lists(st.lists(st.binary(max_size=300), min_size=1, max_size=5), min_size=1, max_size=6))
def test_any_sequence_of_batches_parses_back(batches: list[list[bytes]]) -> None:
    data = b"".join(make_batch(values) for values in batches)
    headers = validate_batches(data)
    assert [h.record_count for h in headers] == [len(v) for v in batches]
    assert headers[-1].end == len(data)
