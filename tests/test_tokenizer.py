"""Tokenizers against their references: google-research/albert's own outputs (official_tokenization.jsonl,
official_wordpiece_tokenization.jsonl), transformers (AutoTokenizer, BertTokenizer), the official
_truncate_seq_pair, and the SentencePiece trainer's own model proto."""

from __future__ import annotations

import gzip
import json
import unicodedata
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from litebert.cli import main as cli_main
from litebert.errors import ConfigError, CorpusError, TokenizerError
from litebert.tokenizer import AlbertTokenizer, WordPieceTokenizer, _for_every_id, load_tokenizer
from litebert.tokenizer_train import train_sentencepiece

ENGLISH = ["The quick  brown fox, born in 1,999, jumped (twice) over \"lazy\" dogs - really.",
           "  Hello, my dog is cute\t\n and   it's 2,000 years old!  "]
ACCENTED = ["Café déjà vu: naïve résumé, Zoë and Ångström.", "cafe\u0301 cre\u0300me bru\u0302le\u0301e",
            "ÉCOLE Über straße"]
CHINESE = ["我爱北京天安门，今天天气很好！", "ALBERT模型在2019年发布, 效果不错。", "中文 and English 混合"]
NORMAL = ["Hello, my dog is cute", "The quick brown fox jumps over the lazy dog.",
          "She was the youngest of the two daughters of a most affectionate father.",
          "Is this the real life? Is this just fantasy?", "I can't believe it's already 2024!"]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def albert(shared_data) -> AlbertTokenizer:
    return AlbertTokenizer(shared_data / "albert-vocab" / "30k-clean.model", do_lower_case=True)


@pytest.fixture(scope="module")
def official(shared_data) -> list[dict]:
    return read_jsonl(shared_data / "albert-vocab" / "official_tokenization.jsonl")


@pytest.fixture(scope="module")
def wordpiece(shared_data) -> WordPieceTokenizer:
    return WordPieceTokenizer(shared_data / "chinese" / "albert_zh_vocab.txt", do_lower_case=True)


@pytest.fixture(scope="module")
def albert_dir(albert, tmp_path_factory) -> Path:
    return albert.save_pretrained(tmp_path_factory.mktemp("albert_tok"))


# ---------------------------------------------------------------------------------------------------------------
# Exact agreement with the official outputs


def test_documented_example(albert):
    assert albert.encode("Hello, my dog is cute").input_ids == [2, 10975, 15, 51, 1952, 25, 10901, 3]


def test_official_sentencepiece_tokenization(albert, official):
    assert len(official) == 1397
    texts = [row["text"] for row in official]
    batch = albert.batch_encode(texts)["input_ids"]  # the fast path: C++ batch encoder
    wrong_ids = [row["text"][:60] for row, ids in zip(official, batch) if ids != row["ids"]]
    wrong_pieces = [row["text"][:60] for row in official if albert.tokenize(row["text"]) != row["pieces"]]
    assert wrong_ids == [] and wrong_pieces == []
    for row in official[::20]:  # the one-text path and the offsets path give the same ids
        assert albert.encode(row["text"]).input_ids == row["ids"]
        head = row["text"][:3000]
        assert albert.encode(head, return_offsets=True).input_ids == albert.encode(head).input_ids


def test_official_wordpiece_tokenization(wordpiece, shared_data, tmp_path):
    rows = read_jsonl(shared_data / "chinese" / "official_wordpiece_tokenization.jsonl")
    assert len(rows) == 1003
    ids = wordpiece.batch_encode([r["text"] for r in rows])["input_ids"]
    wrong = [r["text"][:40] for r, row_ids in zip(rows, ids)
             if row_ids != r["ids"] or wordpiece.convert_ids_to_tokens(row_ids[1:-1]) != r["tokens"]]
    assert wrong == []
    # transformers' BertTokenizer, loaded from the dir we save, agrees on a sample.
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoTokenizer.from_pretrained(wordpiece.save_pretrained(tmp_path))
    assert type(hf).__name__.startswith("BertTokenizer")
    for r in rows[::10]:
        assert hf(r["text"])["input_ids"] == wordpiece.encode(r["text"]).input_ids
    # Words over 100 characters become one [UNK] (HF's limit; the official file says 200).
    for word in ("a" * 100, "a" * 101, "naïve" * 25):
        assert hf(word)["input_ids"] == wordpiece.encode(word).input_ids
    assert wordpiece.tokenize("x " + "a" * 101) == ["x", "[UNK]"] and "[UNK]" not in wordpiece.tokenize("a" * 100)


