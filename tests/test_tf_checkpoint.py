"""The pure-numpy TF tensor-bundle reader (and the tests' writer), checked against checkpoints written by TensorFlow itself."""

import shutil
import struct

import numpy as np
import pytest
import torch

from litebert.convert import tf_bundle
from litebert.convert.tf_bundle import (
    CheckpointReader,
    crc32c,
    list_variables,
    mask_crc,
    read_checkpoint,
    resolve_checkpoint_prefix,
    unmask_crc,
)
from litebert.errors import CheckpointError
from litebert.protowire import pb_bytes
from tf_fixtures import TableWriter, encode_entry, encode_header, write_checkpoint

GOLDEN = ("tiny", "grouped")


def _golden(shared_data, name):
    return shared_data / "albert-tf-golden" / name / "model.ckpt"


def _copy_golden(shared_data, name, dst):
    for f in (shared_data / "albert-tf-golden" / name).glob("model.ckpt.*"):
        shutil.copy(f, dst / f.name)
        (dst / f.name).chmod(0o644)
    return dst / "model.ckpt"


# ---------------------------------------------------------------------------------------------------- crc32c


def test_crc32c_published_vectors():
    # RFC 3720 (iSCSI) appendix B.4 test vectors and the common "123456789" check value.
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(bytes(32)) == 0x8A9136AA
    assert crc32c(b"\xff" * 32) == 0x62A8AB43
    assert crc32c(bytes(range(32))) == 0x46DD794E
    assert crc32c(bytes(range(31, -1, -1))) == 0x113FDB5C


@pytest.mark.parametrize("n", [0, 1, 16383, 16384, 16385, 70001, 1 << 20])
def test_crc32c_long_buffers_and_extend(n):
    # The numpy lane path (long buffers) must agree with chaining short pieces through `crc` (the plain loop).
    data = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8).tobytes()
    chained = 0
    for i in range(0, n, 5000):
        chained = crc32c(data[i : i + 5000], chained)
    assert crc32c(data) == chained


def test_mask_roundtrip():
    for v in (0, 1, 0xFFFFFFFF, 0xE3069283, 0x12345678):
        assert unmask_crc(mask_crc(v)) == v


# ---------------------------------------------------------------------------------------------------- real TF files


@pytest.mark.parametrize("name", GOLDEN)
def test_reads_tensorflow_written_checkpoints(shared_data, name):
    import json

    cfg = json.loads((shared_data / "albert-tf-golden" / name / "albert_config.json").read_text())
    reader = CheckpointReader(_golden(shared_data, name))  # verify=True: every block and tensor CRC checked
    assert reader.header.num_shards == 1 and reader.header.endianness == "little"
    assert reader.unreadable == {} and reader.num_slice_entries == 0
    tensors = reader.read_all()
    assert tensors["bert/embeddings/word_embeddings"].shape == (cfg["vocab_size"], cfg["embedding_size"])
    assert tensors["bert/pooler/dense/kernel"].shape == (cfg["hidden_size"], cfg["hidden_size"])
    groups = {n.split("/")[3] for n in tensors if n.startswith("bert/encoder/transformer/")}
    assert len(groups) == cfg["num_hidden_groups"]
    assert all(t.dtype == np.float32 and t.flags.writeable for t in tensors.values())
    listed = list_variables(_golden(shared_data, name))
    assert [n for n, _, _ in listed] == sorted(tensors)
    assert all(shape == tensors[n].shape and dt == "float32" for n, shape, dt in listed)


@pytest.mark.parametrize("name", GOLDEN)
def test_writer_is_byte_identical_to_tensorflow(shared_data, name, tmp_path):
    src = _golden(shared_data, name)
    write_checkpoint(tmp_path / "model.ckpt", read_checkpoint(src))
    for suffix in (".index", ".data-00000-of-00001"):
        ours = (tmp_path / f"model.ckpt{suffix}").read_bytes()
        assert ours == src.with_name(src.name + suffix).read_bytes(), suffix


# ---------------------------------------------------------------------------------------------------- round trips


