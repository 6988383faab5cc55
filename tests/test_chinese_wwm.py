"""Chinese whole-word masking: jieba words stored as the token store's word boundaries, masked whole (and in
n-grams of words) over WordPiece characters; then a small end-to-end run (store -> pretrain -> fine-tune)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from litebert.cli import main
from litebert.data.corpus import split_sentences
from litebert.data.inspect import inspect_examples
from litebert.data.pretraining import PretrainingDataset, choose_ngram_spans, make_rng, ngram_probabilities
from litebert.data.store_build import build_store
from litebert.tokenizer import WordPieceTokenizer

jieba = pytest.importorskip("jieba", reason="Chinese whole-word masking needs jieba (pip install litebert[zh])")
sps = pytest.importorskip("scipy.stats")


def _reviews(shared_data, count: int) -> list[str]:
    lines = (shared_data / "chinese" / "chnsenticorp" / "train.tsv").read_text(encoding="utf-8").split("\n")[1:]
    return [line.split("\t", 1)[1] for line in lines[:count]]  # label \t text_a; quotes are plain characters


@pytest.fixture(scope="module")
def zh_wwm(shared_data, tmp_path_factory):
    """ChnSentiCorp reviews (one document each) in a store with jieba word boundaries, and the same without."""
    root = tmp_path_factory.mktemp("zh_wwm")
    tok = WordPieceTokenizer(shared_data / "chinese" / "albert_zh_vocab.txt")
    tok.save_pretrained(root / "tok")
    texts = _reviews(shared_data, 160)
    with open(root / "zh.jsonl", "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
    store = build_store(root / "zh.jsonl", root / "tok", root / "store", validation_fraction=0, word_segmenter="jieba")
    return store, tok, texts, root


def test_store_word_boundaries_are_jieba_words(zh_wwm):
    """Every stored sentence against jieba run here: a token is flagged exactly when a jieba word starts at its
    first character (from the tokenizer's offsets) and the vocab lets it start a word (no "##" continuation,
    which a WordPiece token like "##～6" in "4～6" is, whatever jieba says)."""
    store, tok, texts, _ = zh_wwm
    assert store.meta["build"]["word_segmenter"] == "jieba"
    split = store.split("train")
    sentences = [s for t in texts for s in split_sentences(t) if tok.encode_ids(s)]
    assert len(sentences) == split.num_sentences
    multi_token_words = 0
    for s, sentence in enumerate(sentences):
        enc = tok.encode(sentence, return_offsets=True)
        ids, offsets = enc.input_ids[1:-1], enc.offsets[1:-1]
        word_starts = {start for _, start, _ in jieba.tokenize(sentence)}
        expected = [start in word_starts and not tok.id_to_token(i).startswith("##")
                    for i, (start, _) in zip(ids, offsets)]
        expected[0] = True
        assert split.tokens(s).tolist() == ids
        assert split.word_starts(s).tolist() == expected, tok.convert_ids_to_tokens(ids)
        multi_token_words += len(expected) - sum(expected)
    assert multi_token_words > 1000  # many words span several characters, so the test could fail


def _partly_masked_words(ds: PretrainingDataset, count: int) -> tuple[int, int]:
    """(words partly masked, words touched by masking) over `count` examples, by the store's word boundaries.
    A segment's first token starts a word (truncation may have cut the rest away)."""
    partly = touched = 0
    for i in range(min(count, len(ds))):
        ex = ds.example(i)
        special = np.isin(ex["input_ids"], [ds.cls_id, ds.sep_id])
        starts = ex["word_starts"] | np.r_[False, special[:-1]]
        word = np.cumsum(starts)  # [L] word number of each token
        masked = np.zeros(len(word), bool)
        masked[ex["masked_positions"][ex["masked_weights"] > 0]] = True
        hit = np.unique(word[masked])
        touched += len(hit)
        partly += sum(not masked[word == w].all() for w in hit)
    return partly, touched


