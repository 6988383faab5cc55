"""Read TensorFlow tensor-bundle checkpoints in pure numpy (no tensorflow, no protobuf).

A TF1/TF2 checkpoint `PREFIX` is two kinds of files:

    PREFIX.index                      a LevelDB-format SSTable: sorted key -> value, where the key "" holds a
                                      BundleHeaderProto and every other key is a tensor name whose value is a
                                      BundleEntryProto (dtype, shape, shard_id, offset, size, crc32c, slices)
    PREFIX.data-0000N-of-0000M        raw tensor bytes, little-endian, located by (shard_id, offset, size)

SSTable layout (what `_read_table` walks):

    [data block][trailer] ... [metaindex block][trailer] [index block][trailer] [footer: 48 bytes]
    block   = entries (varint shared, varint non_shared, varint value_len, key suffix, value)
              + uint32 restart offsets + uint32 restart count
    trailer = 1 byte compression type (0 = none, 1 = snappy) + masked crc32c(block + type byte)
    footer  = metaindex handle, index handle (varint offset + varint size each), zero padding to 40 bytes,
              uint64 magic 0xdb4775248b80fb57
    The index block maps a separator key (>= the last key of a data block) to that block's handle.

Checksums are CRC-32C (Castagnoli), "masked" as TF/LevelDB do so that a checksum of checksummed data stays
unlikely to collide. Public API: `CheckpointReader`, `read_checkpoint`, `list_variables`,
`resolve_checkpoint_prefix`, `crc32c`, `mask_crc`, `unmask_crc`. The writer the tests use to make fake
checkpoints is tests/tf_fixtures.py; litebert itself never writes TF checkpoints.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from litebert.errors import CheckpointError
from litebert.protowire import Corrupt, read_fields, read_varint, signed64

TABLE_MAGIC = 0xDB4775248B80FB57
FOOTER_SIZE = 48  # two block handles padded to 40 bytes + 8-byte magic
BLOCK_TRAILER_SIZE = 5  # compression type byte + masked crc32c
NO_COMPRESSION, SNAPPY_COMPRESSION = 0, 1

# ----------------------------------------------------------------------------------------------------------------
# CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), table driven; long buffers are split into many lanes
# that numpy advances together, then the lane results are chained with a "shift by m zero bytes" operator.


def _make_crc_table() -> np.ndarray:
    t = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        t = np.where(t & 1, (t >> 1) ^ np.uint32(0x82F63B78), t >> 1).astype(np.uint32)
    return t


_CRC_TABLE = _make_crc_table()
_CRC_TABLE_LIST = [int(x) for x in _CRC_TABLE]
_VECTOR_MIN_BYTES = 1 << 14  # below this the plain loop is as fast as the numpy set-up


def _crc_register_py(reg: int, data: bytes | memoryview) -> int:
    table = _CRC_TABLE_LIST
    for byte in bytes(data):
        reg = table[(reg ^ byte) & 0xFF] ^ (reg >> 8)
    return reg


def _crc_register(reg: int, data: bytes | memoryview) -> int:
    """Advance the raw CRC register (no pre/post inversion) over `data`.

    The register update is linear over GF(2) in (register, data), so for data = chunk_0 .. chunk_{n-1} (all m bytes):
    reg_i = Z_m(reg_{i-1}) ^ U(0, chunk_i), with Z_m = "feed m zero bytes". All U(., chunk_i) run at once in numpy.
    """
    n = len(data)
    if n < _VECTOR_MIN_BYTES:
        return _crc_register_py(reg, data)
    lanes = min(65536, max(256, math.isqrt(n) * 4))
    m = n // lanes
    head = lanes * m
    rows = np.frombuffer(data, dtype=np.uint8, count=head).reshape(lanes, m).T.copy()  # [m, lanes]
    regs = np.zeros(lanes, dtype=np.uint32)
    regs[0] = reg  # lane 0 starts from the caller's register; the others from 0
    for row in rows:
        regs = _CRC_TABLE[(regs ^ row) & 0xFF] ^ (regs >> 8)
    # Z_m as four byte tables: shift[k][b] = Z_m(b << 8k).
    shift = (np.arange(256, dtype=np.uint32)[None, :] << (8 * np.arange(4, dtype=np.uint32))[:, None]).ravel()
    for _ in range(m):
        shift = _CRC_TABLE[shift & 0xFF] ^ (shift >> 8)
    z0, z1, z2, z3 = (shift[256 * k : 256 * (k + 1)].tolist() for k in range(4))
    out = int(regs[0])
    for r in regs[1:].tolist():
        out = z0[out & 0xFF] ^ z1[(out >> 8) & 0xFF] ^ z2[(out >> 16) & 0xFF] ^ z3[out >> 24] ^ r
    return _crc_register_py(out, memoryview(data)[head:])


def crc32c(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """CRC-32C of `data`, continuing from `crc` (like TF's crc32c::Extend). crc32c(b"123456789") == 0xE3069283."""
    return _crc_register(crc ^ 0xFFFFFFFF, data) ^ 0xFFFFFFFF


def mask_crc(crc: int) -> int:
    """TF/LevelDB checksum masking: rotate right by 15 bits and add a constant."""
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def unmask_crc(masked: int) -> int:
    rot = (masked - 0xA282EAD8) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF


# ----------------------------------------------------------------------------------------------------------------
# TF dtypes (tensorflow/core/framework/types.proto enum values).

# enum -> (TF name, numpy dtype or None when the bytes are not a plain array)
TF_DTYPES: dict[int, tuple[str, np.dtype | None]] = {
    1: ("float32", np.dtype("<f4")),
    2: ("float64", np.dtype("<f8")),
    3: ("int32", np.dtype("<i4")),
    4: ("uint8", np.dtype("u1")),
    5: ("int16", np.dtype("<i2")),
    6: ("int8", np.dtype("i1")),
    7: ("string", None),
    8: ("complex64", np.dtype("<c8")),
    9: ("int64", np.dtype("<i8")),
    10: ("bool", np.dtype("?")),
    14: ("bfloat16", np.dtype("<u2")),  # returned as float32 (see _decode_array)
    17: ("uint16", np.dtype("<u2")),
    18: ("complex128", np.dtype("<c16")),
    19: ("float16", np.dtype("<f2")),
    22: ("uint32", np.dtype("<u4")),
    23: ("uint64", np.dtype("<u8")),
}
LARGEST_ITEMSIZE = max(d.itemsize for _, d in TF_DTYPES.values() if d is not None)  # bytes (complex128: 16)
_UNSUPPORTED_DTYPES = {
    11: "qint8", 12: "quint8", 13: "qint32", 15: "qint16", 16: "quint16",
    20: "resource", 21: "variant",
}  # fmt: skip
DT_STRING, DT_BFLOAT16 = 7, 14


@dataclass(frozen=True)
class BundleHeader:
    num_shards: int
    endianness: str  # "little" | "big"
    producer: int
    min_consumer: int


@dataclass(frozen=True)
class TensorEntry:
    """One BundleEntryProto: where a tensor's bytes are and how to decode them."""

    name: str
    dtype: int  # TF DataType enum
    shape: tuple[int, ...]
    shard_id: int
    offset: int
    size: int
    crc32c: int | None  # masked, as stored; None when absent
    num_slices: int  # > 0: a partitioned variable, stored as separate slice entries

    @property
    def dtype_name(self) -> str:
        if self.dtype in TF_DTYPES:
            return TF_DTYPES[self.dtype][0]
        return _UNSUPPORTED_DTYPES.get(self.dtype, f"dtype enum {self.dtype}")


def _typed(field: int, value: int | bytes, kind: type) -> int | bytes:
    """A field's value, checked to have the wire type the message definition gives it (a corrupt index may not)."""
    if not isinstance(value, kind):
        raise Corrupt(f"protobuf field {field} has the wrong wire type")
    return value


def _parse_shape(buf: bytes) -> tuple[int, ...]:
    dims = []
    for field, _, value in read_fields(buf):
        if field == 2:  # Dim {int64 size = 1; string name = 2}
            size = 0
            for dfield, _, dvalue in read_fields(_typed(field, value, bytes)):
                if dfield == 1:
                    size = signed64(_typed(dfield, dvalue, int))
            dims.append(size)
        elif field == 3 and value:
            raise Corrupt("tensor shape has unknown rank")
    return tuple(dims)


def _parse_entry(name: str, buf: bytes) -> TensorEntry:
    dtype, shape, shard, offset, size, crc, slices = 0, (), 0, 0, 0, None, 0
    for field, _, value in read_fields(buf):
        if field == 1:
            dtype = _typed(field, value, int)
        elif field == 2:
            shape = _parse_shape(_typed(field, value, bytes))
        elif field == 3:
            shard = _typed(field, value, int)
        elif field == 4:
            offset = signed64(_typed(field, value, int))
        elif field == 5:
            size = signed64(_typed(field, value, int))
        elif field == 6:
            crc = _typed(field, value, int)
        elif field == 7:
            slices += 1
    return TensorEntry(name, dtype, shape, shard, offset, size, crc, slices)


def _parse_header(buf: bytes) -> BundleHeader:
    num_shards, endianness, producer, min_consumer = 1, 0, 0, 0
    for field, _, value in read_fields(buf):
        if field == 1:
            num_shards = _typed(field, value, int)
        elif field == 2:
            endianness = _typed(field, value, int)
        elif field == 3:  # VersionDef {int32 producer = 1; int32 min_consumer = 2; ...}
            for vfield, _, vvalue in read_fields(_typed(field, value, bytes)):
                if vfield == 1:
                    producer = _typed(vfield, vvalue, int)
                elif vfield == 2:
                    min_consumer = _typed(vfield, vvalue, int)
    return BundleHeader(num_shards, "big" if endianness == 1 else "little", producer, min_consumer)


# ----------------------------------------------------------------------------------------------------------------
# SSTable reading.


def _block_entries(block: bytes) -> Iterator[tuple[bytes, bytes]]:
    """Decode one block's prefix-compressed entries (the restart array only speeds up seeks; we scan)."""
    if len(block) < 4:
        raise Corrupt("block shorter than its restart count")
    (num_restarts,) = struct.unpack_from("<I", block, len(block) - 4)
    end = len(block) - 4 * (num_restarts + 1)
    if end < 0:
        raise Corrupt(f"block claims {num_restarts} restart points, more than fit in {len(block)} bytes")
    pos, key = 0, b""
    while pos < end:
        shared, pos = read_varint(block, pos)
        non_shared, pos = read_varint(block, pos)
        value_len, pos = read_varint(block, pos)
        if shared > len(key) or pos + non_shared + value_len > end:
            raise Corrupt("block entry runs past the end of the block")
        key = key[:shared] + block[pos : pos + non_shared]
        pos += non_shared
        yield key, block[pos : pos + value_len]
        pos += value_len


def _read_handle(buf: bytes, pos: int) -> tuple[tuple[int, int], int]:
    offset, pos = read_varint(buf, pos)
    size, pos = read_varint(buf, pos)
    return (offset, size), pos


def _read_block(data: bytes, handle: tuple[int, int], verify: bool) -> bytes:
    offset, size = handle
    if offset + size + BLOCK_TRAILER_SIZE > len(data):
        raise Corrupt(f"block at offset {offset} (size {size}) runs past the end of the file ({len(data)} bytes)")
    block = data[offset : offset + size]
    kind = data[offset + size]
    if verify:
        (stored,) = struct.unpack_from("<I", data, offset + size + 1)
        if unmask_crc(stored) != crc32c(data[offset : offset + size + 1]):
            raise Corrupt(f"checksum mismatch in the block at offset {offset}")
    if kind == SNAPPY_COMPRESSION:
        raise Corrupt(
            f"the block at offset {offset} is snappy-compressed; litebert reads only uncompressed tables "
            "(TensorFlow writes checkpoint indexes uncompressed; re-save the checkpoint with TensorFlow's defaults)"
        )
    if kind != NO_COMPRESSION:
        raise Corrupt(f"unknown block compression type {kind} at offset {offset}")
    return block


def _read_table(data: bytes, verify: bool) -> Iterator[tuple[bytes, bytes]]:
    """Yield every (key, value) of an SSTable in key order."""
    if len(data) < FOOTER_SIZE:
        raise Corrupt(f"file is {len(data)} bytes, shorter than the {FOOTER_SIZE}-byte table footer (truncated?)")
    footer = data[-FOOTER_SIZE:]
    (magic,) = struct.unpack_from("<Q", footer, 40)
    if magic != TABLE_MAGIC:
        raise Corrupt(f"bad table magic {magic:#018x} (expected {TABLE_MAGIC:#018x}): not an index file or truncated")
    _metaindex, pos = _read_handle(footer, 0)
    index_handle, _ = _read_handle(footer, pos)
    for _sep, handle_bytes in _block_entries(_read_block(data, index_handle, verify)):
        handle, _ = _read_handle(handle_bytes, 0)
        yield from _block_entries(_read_block(data, handle, verify))


# ----------------------------------------------------------------------------------------------------------------
# Checkpoint reading.


def resolve_checkpoint_prefix(path: str | Path) -> Path:
    """Accept a prefix (`dir/model.ckpt-1000`), its `.index` or `.data-*` file, or a directory.

    A directory is resolved through its `checkpoint` state file (`model_checkpoint_path: "..."`), else its single
    `*.index` file, else TF-Hub's `variables/variables`.
    """
    p = Path(path)
    if p.is_dir():
        state = p / "checkpoint"
        if state.is_file():
            for line in state.read_text(errors="replace").splitlines():
                if line.startswith("model_checkpoint_path:"):
                    name = line.split(":", 1)[1].strip().strip('"')
                    cand = Path(name) if Path(name).is_absolute() else p / name
                    if cand.with_name(cand.name + ".index").is_file():
                        return cand
        indexes = sorted(p.glob("*.index"))
        if len(indexes) == 1:
            return indexes[0].with_suffix("")
        if (p / "variables" / "variables.index").is_file():
            return p / "variables" / "variables"
        if not indexes:
            raise CheckpointError(f"{p}: no TensorFlow checkpoint (*.index) in this directory")
        raise CheckpointError(
            f"{p}: several checkpoints ({', '.join(i.name for i in indexes)}) and no `checkpoint` state file; "
            "pass the prefix of the one you want, e.g. DIR/model.ckpt-125000"
        )
    if p.suffix == ".index":
        return p.with_suffix("")
    if ".data-" in p.name:
        return p.with_name(p.name.split(".data-")[0])
    if p.with_name(p.name + ".index").is_file():
        return p
    raise CheckpointError(f"{p}: no TensorFlow checkpoint here (expected {p.name}.index and {p.name}.data-*)")


def shard_path(prefix: Path, shard: int, num_shards: int) -> Path:
    return prefix.with_name(f"{prefix.name}.data-{shard:05d}-of-{num_shards:05d}")


class CheckpointReader:
    """Random access to the tensors of one TF checkpoint.

    `names()` lists the readable tensors; `unreadable` maps the others (partitioned variables, resource/variant or
    quantized dtypes) to the reason. `get_tensor` verifies the stored CRC-32C when `verify` is true.
    bfloat16 tensors come back as float32; string tensors as object arrays of `bytes`.
    """

    def __init__(self, path: str | Path, *, verify: bool = True):
        self.prefix = resolve_checkpoint_prefix(path)
        self.index_path = self.prefix.with_name(self.prefix.name + ".index")
        self.verify = verify
        try:
            data = self.index_path.read_bytes()
        except OSError as e:
            raise CheckpointError(f"{self.index_path}: cannot read the checkpoint index ({e.strerror})") from e
        self.entries: dict[str, TensorEntry] = {}
        self.unreadable: dict[str, str] = {}
        self.num_slice_entries = 0
        header = None
        try:
            for key, value in _read_table(data, verify):
                if key == b"":
                    header = _parse_header(value)
                elif key[:1] == b"\x00":
                    self.num_slice_entries += 1  # slice of a partitioned variable (OrderedCode-encoded key)
                else:
                    name = key.decode("utf-8", errors="replace")
                    self.entries[name] = _parse_entry(name, value)
        except Corrupt as e:
            raise CheckpointError(f"{self.index_path}: corrupt checkpoint index: {e}") from None
        if header is None:
            raise CheckpointError(f"{self.index_path}: no bundle header entry; not a TensorFlow V2 checkpoint index")
        self.header = header
        for name, entry in self.entries.items():
            if entry.num_slices:
                self.unreadable[name] = (
                    f"partitioned variable saved as {entry.num_slices} slices; re-save it unpartitioned "
                    "(e.g. restore into a graph without a partitioner and save again)"
                )
            elif entry.dtype not in TF_DTYPES:
                self.unreadable[name] = f"{entry.dtype_name} tensors hold no array data litebert can read"
            elif not 0 <= entry.shard_id < header.num_shards:
                raise CheckpointError(
                    f"{self.index_path}: tensor {name!r} is in shard {entry.shard_id}, but the header says "
                    f"{header.num_shards} shard(s)"
                )
        for shard in range(header.num_shards):
            shard_file = shard_path(self.prefix, shard, header.num_shards)
            if not shard_file.is_file():
                raise CheckpointError(f"{shard_file}: data shard missing (the index {self.index_path} needs it)")

    # -- queries --------------------------------------------------------------------------------------------------
    def names(self) -> list[str]:
        return [n for n in self.entries if n not in self.unreadable]

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def shape(self, name: str) -> tuple[int, ...]:
        return self._entry(name).shape

    def _entry(self, name: str) -> TensorEntry:
        if name not in self.entries:
            raise CheckpointError(f"{self.index_path}: no tensor named {name!r}")
        return self.entries[name]

    # -- data -----------------------------------------------------------------------------------------------------
    def get_tensor(self, name: str) -> np.ndarray:
        entry = self._entry(name)
        if name in self.unreadable:
            raise CheckpointError(f"{self.index_path}: cannot read tensor {name!r}: {self.unreadable[name]}")
        shard_file = shard_path(self.prefix, entry.shard_id, self.header.num_shards)
        where = f"{shard_file}: tensor {name!r} (offset {entry.offset}, {entry.size} bytes)"
        if entry.offset < 0 or entry.size < 0:
            raise CheckpointError(f"{where}: negative offset or size in the index {self.index_path}; it is corrupt")
        try:
            file_size = shard_file.stat().st_size
            if entry.offset + entry.size > file_size:  # checked before reading: a corrupt size could be huge
                raise CheckpointError(f"{where}: the file has only {file_size} bytes; the data file is truncated")
            with open(shard_file, "rb") as f:
                f.seek(entry.offset)
                raw = f.read(entry.size)
        except OSError as e:
            raise CheckpointError(f"{where}: cannot read ({e.strerror or e})") from None
        if len(raw) != entry.size:
            raise CheckpointError(f"{where}: file ends after {len(raw)} of its bytes; the data file is truncated")
        if self.verify and entry.crc32c is not None and unmask_crc(entry.crc32c) != crc32c(raw):
            raise CheckpointError(
                f"{where}: CRC-32C mismatch, the data file is corrupt (verify=False skips the check at your risk)"
            )
        try:
            return _decode_array(entry, raw, self.header.endianness)
        except Corrupt as e:
            raise CheckpointError(f"{where}: {e}") from None

    def read_all(self) -> dict[str, np.ndarray]:
        return {name: self.get_tensor(name) for name in self.names()}


def _decode_array(entry: TensorEntry, raw: bytes, endianness: str) -> np.ndarray:
    if any(d < 0 for d in entry.shape):
        raise Corrupt(f"negative dimension in shape {list(entry.shape)}")
    count = math.prod(entry.shape)
    # numpy refuses a shape whose non-zero dimensions multiply past its index range, even when one is 0
    if math.prod(d for d in entry.shape if d) * LARGEST_ITEMSIZE > np.iinfo(np.intp).max:
        raise Corrupt(f"shape {list(entry.shape)} is too large for any array")
    if entry.dtype == DT_STRING:
        return _decode_strings(raw, count).reshape(entry.shape)
    dtype = TF_DTYPES[entry.dtype][1]
    if endianness == "big":
        dtype = dtype.newbyteorder(">")
    if count * dtype.itemsize != len(raw):
        raise Corrupt(f"{len(raw)} bytes do not hold {entry.dtype_name} {list(entry.shape)}")
    arr = np.frombuffer(raw, dtype=dtype).reshape(entry.shape)
    if entry.dtype == DT_BFLOAT16:  # bfloat16 = the top 16 bits of a float32
        return (arr.astype(np.uint32) << 16).view(np.float32)
    return arr.astype(dtype.newbyteorder("="), copy=True)  # native order, writable, owns its memory


def _decode_strings(raw: bytes, count: int) -> np.ndarray:
    # [varint64 len_0 .. len_{n-1}] [4-byte masked crc32c of the lengths] [bytes_0 .. bytes_{n-1}]
    pos, lengths = 0, []
    for _ in range(count):
        n, pos = read_varint(raw, pos)
        lengths.append(n)
    pos += 4
    out = np.empty(count, dtype=object)
    for i, n in enumerate(lengths):
        if pos + n > len(raw):
            raise Corrupt("string element runs past the tensor's bytes")
        out[i] = raw[pos : pos + n]
        pos += n
    return out


def read_checkpoint(path: str | Path, *, verify: bool = True) -> dict[str, np.ndarray]:
    """All readable tensors of a checkpoint, by name (see `CheckpointReader.unreadable` for the rest)."""
    return CheckpointReader(path, verify=verify).read_all()


def list_variables(path: str | Path) -> list[tuple[str, tuple[int, ...], str]]:
    """(name, shape, dtype name) of every tensor, sorted by name, like `tf.train.list_variables`."""
    reader = CheckpointReader(path, verify=False)
    return [(n, e.shape, e.dtype_name) for n, e in reader.entries.items()]