def _assorted():
    rng = np.random.default_rng(0)
    return {
        "a/float32": rng.standard_normal((3, 5)).astype(np.float32),
        "a/float16": rng.standard_normal(7).astype(np.float16),
        "a/float64": rng.standard_normal((2, 2, 2)),
        "b/int32": rng.integers(-9, 9, (4,), dtype=np.int32),
        "b/int64": np.array(123456789012, dtype=np.int64),  # scalar, like global_step
        "b/uint8": rng.integers(0, 255, (6,), dtype=np.uint8),
        "b/int8": rng.integers(-100, 100, (6,), dtype=np.int8),
        "b/int16": rng.integers(-999, 999, (6,), dtype=np.int16),
        "c/bool": np.array([True, False, True]),
        "c/complex64": (rng.standard_normal(3) + 1j * rng.standard_normal(3)).astype(np.complex64),
        "c/empty": np.zeros((0, 4), dtype=np.float32),
        "d/strings": np.array([b"", b"hello", "h\u00e9".encode()], dtype=object),
        "d/big": rng.standard_normal((300, 100)).astype(np.float32),  # > 16 KiB: the vectorized crc path
        "z/" + "long_name/" * 20: np.arange(3, dtype=np.float32),
    }


@pytest.mark.parametrize("num_shards,block_size,restart", [(1, 262144, 16), (3, 64, 2), (2, 1, 1)])
def test_roundtrip_dtypes_shards_and_blocks(tmp_path, num_shards, block_size, restart):
    tensors = _assorted()
    write_checkpoint(tmp_path / "m", tensors, num_shards=num_shards, block_size=block_size, restart_interval=restart)
    reader = CheckpointReader(tmp_path / "m")
    assert reader.header.num_shards == num_shards
    assert sorted(reader.names()) == sorted(tensors)
    for name, want in tensors.items():
        got = reader.get_tensor(name)
        assert got.shape == want.shape, name
        if want.dtype == object:
            assert got.tolist() == want.tolist()
        else:
            assert got.dtype == want.dtype and np.array_equal(got, want), name
    assert {reader.entries[n].shard_id for n in tensors} == set(range(num_shards))


def test_bfloat16_reads_as_float32(tmp_path):
    # Write the raw bfloat16 bits under dtype enum 14 and compare with torch's own bfloat16 -> float32 conversion.
    values = torch.tensor([1.0, -2.5, 3.14159, 1e-3, 65504.0]).to(torch.bfloat16)
    raw = values.view(torch.int16).numpy().tobytes()
    table = TableWriter(262144, 16)
    table.add(b"", encode_header(1))
    table.add(b"w", encode_entry(14, (5,), 0, 0, len(raw), mask_crc(crc32c(raw))))
    (tmp_path / "m.data-00000-of-00001").write_bytes(raw)
    (tmp_path / "m.index").write_bytes(table.finish())
    got = CheckpointReader(tmp_path / "m").get_tensor("w")
    assert got.dtype == np.float32
    assert np.array_equal(got, values.float().numpy())


# ---------------------------------------------------------------------------------------------------- errors


def test_partitioned_variable_is_named(tmp_path):
    raw = np.zeros(4, np.float32).tobytes()
    entry = encode_entry(1, (4,), 0, 0, len(raw), mask_crc(crc32c(raw))) + pb_bytes(7, b"")
    table = TableWriter(262144, 16)
    table.add(b"", encode_header(1))
    table.add(b"\x00slice-key", encode_entry(1, (4,), 0, 0, len(raw), mask_crc(crc32c(raw))))
    table.add(b"bert/embeddings/word_embeddings", entry)
    (tmp_path / "m.data-00000-of-00001").write_bytes(raw)
    (tmp_path / "m.index").write_bytes(table.finish())
    reader = CheckpointReader(tmp_path / "m")
    assert reader.num_slice_entries == 1 and reader.names() == []
    with pytest.raises(CheckpointError, match=r"m\.index.*word_embeddings.*partitioned"):
        reader.get_tensor("bert/embeddings/word_embeddings")