def test_no_word_is_partly_masked(zh_wwm):
    store, *_ = zh_wwm
    whole = PretrainingDataset(store, max_seq_length=64, seed=1)
    partly, touched = _partly_masked_words(whole, 300)
    assert touched > 1000 and partly == 0
    # The same check finds partly masked words when masking ignores word boundaries, so it can fail.
    per_token = PretrainingDataset(store, max_seq_length=64, seed=1, mask_unit="token")
    partly, touched = _partly_masked_words(per_token, 300)
    assert partly > 0.1 * touched
    assert inspect_examples(whole, 200)["whole_word_spans"] == 1.0
    assert inspect_examples(per_token, 200)["whole_word_spans"] < 0.9


def test_ngram_distribution_holds_over_words(zh_wwm):
    """On the stored jieba words of real sentences, the first span visited is never rejected, so its n (in words)
    is an unbiased sample of p(n) whenever 3 words remain; its tokens are exactly those of its n words."""
    store, *_ = zh_wwm
    split = store.split("train")
    pvals = ngram_probabilities(3)
    counts, longer_than_n = np.zeros(3), 0
    for s in range(split.num_sentences):
        flags = split.word_starts(s)
        if flags.sum() < 4:
            continue
        pos = np.flatnonzero(flags)  # [W] first token of each word
        end = np.append(pos[1:], len(flags))
        avail = np.minimum(3, len(pos) - np.arange(len(pos)))
        budget = int(len(flags))  # room for any 3 words: the first span never backs off
        for r in range(8):
            k, drawn, used = choose_ngram_spans(pos.tolist(), end.tolist(), avail, budget, pvals,
                                                make_rng(3, s, r))[0]
            assert used == drawn and flags[pos[k]] and (pos[k] + end[k + used - 1] - pos[k] == len(flags)
                                                        or flags[end[k + used - 1]])
            longer_than_n += end[k + used - 1] - pos[k] > used
            if avail[k] == 3:
                counts[drawn - 1] += 1
    assert counts.sum() > 3000 and longer_than_n > 1000
    assert sps.chisquare(counts, counts.sum() * pvals).pvalue > 1e-3, (counts / counts.sum(), pvals)


def test_chinese_end_to_end(zh_wwm, shared_data, tmp_path, capsys):
    """albert_zh vocab -> store with whole-word masking -> a short pretraining -> fine-tuning on ChnSentiCorp."""
    store, tok, _, root = zh_wwm
    torch.manual_seed(0)
    model_json = tmp_path / "model.json"
    model_json.write_text(json.dumps({"vocab_size": tok.vocab_size, "embedding_size": 16, "hidden_size": 32,
                                      "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
                                      "max_position_embeddings": 64}))
    run = tmp_path / "pre"
    assert main(["pretrain", "--model", str(model_json), "--data", str(store.path), "--out", str(run),
                 "--max-seq-length", "64", "--max-predictions-per-seq", "10", "--batch-size", "8",
                 "--micro-batch-size", "8", "--steps", "6", "--save-every", "6", "--eval-batches", "1",
                 "--threads", "1", "--precision", "fp32", "--single-sentence", "split", "--log-every", "3"]) == 0
    err = capsys.readouterr().err
    assert "masking words (jieba words)" in err and "SOP label 1: 50.0%" in err
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert all(np.isfinite(r["mlm_loss"]) for r in rows if "mlm_loss" in r)
    ft = tmp_path / "ft"
    assert main(["finetune", "chnsenticorp", "--model", str(run / "checkpoint-6"),
                 "--data", str(shared_data / "chinese" / "chnsenticorp"), "--out", str(ft), "--steps", "4",
                 "--batch-size", "8", "--max-seq-length", "64", "--max-train-examples", "32",
                 "--max-eval-examples", "16", "--precision", "fp32", "--threads", "1"]) == 0
    capsys.readouterr()
    assert (ft / "best" / "model.safetensors").is_file()
    assert main(["evaluate", "chnsenticorp", "--model", str(ft), "--data",
                 str(shared_data / "chinese" / "chnsenticorp"), "--limit", "16", "--max-seq-length", "64"]) == 0
    assert "acc" in capsys.readouterr().out