# ---------------------------------------------------------------------------------------------------------------
# Offsets into the original text


def _assert_offsets_exact(tok, text: str, pieces: list[str]) -> None:
    enc = tok.encode(text, return_offsets=True)
    offsets = enc.offsets[1:-1]
    assert len(offsets) == len(pieces)
    for piece, (start, end) in zip(pieces, offsets):
        word = piece.removeprefix("##").replace("▁", "")
        assert tok.normalize(text[start:end]).strip() == word, (text, piece, text[start:end])
    starts = [s for s, _ in offsets]
    assert starts == sorted(starts)


@pytest.mark.parametrize("text", ENGLISH + ACCENTED + CHINESE)
def test_albert_offsets_slice_back_to_each_piece(albert, text):
    _assert_offsets_exact(albert, text, albert.tokenize(text))


@pytest.mark.parametrize("text", ENGLISH + ACCENTED + CHINESE)
def test_wordpiece_offsets_slice_back_to_each_token(wordpiece, text):
    tokens = wordpiece.tokenize(text)
    assert "[UNK]" not in tokens
    _assert_offsets_exact(wordpiece, text, tokens)


def test_offsets_on_official_texts(albert, official):
    """Every piece of the official texts maps back to original text that normalises to (or, where one original
    char expands to several, e.g. "½" -> "1⁄2", contains) the piece."""
    checked = 0
    for row in official:
        text = row["text"]
        if len(text) > 3000:
            continue
        for piece, (start, end) in zip(row["pieces"], albert.encode(text, return_offsets=True).offsets[1:-1]):
            got = unicodedata.normalize("NFKC", albert.normalize(text[start:end]))
            assert unicodedata.normalize("NFKC", piece.replace("▁", "")) in got, (text, piece, text[start:end])
            checked += 1
    assert checked > 10_000


# Letters, digits, commas, accents (precomposed and combining), ligatures, full-width forms, odd whitespace,
# controls, CJK, Hangul, the user-defined symbols and "▁" itself: everything that changes lengths.
_ALPHABET = list("aZ09, .(-\"'") + ["é", "Å", "\u0301", "\u0323", "ﬁ", "½", "…", "ｓ", "\u3000", "\xa0", "\t", "\n",
                                    "\x00", "\u200b", "中", "文", "한", "ß", "İ", "Σ", "€", "–", "▁", "´"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet=st.sampled_from(_ALPHABET), max_size=40), st.booleans())
def test_offsets_path_matches_fast_path(albert, wordpiece, text, use_wordpiece):
    """Property: with offsets or without, the ids are the same, and the offsets are ordered spans of the text."""
    tok = wordpiece if use_wordpiece else albert
    enc = tok.encode(text, return_offsets=True)
    assert enc.input_ids == tok.encode(text).input_ids == tok.batch_encode([text, "x"])["input_ids"][0]
    spans = enc.offsets[1:-1]
    assert all(0 <= s <= e <= len(text) for s, e in spans)
    assert [s for s, _ in spans] == sorted(s for s, _ in spans)


def test_specials_and_padding_have_empty_offsets(albert):
    enc = albert.encode("a b", "c", max_length=10, padding="max_length", return_offsets=True)
    assert enc.input_ids == [2, *albert.encode_ids("a b"), 3, *albert.encode_ids("c"), 3, 0, 0, 0, 0]
    assert [enc.offsets[i] for i in (0, 3, 5, 6, 7, 8, 9)] == [(0, 0)] * 7
    assert enc.offsets[1:3] == [(0, 1), (2, 3)] and enc.offsets[4] == (0, 1)


