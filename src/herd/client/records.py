"""Decoding the record batches of a Fetch answer into records (magic v2 batches, every codec).

A Fetch answer carries, per partition, a run of record batches. Each batch has a 61-byte header (base
offset, length, leader epoch, magic, CRC, attributes, last offset delta, base and max timestamps, producer
id and epoch, base sequence, record count) followed by its records, compressed as a whole when attributes
& 0x07 is 1 gzip, 2 snappy (xerial-framed as Java writes it, or raw as librdkafka does), 3 lz4 (frame) or
4 zstd. A record is: varint length, int8 attributes, varlong timestamp delta, varint offset delta, varint
key length and key, varint value length and value, varint header count and headers (varint key length,
key, varint value length, value); a length of -1 is null. Control batches (attributes bit 0x20:
transaction markers) are skipped; a batch cut short at the end of the answer (the broker may send a
partial last batch) is ignored.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import cramjam
from kio._kio_native import read_signed_varint, read_signed_varlong

__all__ = ["Record", "decode_batches"]

_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = _HEADER.size  # 61
_INT32 = struct.Struct(">i")
XERIAL_MAGIC = b"\x82SNAPPY\x00"
CONTROL_BIT = 0x20
LOG_APPEND_TIME_BIT = 0x08


@dataclass(frozen=True, slots=True)
class Record:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def _snappy(data: bytes) -> bytes:
    if not data.startswith(XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    chunks, pos = [], len(XERIAL_MAGIC) + 8
    while pos + 4 <= len(data):
        (length,) = _INT32.unpack_from(data, pos)
        pos += 4
        chunks.append(bytes(cramjam.snappy.decompress_raw(data[pos : pos + length])))
        pos += length
    return b"".join(chunks)


def _decompress(codec: int, data: bytes) -> bytes:
    if codec == 0:
        return data
    if codec == 1:
        return bytes(cramjam.gzip.decompress(data))
    if codec == 2:
        return _snappy(data)
    if codec == 3:
        return bytes(cramjam.lz4.decompress(data))
    if codec == 4:
        return bytes(cramjam.zstd.decompress(data))
    raise ValueError(f"unknown compression codec {codec}")


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """(value, position after it): kio's reader answers (value, size)."""
    value, size = read_signed_varint(data, pos)
    return int(value), pos + size


def _varlong(data: bytes, pos: int) -> tuple[int, int]:
    value, size = read_signed_varlong(data, pos)
    return int(value), pos + size


def _bytes(data: bytes, pos: int) -> tuple[bytes | None, int]:
    length, pos = _varint(data, pos)
    if length < 0:
        return None, pos
    return data[pos : pos + length], pos + length


def _record(data: bytes, pos: int) -> tuple[tuple[int, int, bytes | None, bytes | None, tuple], int]:
    length, pos = _varint(data, pos)
    end = pos + length
    pos += 1  # attributes
    timestamp_delta, pos = _varlong(data, pos)
    offset_delta, pos = _varint(data, pos)
    key, pos = _bytes(data, pos)
    value, pos = _bytes(data, pos)
    count, pos = _varint(data, pos)
    headers = []
    for _ in range(max(count, 0)):
        name, pos = _bytes(data, pos)
        header_value, pos = _bytes(data, pos)
        headers.append(((name or b"").decode("utf-8", "replace"), header_value))
    return (offset_delta, timestamp_delta, key, value, tuple(headers)), end


def decode_batches(topic: str, partition: int, data: bytes) -> Iterator[Record]:
    """The records of every complete data batch in `data`, in order."""
    pos = 0
    while pos + HEADER_SIZE <= len(data):
        fields = _HEADER.unpack_from(data, pos)
        base_offset, batch_length, _, magic, _, attributes = fields[:6]
        base_timestamp, max_timestamp, count = fields[7], fields[8], fields[12]
        end = pos + 12 + batch_length
        if end > len(data):
            return
        if magic == 2 and not attributes & CONTROL_BIT:
            records = _decompress(attributes & 0x07, bytes(data[pos + HEADER_SIZE : end]))
            at = 0
            for _ in range(count):
                (delta, ts_delta, key, value, headers), at = _record(records, at)
                timestamp = max_timestamp if attributes & LOG_APPEND_TIME_BIT else base_timestamp + ts_delta
                yield Record(topic, partition, base_offset + delta, timestamp, key, value, headers)
        pos = end
