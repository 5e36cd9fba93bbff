"""What the answers herd packs directly (offset_fetch_body, share_fetch_body) write the same way: unsigned varints
(the compact lengths and counts of flexible versions) and compact nullable strings, in kio's layout
(kio.serial.writers: write_unsigned_varint, write_compact_string / write_nullable_compact_string)."""

from __future__ import annotations

_ONE_BYTE = [bytes((i,)) for i in range(0x80)]


def uvarint(value: int) -> bytes:
    """`value` (>= 0) as an unsigned varint; below 128 (almost every length and count) one byte from a table."""
    if value < 0x80:
        return _ONE_BYTE[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def compact_string(value: str | None) -> bytes:
    """A compact nullable string: null as 0, else its UTF-8 length + 1 as an unsigned varint, then the bytes."""
    if value is None:
        return b"\x00"
    data = value.encode()
    return uvarint(len(data) + 1) + data