# ---------------------------------------------------------------------------------------------------------------
# Pairs, truncation, padding, batches


def official_truncate_seq_pair(tokens_a: list, tokens_b: list, max_length: int) -> None:
    """google-research/albert classifier_utils._truncate_seq_pair: pop from the end of the longer one."""
    while len(tokens_a) + len(tokens_b) > max_length:
        (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()


@pytest.mark.parametrize("la,lb,max_length", [(10, 3, 9), (3, 10, 9), (6, 6, 10), (7, 6, 10), (5, 5, 30), (20, 1, 6)])
def test_longest_first_is_official_truncate_seq_pair(albert, la, lb, max_length):
    words = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen " \
            "seventeen eighteen nineteen twenty".split()
    text_a, text_b = " ".join(words[:la]), " ".join(reversed(words[:lb]))
    a, b = albert.encode_ids(text_a), albert.encode_ids(text_b)
    official_truncate_seq_pair(a, b, max_length - 3)
    enc = albert.encode(text_a, text_b, max_length=max_length, truncation="longest_first")
    assert enc.input_ids == [albert.cls_id, *a, albert.sep_id, *b, albert.sep_id]
    assert enc.token_type_ids == [0] * (len(a) + 2) + [1] * (len(b) + 1)
    assert enc.attention_mask == [1] * len(enc.input_ids)


def test_only_first_only_second_and_errors(albert):
    a, b = "one two three four five six", "seven eight nine"
    first = albert.encode(a, b, max_length=8, truncation="only_first")
    assert first.input_ids == [2, *albert.encode_ids(a)[:2], 3, *albert.encode_ids(b), 3]
    second = albert.encode(b, a, max_length=8, truncation="only_second")
    assert second.input_ids == [2, *albert.encode_ids(b), 3, *albert.encode_ids(a)[:2], 3]
    single = albert.encode(a, max_length=4)
    assert single.input_ids == [2, *albert.encode_ids(a)[:2], 3]
    assert len(albert.encode(a, max_length=4, truncation=False).input_ids) == 8
    with pytest.raises(ConfigError, match="only_first"):
        albert.encode(b, a, max_length=5, truncation="only_first")
    with pytest.raises(ConfigError, match="no second segment"):
        albert.encode(a, max_length=5, truncation="only_second")
    with pytest.raises(ConfigError, match="max_length"):
        albert.encode(a, padding="max_length")


def test_batch_encode_padding_tensors_and_decode(albert):
    texts, pairs = ["Hello, my dog is cute", "short"], ["and a pair", "x"]
    out = albert.batch_encode(texts, pairs, padding="longest")
    singles = [albert.encode(t, p) for t, p in zip(texts, pairs)]
    n = max(len(s) for s in singles)
    for row, mask, s in zip(out["input_ids"], out["attention_mask"], singles):
        assert row == s.input_ids + [albert.pad_id] * (n - len(s)) and sum(mask) == len(s)
    pt = albert.batch_encode(texts, max_length=16, padding="max_length", return_tensors="pt", return_offsets=True)
    assert tuple(pt["input_ids"].shape) == (2, 16) and tuple(pt["offsets"].shape) == (2, 16, 2)
    with pytest.raises(ConfigError, match="padding"):
        albert.batch_encode(texts, return_tensors="pt")
    assert albert.decode(out["input_ids"][0]) == "hello, my dog is cute and a pair"
    assert albert.encode_ids_batch(texts, num_threads=1) == [albert.encode_ids(t) for t in texts]


# ---------------------------------------------------------------------------------------------------------------
# Vocabulary facts used by the data pipeline


def test_vocabulary_facts_read_in_one_call_equal_the_per_id_calls(albert):
    ids = list(range(albert.vocab_size))
    sp = albert.sp
    for method in (sp.id_to_piece, sp.is_control, sp.is_unknown, sp.is_unused):
        assert _for_every_id(method, ids) == [method(i) for i in ids]

    def per_id_only(i):  # an older SentencePiece: ints only
        if not isinstance(i, int):
            raise TypeError("in method 'IdToPiece', argument 2 of type 'int'")
        return sp.id_to_piece(i)

    assert _for_every_id(per_id_only, ids[:50]) == [sp.id_to_piece(i) for i in range(50)]
    assert albert._pieces == [sp.id_to_piece(i) for i in ids]
    assert albert.special_ids == {i for i in ids if sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i)}


