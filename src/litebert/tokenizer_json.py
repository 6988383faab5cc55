"""Tokenizer directories saved by transformers 5: `tokenizer.json` + `tokenizer_config.json`, with no `spiece.model`
and no `vocab.txt`. We turn them back into the file our tokenizers read, so tokenization stays official-exact.

- Unigram (ALBERT): `tokenizer.json` keeps everything the SentencePiece encoder uses: every piece with its score
  in id order, which ids are special (control) or user-defined (HF's non-special added tokens), the unk id, and the
  normalizer's precompiled character map (base64 of the same bytes as the model's `precompiled_charsmap`). From
  them we write a SentencePiece `ModelProto` (the schema sentencepiece ships in `sentencepiece_model.proto`) with
  the protobuf wire helpers of `protowire`, so no protobuf package is needed. What the file lacks is
  training-only (the trainer's input, sizes, seeds): the rebuilt model encodes like the original but is not
  byte-identical to it, so its fingerprint differs from the original `spiece.model`'s.
  transformers' own normalizers in `tokenizer.json` (the ``-to-" replacement, NFKD, accent strip, lower-case) are
  its emulation of ALBERT's `preprocess_text`; we do not apply them: `AlbertTokenizer` runs the official
  `preprocess_text` with the flags of `tokenizer_config.json`, as it does for a `spiece.model` directory.
- WordPiece (BERT / Chinese ALBERT): the vocabulary in id order is `vocab.txt`, one token a line.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from pathlib import Path

from litebert.errors import TokenizerError
from litebert.files import read_json
from litebert.protowire import pb_bytes, pb_fixed32, pb_varint

TOKENIZER_JSON = "tokenizer.json"

# sentencepiece_model.proto field numbers and enum values.
_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED, _BYTE = 1, 2, 3, 4, 6
_UNIGRAM = 1
_BYTE_PIECE = re.compile(r"^<0x[0-9A-F]{2}>$")


def read_tokenizer_json(directory: Path) -> tuple[str, bytes]:
    """("spm", SentencePiece model bytes) or ("wordpiece", vocab.txt bytes) for a transformers-5 directory."""
    path = directory / TOKENIZER_JSON
    data = read_json(path, TokenizerError, expect=dict)
    model = data.get("model")
    kind = model.get("type") if isinstance(model, dict) else None
    if kind == "Unigram":
        return "spm", spm_model_from_unigram(data, path)
    if kind == "WordPiece":
        return "wordpiece", wordpiece_vocab(model, path)
    raise TokenizerError(f"{path}: model type {kind!r}; litebert reads Unigram (ALBERT SentencePiece) and WordPiece "
                         "(BERT / Chinese ALBERT) tokenizers")


def wordpiece_vocab(model: dict, path: Path) -> bytes:
    vocab = model.get("vocab")
    if not isinstance(vocab, dict) or not vocab:
        raise TokenizerError(f"{path}: model.vocab should be a non-empty {{token: id}} object")
    by_id = sorted((i, t) for t, i in vocab.items())
    if [i for i, _ in by_id] != list(range(len(by_id))):
        raise TokenizerError(f"{path}: WordPiece ids are not 0..{len(by_id) - 1} without gaps")
    bad = next((t for _, t in by_id if "\n" in t), None)
    if bad is not None:
        raise TokenizerError(f"{path}: token {bad!r} holds a newline and cannot be written as a vocab.txt line")
    return "".join(t + "\n" for _, t in by_id).encode("utf-8")


def spm_model_from_unigram(data: dict, path: Path) -> bytes:
    """A SentencePiece ModelProto (serialized) holding the pieces, scores, types and normalizer of tokenizer.json."""
    model = data["model"]
    vocab, unk_id = model.get("vocab"), model.get("unk_id")
    if not isinstance(vocab, list) or not vocab:
        raise TokenizerError(f"{path}: model.vocab should be a non-empty list of [piece, score]")
    if not isinstance(unk_id, int) or not 0 <= unk_id < len(vocab):
        raise TokenizerError(f"{path}: model.unk_id {unk_id!r} is not an id of the vocab ({len(vocab)} pieces)")
    added = {}
    for tok in data.get("added_tokens") or []:
        if tok.get("id", -1) < len(vocab) and vocab[tok["id"]][0] == tok.get("content"):
            added[tok["id"]] = _CONTROL if tok.get("special") else _USER_DEFINED
    byte_fallback = bool(model.get("byte_fallback"))
    pieces = []
    for i, row in enumerate(vocab):
        if not (isinstance(row, list) and len(row) == 2 and isinstance(row[0], str)
                and isinstance(row[1], (int, float))):
            raise TokenizerError(f"{path}: model.vocab[{i}] = {row!r}; expected [piece, score]")
        piece, score = row
        kind = _UNKNOWN if i == unk_id else added.get(i, _NORMAL)
        if byte_fallback and _BYTE_PIECE.match(piece):
            kind = _BYTE
        pieces.append(pb_bytes(1, pb_bytes(1, piece.encode("utf-8"))
                                + pb_fixed32(2, struct.unpack("<I", struct.pack("<f", score))[0])
                                + pb_varint(3, kind)))
    pad = next((i for i, (p, _) in enumerate(vocab) if p == "<pad>" and added.get(i) == _CONTROL), -1)
    trainer = (pb_varint(3, _UNIGRAM) + pb_varint(4, len(vocab)) + pb_varint(35, byte_fallback)
               + pb_varint(40, unk_id) + pb_varint(41, -1) + pb_varint(42, -1) + pb_varint(43, pad)
               + pb_bytes(45, vocab[unk_id][0].encode("utf-8")))
    return b"".join(pieces) + pb_bytes(2, trainer) + pb_bytes(3, _normalizer_spec(data, path))


def _normalizer_spec(data: dict, path: Path) -> bytes:
    """The precompiled char map (if any), dummy prefix from the Metaspace pre-tokenizer, whitespace handling."""
    charsmap = b""
    for step in _steps(data.get("normalizer"), "normalizers"):
        if step.get("type") == "Precompiled":
            try:
                charsmap = base64.b64decode(step.get("precompiled_charsmap") or "", validate=True)
            except (binascii.Error, ValueError) as exc:
                raise TokenizerError(f"{path}: normalizer precompiled_charsmap is not base64 ({exc})") from None
    pre = _steps(data.get("pre_tokenizer"), "pretokenizers")
    metaspace = next((s for s in pre if s.get("type") == "Metaspace"), None)
    if metaspace is None:
        raise TokenizerError(f"{path}: a Unigram tokenizer without a Metaspace pre-tokenizer is not a SentencePiece "
                             "model; litebert cannot rebuild it")
    dummy_prefix = metaspace.get("prepend_scheme", "always") != "never" and metaspace.get("add_prefix_space", True)
    collapse = any(s.get("type") == "WhitespaceSplit" for s in pre)
    return (pb_bytes(1, b"nmt_nfkc" if charsmap else b"identity") + pb_bytes(2, charsmap)
            + pb_varint(3, bool(dummy_prefix)) + pb_varint(4, collapse) + pb_varint(5, 1))


def _steps(node, key: str) -> list[dict]:
    """The steps of a normalizer / pre-tokenizer: a Sequence's list, a single step, or none."""
    if not isinstance(node, dict):
        return []
    if node.get("type") == "Sequence":
        return [s for s in node.get(key) or [] if isinstance(s, dict)]
    return [node]
