"""`tokenizer.json`, the tokenizers library's format, both ways.

Writing: every tokenizer directory we save carries a `tokenizer.json` that makes stock transformers (which loads
it in preference to `spiece.model` / `vocab.txt`) produce litebert's ids. transformers' own conversion of an ALBERT
`spiece.model` departs from the official tokenization: it matches the user-defined symbols ("." "-" "(" ...) as
added tokens before SentencePiece sees the text (so " ." loses its "▁" piece), replaces doubled backticks and
quotes, strips every Unicode mark (the official code drops only combining-class marks) and ignores the digit-comma
re-split. The file we write spells out the official pipeline in the library's own steps instead; which steps, and
what they stand for, is in `unigram_tokenizer_json` and `wordpiece_tokenizer_json`.

Reading: directories saved by transformers 5: `tokenizer.json` + `tokenizer_config.json`, with no `spiece.model`
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
import math
import re
import struct
from pathlib import Path

from litebert.errors import TokenizerError
from litebert.files import read_json
from litebert.protowire import Corrupt, pb_bytes, pb_fixed32, pb_varint, read_fields

TOKENIZER_JSON = "tokenizer.json"

# sentencepiece_model.proto field numbers and enum values.
_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED, _BYTE = 1, 2, 3, 4, 6
_UNIGRAM = 1
_BYTE_PIECE = re.compile(r"^<0x[0-9A-F]{2}>$")
SPIECE_UNDERLINE = "▁"
# How far below its own score tokenizer.json stores a piece the official tokenizer never emits (one ending in a
# digit then a comma): no segmentation takes it then, and the reader adds it back. transformers' older conversion
# set such pieces to -100 for the same reason. SentencePiece's unknown-piece penalty is 10 below the lowest normal
# score, tokenizers' 10 below the lowest of the whole vocab: with ALBERT's 30k model, -123 there instead of -23.5,
# which matters only where an unknown character could also be covered by a longer piece (no official text).
COMMA_PIECE_OFFSET = 100.0


def read_tokenizer_json(directory: Path) -> tuple[str, bytes]:
    """("spm", SentencePiece model bytes) or ("wordpiece", vocab.txt bytes) for a transformers-5 directory."""
    path = directory / TOKENIZER_JSON
    data = read_json(path, TokenizerError, expect=dict)
    model = data.get("model")
    kind = model.get("type") if isinstance(model, dict) else None
    if kind == "Unigram":
        _check_steps(data, path)
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
    for i, row in enumerate(vocab):
        if not (isinstance(row, list) and len(row) == 2 and isinstance(row[0], str)
                and isinstance(row[1], (int, float)) and not isinstance(row[1], bool)):
            raise TokenizerError(f"{path}: model.vocab[{i}] = {row!r}; expected [piece, score]")
    added = _added_kinds(data.get("added_tokens"), vocab, path)
    ours = _written_here(data)
    byte_fallback = bool(model.get("byte_fallback"))
    pieces = []
    for i, (piece, score) in enumerate(vocab):
        kind = _UNKNOWN if i == unk_id else added.get(i, _NORMAL)
        if ours and kind == _NORMAL and score == 0.0:
            kind = _USER_DEFINED  # a trained piece's score is a log probability, below 0
        if ours and is_comma_piece(piece):
            score += COMMA_PIECE_OFFSET
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


def _added_kinds(tokens, vocab: list, path: Path) -> dict[int, int]:
    """{id: piece type} of the added tokens: each must be a piece of the vocab, by id and content. One that is not
    (an id past the vocab, another piece's id) would be an id transformers gives and the SentencePiece model
    rebuilt here cannot: refused, not dropped."""
    if tokens is None:
        return {}
    if not isinstance(tokens, list):
        raise TokenizerError(f"{path}: added_tokens should be a list of objects, not {type(tokens).__name__}")
    kinds = {}
    for i, tok in enumerate(tokens):
        token_id = tok.get("id") if isinstance(tok, dict) else None
        if not isinstance(token_id, int) or isinstance(token_id, bool) or not isinstance(tok.get("content"), str):
            raise TokenizerError(f"{path}: added_tokens[{i}] = {tok!r:.120}; expected an object with an integer id and "
                                 "a string content")
        if not 0 <= token_id < len(vocab) or vocab[token_id][0] != tok["content"]:
            found = f"is {vocab[token_id][0]!r} there" if 0 <= token_id < len(vocab) else "is not one of its ids"
            raise TokenizerError(f"{path}: added_tokens[{i}] ({tok['content']!r}, id {token_id}) is not a piece of "
                                 f"model.vocab ({len(vocab)} pieces; id {token_id} {found}); litebert reads added "
                                 "tokens only as pieces of the SentencePiece vocabulary")
        kinds[token_id] = _CONTROL if tok.get("special") else _USER_DEFINED
    return kinds


def first_difference(found, expected, where: str = "") -> str | None:
    """Where two JSON values first differ ("model.vocab[14][0] is '▁zzz' where '▁the' was written"), or None when
    they agree. Numbers agree within float32 precision (1e-6 relative): that is what a score holds, and writers
    print them with other digits (transformers stores scores as float32 and prints them back)."""
    if isinstance(found, dict) and isinstance(expected, dict):
        for key in sorted(set(found) | set(expected), key=str):
            if key not in found or key not in expected:
                return f"{where}{'.' if where else ''}{key} is {'missing' if key not in found else 'not written'}"
            differs = first_difference(found[key], expected[key], f"{where}{'.' if where else ''}{key}")
            if differs:
                return differs
        return None
    if isinstance(found, list) and isinstance(expected, list):
        if len(found) != len(expected):
            return f"{where or 'the file'} has {len(found)} entries where {len(expected)} were written"
        return next((d for i, (a, b) in enumerate(zip(found, expected))
                     if (d := first_difference(a, b, f"{where}[{i}]"))), None)
    numbers = (int, float)
    if (isinstance(found, numbers) and isinstance(expected, numbers) and not isinstance(found, bool)
            and not isinstance(expected, bool)):
        same = math.isclose(found, expected, rel_tol=1e-6)
    else:
        same = type(found) is type(expected) and found == expected
    return None if same else f"{where or 'the file'} is {found!r:.80} where {expected!r:.80} was written"


def is_comma_piece(piece: str) -> bool:
    """A piece the official encode_pieces re-splits: its last two characters are a digit and a comma."""
    return len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()


def _written_here(data: dict) -> bool:
    """Whether `unigram_tokenizer_json` wrote this file: its normalizer adds the dummy prefix itself."""
    return any(s.get("type") == "Prepend" and s.get("prepend") == SPIECE_UNDERLINE
               for s in _steps(data.get("normalizer"), "normalizers"))


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
    normalizers = _steps(data.get("normalizer"), "normalizers")
    # transformers' conversion: the Metaspace step adds the dummy prefix and WhitespaceSplit drops extra spaces;
    # ours (unigram_tokenizer_json): a Prepend("▁") normalizer and a Replace of space runs.
    dummy_prefix = (metaspace.get("prepend_scheme", "always") != "never" and metaspace.get("add_prefix_space", True)
                    or _written_here(data))
    collapse = (any(s.get("type") == "WhitespaceSplit" for s in pre)
                or any(s.get("type") == "Replace" and s.get("pattern") == {"Regex": " {2,}"} for s in normalizers))
    return (pb_bytes(1, b"nmt_nfkc" if charsmap else b"identity") + pb_bytes(2, charsmap)
            + pb_varint(3, bool(dummy_prefix)) + pb_varint(4, collapse) + pb_varint(5, 1))


def _steps(node, key: str) -> list[dict]:
    """The steps of a normalizer / pre-tokenizer: a Sequence's list, a single step, or none. Of any other shape
    (transformers refuses it too) nothing is taken here; read_tokenizer_json has refused it already."""
    if not isinstance(node, dict):
        return []
    if node.get("type") == "Sequence":
        return [s for s in node.get(key) or [] if isinstance(s, dict)] if isinstance(node.get(key), list) else []
    return [node]


def _check_steps(data: dict, path: Path) -> None:
    """The normalizer and pre-tokenizer are null, a step object, or a Sequence of step objects."""
    for field, key in (("normalizer", "normalizers"), ("pre_tokenizer", "pretokenizers")):
        node = data.get(field)
        if node is None:
            continue
        steps = node.get(key) if isinstance(node, dict) and node.get("type") == "Sequence" else [node]
        if not isinstance(steps, list) or not all(isinstance(s, dict) and isinstance(s.get("type"), str)
                                                  for s in steps):
            raise TokenizerError(f"{path}: {field} = {node!r:.120}; expected a step object with a type, or a Sequence "
                                 f"of them in {key!r}")


# ----------------------------------------------------------------------------------------------------------------
# Writing


def regex_class(ranges: list[tuple[int, int]]) -> str:
    """An Oniguruma character class (the tokenizers library's regex engine) holding the code point ranges."""
    return "[" + "".join(f"\\x{{{a:X}}}" + (f"-\\x{{{b:X}}}" if b > a else "") for a, b in ranges) + "]"


def replace_step(pattern: str, content: str) -> dict:
    return {"type": "Replace", "pattern": {"Regex": pattern}, "content": content}


def _added(token_id: int, content: str) -> dict:
    """A special token, matched on the raw text."""
    return {"id": token_id, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": True}


def _template(cls: tuple[str, int], sep: tuple[str, int]) -> dict:
    """[CLS] A [SEP] (B [SEP]) with token types 0.. 1.., as our encode builds it."""
    def special(token, type_id):
        return {"SpecialToken": {"id": token, "type_id": type_id}}

    def seq(name, type_id):
        return {"Sequence": {"id": name, "type_id": type_id}}

    return {"type": "TemplateProcessing",
            "single": [special(cls[0], 0), seq("A", 0), special(sep[0], 0)],
            "pair": [special(cls[0], 0), seq("A", 0), special(sep[0], 0), seq("B", 1), special(sep[0], 1)],
            "special_tokens": {t: {"id": t, "ids": [i], "tokens": [t]} for t, i in (cls, sep)}}


def _document(normalizer: list[dict], pre_tokenizer: dict, decoder: dict, model: dict, added: list[dict],
              cls: tuple[str, int], sep: tuple[str, int]) -> dict:
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
            "normalizer": {"type": "Sequence", "normalizers": normalizer}, "pre_tokenizer": pre_tokenizer,
            "post_processor": _template(cls, sep), "decoder": decoder, "model": model}


def read_spm_proto(model: bytes, path: Path) -> dict:
    """The fields of a serialized SentencePiece ModelProto that encoding depends on: pieces as (piece, score,
    type), model type, unk id, byte fallback, the normalizer's char map and its whitespace switches."""
    out = {"pieces": [], "model_type": _UNIGRAM, "byte_fallback": False, "charsmap": b"", "add_dummy_prefix": True,
           "remove_extra_whitespaces": True, "escape_whitespaces": True, "split_by_whitespace": True,
           "treat_whitespace_as_suffix": False}
    try:
        for field, _, value in read_fields(model):
            if field == 1:  # SentencePiece {1: piece, 2: score, 3: type}
                piece, score, kind = "", 0.0, _NORMAL
                for f, _, v in read_fields(value):
                    if f == 1:
                        piece = v.decode("utf-8")
                    elif f == 2:
                        score = struct.unpack("<f", struct.pack("<I", v))[0]
                    elif f == 3:
                        kind = v
                out["pieces"].append((piece, score, kind))
            elif field == 2:  # TrainerSpec
                names = {3: "model_type", 35: "byte_fallback", 24: "treat_whitespace_as_suffix",
                         13: "split_by_whitespace"}
                for f, _, v in read_fields(value):
                    if f in names:
                        out[names[f]] = v if f == 3 else bool(v)
            elif field == 3:  # NormalizerSpec
                names = {2: "charsmap", 3: "add_dummy_prefix", 4: "remove_extra_whitespaces", 5: "escape_whitespaces"}
                for f, _, v in read_fields(value):
                    if f in names:
                        out[names[f]] = v if f == 2 else bool(v)
    except (Corrupt, UnicodeDecodeError) as exc:
        raise TokenizerError(f"{path}: not a readable SentencePiece model ({exc})") from None
    return out


def unigram_tokenizer_json(proto: dict, preprocess: list[dict], comma_pieces: set[int],
                           cls: tuple[str, int], sep: tuple[str, int]) -> dict | None:
    """tokenizer.json for an ALBERT SentencePiece model (`proto` from `read_spm_proto`), or None when the model is
    one the tokenizers library cannot reproduce (not Unigram, or whitespace handled otherwise than ALBERT's).

    - normalizer: `preprocess` (the official preprocess_text, from the caller), then SentencePiece's own
      normalizer: its precompiled char map, its whitespace rule (strip, collapse runs of spaces) and its dummy
      prefix "▁". Spaces become "▁" here too, so what the next steps see is what SentencePiece segments.
    - pre-tokenizer: split before each "▁". No piece holds a "▁" past its first character
      (`split_by_whitespace`), so segmenting word by word is the same Viterbi search.
    - model: Unigram with the pieces and scores. A user-defined piece ("." "(" "-" ...) stays a plain piece with
      its score (0: no normal piece holds those characters, so it is always segmented alone, as SentencePiece
      does). transformers' own conversion makes them added tokens, matched on the raw text ahead of
      normalization, which loses the "▁" of a space before them (" ." gives "." where SentencePiece gives "▁"
      "."). A piece the official tokenizer never emits, one ending in a digit then a comma ("▁1999,", which
      `encode_pieces` re-splits into "▁1999" ","), is stored COMMA_PIECE_OFFSET below its score: no path takes
      it, so the search itself picks the re-split form.
    - added tokens: the control pieces and <unk> ([CLS], [SEP], [MASK], <pad>, <unk>), special, matched on the
      raw text as transformers expects; each stretch between them is normalized on its own, dummy prefix
      included ("a [MASK] b" -> "▁a" [MASK] "▁b", as `inference.encode_with_masks` does).
    """
    pieces = proto["pieces"]
    if (proto["model_type"] != _UNIGRAM or not proto["escape_whitespaces"] or not proto["split_by_whitespace"]
            or proto["treat_whitespace_as_suffix"] or not pieces):
        return None
    unk_id = next((i for i, (_, _, kind) in enumerate(pieces) if kind == _UNKNOWN), None)
    if unk_id is None:
        return None
    vocab = [[piece, score - COMMA_PIECE_OFFSET if i in comma_pieces else score]
             for i, (piece, score, _) in enumerate(pieces)]
    normalizer = list(preprocess)
    if proto["charsmap"]:
        normalizer.append({"type": "Precompiled",
                           "precompiled_charsmap": base64.b64encode(proto["charsmap"]).decode("ascii")})
    if proto["remove_extra_whitespaces"]:
        normalizer += [replace_step(r"\A +| +\z", ""), replace_step(" {2,}", " ")]
    if proto["add_dummy_prefix"]:
        normalizer.append({"type": "Prepend", "prepend": SPIECE_UNDERLINE})
    normalizer.append(replace_step(" ", SPIECE_UNDERLINE))
    added = [_added(i, piece) for i, (piece, _, kind) in enumerate(pieces) if kind in (_CONTROL, _UNKNOWN)]
    split = {"type": "Metaspace", "replacement": SPIECE_UNDERLINE, "prepend_scheme": "never", "split": True}
    decoder = {"type": "Metaspace", "replacement": SPIECE_UNDERLINE, "prepend_scheme": "always", "split": True}
    model = {"type": "Unigram", "unk_id": unk_id, "vocab": vocab, "byte_fallback": proto["byte_fallback"]}
    return _document(normalizer, split, decoder, model, added, cls, sep)