def test_special_ids_word_starts_and_fingerprint(albert, wordpiece, shared_data):
    assert (albert.pad_id, albert.unk_id, albert.cls_id, albert.sep_id, albert.mask_id) == (0, 1, 2, 3, 4)
    assert albert.special_ids == {0, 1, 2, 3, 4}
    starts = albert.word_start_mask()
    assert starts.shape == (30000,) and starts.dtype == np.bool_
    ids = albert.convert_tokens_to_ids(["▁the", "s", "(", "ing", "▁"])
    assert starts[ids].tolist() == [True, False, True, False, True]
    wp_starts = wordpiece.word_start_mask()
    wp_ids = wordpiece.convert_tokens_to_ids(["中", "##中", "the", "##s"])
    assert wp_starts[wp_ids].tolist() == [True, False, True, False]
    assert {wordpiece.pad_id, wordpiece.unk_id, wordpiece.cls_id, wordpiece.sep_id, wordpiece.mask_id} <= \
        wordpiece.special_ids
    assert wordpiece.token_to_id("[unused1]") in wordpiece.special_ids
    assert wordpiece.token_to_id("[") not in wordpiece.special_ids
    same = AlbertTokenizer(shared_data / "albert-vocab" / "30k-clean.model")
    cased = AlbertTokenizer(shared_data / "albert-vocab" / "30k-clean.model", do_lower_case=False)
    assert albert.fingerprint() == same.fingerprint() != cased.fingerprint()


# ---------------------------------------------------------------------------------------------------------------
# Hugging Face layout


