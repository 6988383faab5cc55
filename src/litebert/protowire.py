"""The protobuf wire format, by hand: the few pieces litebert reads and writes without the protobuf package.

Readers: the TF tensor-bundle index (BundleHeaderProto / BundleEntryProto, convert/tf_bundle.py). Writers: the
SentencePiece ModelProto rebuilt from a tokenizer.json (tokenizer_json.py). A message is a run of fields, each a
varint key (field number << 3 | wire type) and a value: wire type 0 a varint, 1 eight bytes, 2 a varint length
and that many bytes, 5 four bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator


class Corrupt(Exception):
    """Low-level parse failure; the caller turns it into a LitebertError naming the file."""


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """(value, position after it)."""
    result, shift = 0, 0
    while True:
        if pos >= len(buf):
            raise Corrupt("varint runs past the end of its buffer")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise Corrupt("varint longer than 10 bytes")


def varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # protobuf int64: two's complement, 10 bytes
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def read_fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """Yield (field number, wire type, value): an int for varint/fixed32/fixed64, bytes for length-delimited."""
    pos = 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(buf, pos)
        elif wire == 1:
            if pos + 8 > len(buf):
                raise Corrupt("truncated fixed64 field")
            (value,) = struct.unpack_from("<Q", buf, pos)
            pos += 8
        elif wire == 2:
            length, pos = read_varint(buf, pos)
            if pos + length > len(buf):
                raise Corrupt("length-delimited field runs past the end of the message")
            value = bytes(buf[pos : pos + length])
            pos += length
        elif wire == 5:
            if pos + 4 > len(buf):
                raise Corrupt("truncated fixed32 field")
            (value,) = struct.unpack_from("<I", buf, pos)
            pos += 4
        else:
            raise Corrupt(f"unsupported protobuf wire type {wire} (field {field})")
        yield field, wire, value


def pb_varint(field: int, value: int) -> bytes:
    return varint(field << 3) + varint(value)


def pb_bytes(field: int, payload: bytes) -> bytes:
    return varint((field << 3) | 2) + varint(len(payload)) + payload


def pb_fixed32(field: int, value: int) -> bytes:
    return varint((field << 3) | 5) + struct.pack("<I", value)
