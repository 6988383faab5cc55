"""Fixture writers: fake TensorFlow checkpoints for the conversion tests (the library only reads them).

`write_checkpoint` writes a TF V2 tensor bundle the way TensorFlow's BundleWriter does (for one shard the files
are byte-identical to TensorFlow's: test_tf_checkpoint checks it against checkpoints TensorFlow wrote), and
`hf_to_tf_tensors` renames a Hugging Face ALBERT state dict back to the official TF variable names, the inverse
of the official name table in litebert.convert.tf_map.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch

from litebert.convert.tf_bundle import (DT_BFLOAT16, DT_STRING, NO_COMPRESSION, TABLE_MAGIC, TF_DTYPES, crc32c,
                                        mask_crc, shard_path)
from litebert.convert.tf_map import RULES, compile_template
from litebert.errors import CheckpointError, ConversionError
from litebert.protowire import pb_bytes, pb_fixed32, pb_varint, varint

# numpy -> TF enum for writing (bfloat16 excluded: numpy has no such dtype, so "<u2" stays uint16)
_NUMPY_TO_TF = {v[1]: k for k, v in TF_DTYPES.items() if v[1] is not None and k != DT_BFLOAT16}

# ---------------------------------------------------------------------------------------------------- the bundle


def encode_entry(dtype: int, shape: tuple[int, ...], shard: int, offset: int, size: int, crc: int) -> bytes:
    """A serialized BundleEntryProto (the value of one tensor's key in the .index table)."""
    dims = b"".join(pb_bytes(2, pb_varint(1, d) if d else b"") for d in shape)
    out = pb_varint(1, dtype) + pb_bytes(2, dims)
    if shard:
        out += pb_varint(3, shard)
    if offset:
        out += pb_varint(4, offset)
    if size:
        out += pb_varint(5, size)
    return out + pb_fixed32(6, crc)


def encode_header(num_shards: int) -> bytes:
    """A serialized BundleHeaderProto (the value of the key "" in the .index table)."""
    return pb_varint(1, num_shards) + pb_bytes(3, pb_varint(1, 1))  # version {producer: 1}


def _encode_strings(arr: np.ndarray) -> bytes:
    items = [x if isinstance(x, bytes) else str(x).encode("utf-8") for x in arr.ravel().tolist()]
    lengths = b"".join(varint(len(x)) for x in items)
    return lengths + struct.pack("<I", mask_crc(crc32c(lengths))) + b"".join(items)



def _shortest_separator(start: bytes, limit: bytes) -> bytes:
    """A short key k with start <= k < limit (LevelDB's BytewiseComparator::FindShortestSeparator)."""
    n = min(len(start), len(limit))
    i = 0
    while i < n and start[i] == limit[i]:
        i += 1
    if i < n and start[i] < 0xFF and start[i] + 1 < limit[i]:
        return start[:i] + bytes([start[i] + 1])
    return start


def _short_successor(key: bytes) -> bytes:
    """A short key >= key (LevelDB's FindShortSuccessor): bump the first byte that is not 0xff."""
    for i, b in enumerate(key):
        if b != 0xFF:
            return key[:i] + bytes([b + 1])
    return key


class _BlockBuilder:
    def __init__(self, restart_interval: int):
        self.restart_interval = restart_interval
        self.buf = bytearray()
        self.restarts = [0]
        self.count = 0  # entries since the last restart
        self.last_key = b""
        self.empty = True

    def add(self, key: bytes, value: bytes) -> None:
        shared = 0
        if self.count < self.restart_interval:
            n = min(len(key), len(self.last_key))
            while shared < n and key[shared] == self.last_key[shared]:
                shared += 1
        else:
            self.restarts.append(len(self.buf))
            self.count = 0
        self.buf += varint(shared) + varint(len(key) - shared) + varint(len(value))
        self.buf += key[shared:] + value
        self.last_key, self.count, self.empty = key, self.count + 1, False

    def size_estimate(self) -> int:
        return len(self.buf) + 4 * len(self.restarts) + 4

    def finish(self) -> bytes:
        n = len(self.restarts)
        return bytes(self.buf) + struct.pack(f"<{n + 1}I", *self.restarts, n)


class TableWriter:
    """Writes an SSTable the way TF's table_builder does (uncompressed blocks, LevelDB key shortening)."""

    def __init__(self, block_size: int, restart_interval: int):
        self.block_size, self.restart_interval = block_size, restart_interval
        self.out = bytearray()
        self.data_block = _BlockBuilder(restart_interval)
        self.index_block = _BlockBuilder(1)
        self.pending_handle: tuple[int, int] | None = None
        self.last_key = b""

    def _write_block(self, contents: bytes) -> tuple[int, int]:
        handle = (len(self.out), len(contents))
        trailer = bytes([NO_COMPRESSION])
        self.out += contents + trailer + struct.pack("<I", mask_crc(crc32c(contents + trailer)))
        return handle

    def _add_index_entry(self, separator: bytes) -> None:
        offset, size = self.pending_handle
        self.index_block.add(separator, varint(offset) + varint(size))
        self.pending_handle = None

    def add(self, key: bytes, value: bytes) -> None:
        if self.pending_handle is not None:
            self._add_index_entry(_shortest_separator(self.last_key, key))
        self.data_block.add(key, value)
        self.last_key = key
        if self.data_block.size_estimate() >= self.block_size:
            self._flush()

    def _flush(self) -> None:
        if not self.data_block.empty:
            self.pending_handle = self._write_block(self.data_block.finish())
            self.data_block = _BlockBuilder(self.restart_interval)

    def finish(self) -> bytes:
        self._flush()
        metaindex = self._write_block(_BlockBuilder(self.restart_interval).finish())
        if self.pending_handle is not None:
            self._add_index_entry(_short_successor(self.last_key))
        index = self._write_block(self.index_block.finish())
        handles = b"".join(varint(x) for x in (*metaindex, *index))
        self.out += handles + bytes(40 - len(handles)) + struct.pack("<Q", TABLE_MAGIC)
        return bytes(self.out)


def _tensor_bytes(name: str, arr: np.ndarray) -> tuple[int, bytes]:
    if arr.dtype == object or arr.dtype.kind in "SU":
        return DT_STRING, _encode_strings(arr)
    little = arr.dtype.newbyteorder("<") if arr.dtype.byteorder in "=><" else arr.dtype
    if little not in _NUMPY_TO_TF:
        raise CheckpointError(f"tensor {name!r}: numpy dtype {arr.dtype} has no TensorFlow equivalent to write")
    return _NUMPY_TO_TF[little], np.ascontiguousarray(arr, dtype=little).tobytes()


def write_checkpoint(
    prefix: str | Path,
    tensors: Mapping[str, np.ndarray],
    *,
    num_shards: int = 1,
    block_size: int = 262144,
    restart_interval: int = 16,
) -> Path:
    """Write `tensors` as a TF V2 checkpoint: PREFIX.index + PREFIX.data-0000N-of-0000M. Returns the index path.

    Entries are sorted by name (bytewise) and stored back to back, each with its masked CRC-32C; the header entry ""
    records the shard count, little-endian, version producer 1, as TF's BundleWriter does (for one shard the files
    are byte-identical to TensorFlow's). `num_shards` > 1 deals tensors round-robin over shards and a small
    `block_size` splits the index into several data blocks; both exist to exercise readers.
    """
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    keys = sorted(tensors, key=lambda n: n.encode("utf-8"))
    if any(not k for k in keys):
        raise CheckpointError(f"{prefix}: the empty tensor name is reserved for the bundle header")
    table = TableWriter(block_size, restart_interval)
    table.add(b"", encode_header(num_shards))
    files = [open(shard_path(prefix, i, num_shards), "wb") for i in range(num_shards)]
    offsets = [0] * num_shards
    try:
        for i, name in enumerate(keys):
            dtype, raw = _tensor_bytes(name, np.asarray(tensors[name]))
            shard = i % num_shards
            files[shard].write(raw)
            shape = tuple(int(d) for d in np.shape(tensors[name]))
            entry = encode_entry(dtype, shape, shard, offsets[shard], len(raw), mask_crc(crc32c(raw)))
            table.add(name.encode("utf-8"), entry)
            offsets[shard] += len(raw)
    finally:
        for f in files:
            f.close()
    index_path = prefix.with_name(prefix.name + ".index")
    index_path.write_bytes(table.finish())
    return index_path


# ---------------------------------------------------------------------------------------------------- the names

# HF name pattern -> (official TF template, transpose): the official table read backwards.
_INVERSE_RULES = [(compile_template(hf), tf, t) for _, tf, hf, t in RULES["official"]]


def hf_to_tf_tensors(state_dict: dict[str, torch.Tensor], config: dict) -> dict[str, np.ndarray]:
    """HF ALBERT state dict -> official TF variable names (the inverse of the official table).

    Tied decoder copies are dropped; an identity `embedding_hidden_mapping_in` is dropped when
    embedding_size == hidden_size (the official graph has none); anything else without a TF name raises.
    """
    out: dict[str, np.ndarray] = {}
    for hf, tensor in state_dict.items():
        arr = tensor.detach().cpu().numpy()
        if hf in ("predictions.decoder.weight", "predictions.decoder.bias"):
            continue
        square = config["embedding_size"] == config["hidden_size"]
        if square and hf.startswith("albert.encoder.embedding_hidden_mapping_in."):
            ident = np.eye(config["hidden_size"], dtype=arr.dtype) if hf.endswith("weight") else np.zeros_like(arr)
            if not np.array_equal(arr, ident):
                raise ConversionError(f"{hf} is not the identity, and official ALBERT has none when E == H")
            continue
        for pattern, tf, transpose in _INVERSE_RULES:
            m = pattern.match(hf)
            if m:
                out[tf.format(**m.groupdict())] = np.ascontiguousarray(arr.T if transpose else arr)
                break
        else:
            raise ConversionError(f"{hf} has no official TF variable name")
    return out