def test_save_load_round_trip(albert, albert_dir, wordpiece, tmp_path):
    assert sorted(p.name for p in albert_dir.iterdir()) == ["special_tokens_map.json", "spiece.model",
                                                            "tokenizer.json", "tokenizer_config.json"]
    config = json.loads((albert_dir / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast" and config["do_lower_case"] is True
    loaded = load_tokenizer(albert_dir)
    assert isinstance(loaded, AlbertTokenizer) and loaded.fingerprint() == albert.fingerprint()
    wp_dir = wordpiece.save_pretrained(tmp_path / "wp")
    assert json.loads((wp_dir / "tokenizer_config.json").read_text())["tokenizer_class"] == "BertTokenizer"
    assert isinstance(load_tokenizer(wp_dir), WordPieceTokenizer)
    assert isinstance(load_tokenizer(wp_dir / "vocab.txt"), WordPieceTokenizer)


def test_transformers_autotokenizer_loads_our_dir(albert, albert_dir):
    """(The agreement on whole data sets is in test_tokenizer_hf.py.)"""
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoTokenizer.from_pretrained(albert_dir)
    for text in NORMAL + ENGLISH + ACCENTED:
        assert hf(text)["input_ids"] == albert.encode(text).input_ids
    assert hf(NORMAL[0], NORMAL[1])["token_type_ids"] == albert.encode(NORMAL[0], NORMAL[1]).token_type_ids


# ---------------------------------------------------------------------------------------------------------------
# Training and bad input


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory) -> Path:
    """Docstrings of a few stdlib modules, gzipped: a few thousand lines of English prose and code words."""
    import argparse
    import collections
    import json as json_module
    import pathlib
    import textwrap

    lines = []
    for module in (argparse, collections, json_module, pathlib, textwrap, unicodedata):
        for obj in [module, *vars(module).values()]:
            doc = getattr(obj, "__doc__", None)
            if isinstance(doc, str):
                lines += [line.strip() for line in doc.splitlines()]
    path = tmp_path_factory.mktemp("corpus") / "docstrings.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("\n".join(lines * 2) + "\n")
    return path


@pytest.fixture(scope="module")
def trained_dir(small_corpus, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("trained")
    bad = out.parent / "bad_line.txt"
    bad.write_bytes(b"a good line\na bad \xff line\n")
    code = cli_main(["tokenizer", "train", "--input", str(small_corpus), str(bad), "--vocab-size", "600",
                     "--out", str(out), "--num-threads", "1", "--on-bad-utf8", "replace",
                     "--spm", "hard_vocab_limit=false"])
    assert code == 0
    return out


def test_trained_model_has_albert_specials(trained_dir):
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString((trained_dir / "spiece.model").read_bytes())
    kinds = sentencepiece_model_pb2.ModelProto.SentencePiece
    head = [(p.piece, p.type) for p in proto.pieces[:13]]
    assert head[:5] == [("<pad>", kinds.CONTROL), ("<unk>", kinds.UNKNOWN), ("[CLS]", kinds.CONTROL),
                        ("[SEP]", kinds.CONTROL), ("[MASK]", kinds.CONTROL)]
    assert head[5:] == [(s, kinds.USER_DEFINED) for s in ["(", ")", '"', "-", ".", "–", "£", "€"]]
    assert proto.trainer_spec.model_type == proto.trainer_spec.UNIGRAM
    assert proto.trainer_spec.character_coverage == pytest.approx(0.99995)
    assert (proto.trainer_spec.bos_id, proto.trainer_spec.eos_id) == (-1, -1)
    record = json.loads((trained_dir / "spm_train.json").read_text())
    assert record["counts"]["bad_utf8_lines"] == 1 and record["counts"]["files"] == 2
    tok = load_tokenizer(trained_dir)
    assert tok.vocab_size == 600 and (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (0, 1, 2, 3, 4)
    enc = tok.encode("Return a (new) list.", "Second")
    assert enc.input_ids[0] == 2 and enc.input_ids.count(3) == 2
    assert {tok.token_to_id(s) for s in "()."} <= set(enc.input_ids)


def test_training_errors_name_the_file(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n")
    with pytest.raises(CorpusError, match="empty.txt: empty corpus"):
        train_sentencepiece([empty], tmp_path / "out", vocab_size=100)
    with pytest.raises(CorpusError, match="missing.txt: no such file"):
        train_sentencepiece([tmp_path / "missing.txt"], tmp_path / "out", vocab_size=100)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine line\nanother fine line\nbroken \xff\xfe here\n")
    with pytest.raises(CorpusError, match=r"bad.txt:3: invalid UTF-8.*--on-bad-utf8"):
        train_sentencepiece([bad], tmp_path / "out", vocab_size=100)
    assert not (tmp_path / "out" / "spiece.model").exists()


def test_cli_reports_errors_without_traceback(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\n\xc3\x28\n")
    assert cli_main(["tokenizer", "train", "--input", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert f"{bad}:2: invalid UTF-8" in capsys.readouterr().err


def test_bad_model_files_raise_tokenizer_error(tmp_path):
    with pytest.raises(TokenizerError, match="nope.model"):
        AlbertTokenizer(tmp_path / "nope.model")
    corrupt = tmp_path / "corrupt.model"
    corrupt.write_bytes(b"\x00\x01 definitely not a protobuf" * 10)
    with pytest.raises(TokenizerError, match="corrupt.model: not a valid SentencePiece model"):
        AlbertTokenizer(corrupt)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[CLS]\n[SEP]\n[MASK]\nhello\n")
    with pytest.raises(TokenizerError, match=r"vocab.txt: the vocab has no \[UNK\]"):
        WordPieceTokenizer(vocab)
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    with pytest.raises(TokenizerError, match="no spiece.model, vocab.txt or tokenizer.json"):
        load_tokenizer(empty_dir)
    (empty_dir / "tokenizer_config.json").write_text("{not json")
    with pytest.raises(TokenizerError, match=r"tokenizer_config\.json:1: not valid JSON"):
        load_tokenizer(empty_dir)