def test_truncated_data_file(shared_data, tmp_path):
    prefix = _copy_golden(shared_data, "tiny", tmp_path)
    data = tmp_path / "model.ckpt.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:-100])
    reader = CheckpointReader(prefix)
    with pytest.raises(CheckpointError, match=r"data-00000-of-00001: tensor 'cls/seq_relationship.*truncated"):
        reader.read_all()


def test_corrupt_data_byte_fails_crc_unless_not_verifying(shared_data, tmp_path):
    prefix = _copy_golden(shared_data, "tiny", tmp_path)
    data = tmp_path / "model.ckpt.data-00000-of-00001"
    buf = bytearray(data.read_bytes())
    buf[10] ^= 0x40  # inside bert/embeddings/LayerNorm/beta (offset 0, 64 bytes)
    data.write_bytes(bytes(buf))
    with pytest.raises(CheckpointError, match=r"data-00000-of-00001: tensor 'bert/embeddings/LayerNorm/beta'.*CRC"):
        CheckpointReader(prefix).get_tensor("bert/embeddings/LayerNorm/beta")
    CheckpointReader(prefix, verify=False).get_tensor("bert/embeddings/LayerNorm/beta")


@pytest.mark.parametrize(
    "damage,message",
    [
        (lambda b: b[:-10], "magic"),
        (lambda b: b[:20], "shorter than"),
        (lambda b: b[:40] + bytes([b[40] ^ 1]) + b[41:], "checksum mismatch"),
        (lambda b: b"", "shorter than"),
    ],
)
def test_corrupt_index(shared_data, tmp_path, damage, message):
    prefix = _copy_golden(shared_data, "tiny", tmp_path)
    index = tmp_path / "model.ckpt.index"
    index.write_bytes(damage(index.read_bytes()))
    with pytest.raises(CheckpointError, match=rf"model\.ckpt\.index: corrupt checkpoint index: .*{message}"):
        CheckpointReader(prefix)


def test_snappy_block_is_refused_clearly(tmp_path):
    write_checkpoint(tmp_path / "m", {"x": np.ones(3, np.float32)})
    buf = bytearray((tmp_path / "m.index").read_bytes())
    # Layout: [data block][type][crc] [metaindex block][type][crc] [index block][type][crc] [footer].
    (metaindex_offset, _), _ = tf_bundle._read_handle(bytes(buf[-48:]), 0)
    kind = metaindex_offset - 5  # the data block's compression-type byte
    buf[kind] = 1  # snappy
    buf[kind + 1 : kind + 5] = struct.pack("<I", mask_crc(crc32c(bytes(buf[: kind + 1]))))  # keep the crc valid
    (tmp_path / "m.index").write_bytes(bytes(buf))
    with pytest.raises(CheckpointError, match="snappy"):
        CheckpointReader(tmp_path / "m")


def test_missing_shard_is_named(shared_data, tmp_path):
    prefix = _copy_golden(shared_data, "tiny", tmp_path)
    (tmp_path / "model.ckpt.data-00000-of-00001").unlink()
    with pytest.raises(CheckpointError, match=r"model\.ckpt\.data-00000-of-00001: data shard missing"):
        CheckpointReader(prefix)


def test_resolve_prefix(tmp_path):
    for step in (1, 2):
        write_checkpoint(tmp_path / f"model.ckpt-{step}", {"x": np.zeros(1, np.float32)})
    with pytest.raises(CheckpointError, match="several checkpoints"):
        resolve_checkpoint_prefix(tmp_path)
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-2"\nall_model_checkpoint_paths: "x"\n')
    assert resolve_checkpoint_prefix(tmp_path) == tmp_path / "model.ckpt-2"
    assert resolve_checkpoint_prefix(tmp_path / "model.ckpt-1.index") == tmp_path / "model.ckpt-1"
    assert resolve_checkpoint_prefix(tmp_path / "model.ckpt-1.data-00000-of-00001") == tmp_path / "model.ckpt-1"
    with pytest.raises(CheckpointError, match="no TensorFlow checkpoint"):
        resolve_checkpoint_prefix(tmp_path / "nope")
    with pytest.raises(CheckpointError, match="cannot read tensor|no tensor named"):
        CheckpointReader(tmp_path / "model.ckpt-1").get_tensor("y")
