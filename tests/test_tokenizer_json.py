"""Tokenizer directories saved by transformers (tokenizer.json, no spiece.model / vocab.txt) load with
official-exact tokenization: checked against google-research/albert's own outputs on every shared text."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from litebert.errors import TokenizerError
from litebert.tokenizer import AlbertTokenizer, WordPieceTokenizer, load_tokenizer

transformers = pytest.importorskip("transformers")


def _saved_by_transformers(ours_dir: Path, out: Path) -> Path:
    """The directory transformers writes for our tokenizer. transformers 5 writes only tokenizer.json (+ config);
    4.x also writes spiece.model / vocab.txt, which we delete so the tokenizer.json path is what gets tested."""
    transformers.AutoTokenizer.from_pretrained(ours_dir).save_pretrained(out)
    for name in ("spiece.model", "vocab.txt"):
        (out / name).unlink(missing_ok=True)
    assert (out / "tokenizer.json").is_file()
    return out


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_sentencepiece_from_tokenizer_json_is_official_exact(shared_data, tmp_path):
    original = AlbertTokenizer(shared_data / "albert-vocab" / "30k-clean.model")
    hf_dir = _saved_by_transformers(original.save_pretrained(tmp_path / "ours"), tmp_path / "hf")
    tok = load_tokenizer(hf_dir)
    assert isinstance(tok, AlbertTokenizer) and tok.settings() == original.settings()
    rows = _rows(shared_data / "albert-vocab" / "official_tokenization.jsonl")
    assert len(rows) == 1397
    ids = tok.batch_encode([r["text"] for r in rows])["input_ids"]
    assert [r["text"][:60] for r, row_ids in zip(rows, ids) if row_ids != r["ids"]] == []
    assert [r["text"][:60] for r in rows[::25] if tok.tokenize(r["text"]) != r["pieces"]] == []
    # Every piece, score and type of the rebuilt model equals the original's.
    for i in range(original.vocab_size):
        assert (tok.sp.id_to_piece(i), tok.sp.get_score(i), tok.sp.is_control(i), tok.sp.is_unknown(i),
                tok.sp.is_unused(i)) == (original.sp.id_to_piece(i), original.sp.get_score(i),
                                         original.sp.is_control(i), original.sp.is_unknown(i),
                                         original.sp.is_unused(i)), i
    assert tok.special_ids == original.special_ids
    assert (tok.word_start_mask() == original.word_start_mask()).all()
    # Saving writes a real spiece.model, which loads like any other.
    again = load_tokenizer(tok.save_pretrained(tmp_path / "resaved"))
    assert (tmp_path / "resaved" / "spiece.model").is_file()
    assert again.batch_encode([r["text"] for r in rows[::5]])["input_ids"] == ids[::5]


def test_wordpiece_from_tokenizer_json_is_official_exact(shared_data, tmp_path):
    original = WordPieceTokenizer(shared_data / "chinese" / "albert_zh_vocab.txt")
    hf_dir = _saved_by_transformers(original.save_pretrained(tmp_path / "ours"), tmp_path / "hf")
    tok = load_tokenizer(hf_dir)
    assert isinstance(tok, WordPieceTokenizer) and tok.vocab_size == original.vocab_size
    rows = _rows(shared_data / "chinese" / "official_wordpiece_tokenization.jsonl")
    assert len(rows) == 1003
    ids = tok.batch_encode([r["text"] for r in rows])["input_ids"]
    assert [r["text"][:40] for r, row_ids in zip(rows, ids) if row_ids != r["ids"]] == []


def test_unreadable_tokenizer_json_is_named(tmp_path):
    (tmp_path / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE", "vocab": {}, "merges": []}}))
    with pytest.raises(TokenizerError, match=r"tokenizer.json: model type 'BPE'"):
        load_tokenizer(tmp_path)
    (tmp_path / "tokenizer.json").write_text(json.dumps({"model": {"type": "WordPiece", "vocab": {"a": 0, "b": 2}}}))
    with pytest.raises(TokenizerError, match="without gaps"):
        load_tokenizer(tmp_path)
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(TokenizerError, match="not valid JSON"):
        load_tokenizer(tmp_path)


def test_transformers5_model_dir_converts_with_its_tokenizer(shared_data, tmp_path, capsys):
    """`litebert convert --from hf` on a directory holding tokenizer.json and no spiece.model keeps the tokenizer."""
    from litebert.cli import main

    hf_dir = _saved_by_transformers(AlbertTokenizer(shared_data / "albert-vocab" / "30k-clean.model")
                                    .save_pretrained(tmp_path / "ours"), tmp_path / "hf")
    config = transformers.AlbertConfig(vocab_size=30000, embedding_size=8, hidden_size=16, num_hidden_layers=1,
                                       num_attention_heads=2, intermediate_size=32, max_position_embeddings=32)
    transformers.AlbertForMaskedLM(config).save_pretrained(hf_dir)
    assert main(["convert", str(hf_dir), "--out", str(tmp_path / "out"), "--from", "hf"]) == 0
    assert "tokenizer files: " in capsys.readouterr().out
    tok = load_tokenizer(tmp_path / "out")
    assert (tmp_path / "out" / "spiece.model").is_file()
    assert tok.encode("Hello, my dog is cute").input_ids == [2, 10975, 15, 51, 1952, 25, 10901, 3]


def test_a_saved_tokenizer_json_is_copied_only_when_its_stamp_matches(shared_data, tmp_path):
    """A save copies the tokenizer.json of the directory it loaded from when that directory's tokenizer_config.json
    stamps it as built from the same vocab, settings, code and Unicode tables, and the bytes are the stamped ones;
    otherwise it builds the file anew. Either way the file is byte-identical to one built now."""
    from litebert.tokenizer import JSON_STAMP

    def built(tok) -> bytes:  # the file as tokenizer_json() builds it, in this process
        return json.dumps(tok.tokenizer_json(), ensure_ascii=False).encode()

    original = AlbertTokenizer(shared_data / "albert-vocab" / "30k-clean.model")
    saved = original.save_pretrained(tmp_path / "saved")
    assert (saved / "tokenizer.json").read_bytes() == built(original)
    copied = AlbertTokenizer.from_pretrained(saved).save_pretrained(tmp_path / "copied")
    assert (copied / "tokenizer.json").read_bytes() == built(original)
    assert json.loads((copied / "tokenizer_config.json").read_text())[JSON_STAMP] == \
        json.loads((saved / "tokenizer_config.json").read_text())[JSON_STAMP]

    # The copy is verbatim: a stamped file whose bytes differ from a build (re-indented, same content) is what
    # the next save writes, so this save copied rather than built.
    config = json.loads((saved / "tokenizer_config.json").read_text())
    reindented = json.dumps(json.loads((saved / "tokenizer.json").read_bytes()), ensure_ascii=False,
                            indent=1).encode()
    (saved / "tokenizer.json").write_bytes(reindented)
    stamp = dict(config[JSON_STAMP], sha256=hashlib.sha256(reindented).hexdigest())
    (saved / "tokenizer_config.json").write_text(json.dumps({**config, JSON_STAMP: stamp}))
    out = AlbertTokenizer.from_pretrained(saved).save_pretrained(tmp_path / "verbatim")
    assert (out / "tokenizer.json").read_bytes() == reindented

    # Built anew: the file edited after its stamp; no stamp (as transformers writes the directory); the stamp of
    # other settings.
    (saved / "tokenizer_config.json").write_text(json.dumps(config))
    out = AlbertTokenizer.from_pretrained(saved).save_pretrained(tmp_path / "edited")
    assert (out / "tokenizer.json").read_bytes() == built(original)
    (saved / "tokenizer.json").write_bytes(reindented)
    (saved / "tokenizer_config.json").write_text(json.dumps({k: v for k, v in config.items() if k != JSON_STAMP}))
    out = AlbertTokenizer.from_pretrained(saved).save_pretrained(tmp_path / "unstamped")
    assert (out / "tokenizer.json").read_bytes() == built(original)
    (saved / "tokenizer_config.json").write_text(json.dumps({**config, "do_lower_case": not config["do_lower_case"]}))
    lowered = AlbertTokenizer.from_pretrained(saved)
    out = lowered.save_pretrained(tmp_path / "other-settings")
    assert (out / "tokenizer.json").read_bytes() == built(lowered) != built(original)
