"""Pretraining data semantics made explicit: what a one-sentence chunk does to the pair labels
(single_sentence random / split / skip), the label balance reported before any example is built, and the
official per-document draw of the short target length."""

from __future__ import annotations

import json

import numpy as np
import pytest

from litebert.cli import main
from litebert.data.pretraining import PretrainingDataset
from litebert.data.store_build import build_store
from litebert.errors import ConfigError
from litebert.pretrain import PretrainConfig, data_lines
from litebert.tokenizer import AlbertTokenizer


@pytest.fixture(scope="module")
def paragraphs(shared_data, tmp_path_factory):
    """Lines of Emma, one document each (most hold a single sentence), as a token store."""
    root = tmp_path_factory.mktemp("paragraphs")
    AlbertTokenizer(shared_data / "albert-vocab" / "30k-clean.model").save_pretrained(root / "tok")
    text = (shared_data / "gutenberg" / "austen-emma.txt").read_text(encoding="utf-8")
    paras = [line for line in text.split("\n") if line.strip()][100:700]
    (root / "docs.jsonl").write_text("".join(json.dumps({"text": p}) + "\n" for p in paras), encoding="utf-8")
    return build_store(root / "docs.jsonl", root / "tok", root / "store", validation_fraction=0)


@pytest.fixture(scope="module")
def books(shared_data, tmp_path_factory):
    """Long documents (80 lines of a book each) for the short-target draw."""
    root = tmp_path_factory.mktemp("books")
    AlbertTokenizer(shared_data / "albert-vocab" / "30k-clean.model").save_pretrained(root / "tok")
    lines = [x for x in (shared_data / "gutenberg" / "melville-moby_dick.txt").read_text(encoding="utf-8")
             .split("\n") if x.strip()][:4000]
    docs = ["\n".join(lines[i:i + 80]) for i in range(0, len(lines), 80)]
    (root / "corpus.txt").write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    return build_store(root / "corpus.txt", root / "tok", root / "store", validation_fraction=0)


def _measured(ds: PretrainingDataset, count: int = 600) -> float:
    picks = np.linspace(0, len(ds) - 1, min(count, len(ds))).astype(int)
    return float(np.mean([ds.example(int(i))["sop_label"] for i in picks]))


def _within(observed: float, n: int, p: float, sigmas: float = 5.0) -> bool:
    return abs(observed - p) <= sigmas * np.sqrt(p * (1 - p) / n) + 1e-9


def test_single_sentence_modes_and_their_label_balance(paragraphs):
    random = PretrainingDataset(paragraphs, max_seq_length=128, seed=0)
    b = random.label_balance(0)
    single = b["single_sentence_chunks"]
    assert single > 0.3  # the corpus the issue describes: many one-sentence documents
    assert b["random_b"] == pytest.approx(single) and b["label1"] == pytest.approx(0.5 + single / 2)
    assert _within(_measured(random), 600, b["label1"])

    split = PretrainingDataset(paragraphs, max_seq_length=128, seed=0, single_sentence="split")
    assert split.label_balance(0)["label1"] == pytest.approx(0.5, abs=0.01)
    assert _within(_measured(split), 600, 0.5)

    skip = PretrainingDataset(paragraphs, max_seq_length=128, seed=0, single_sentence="skip")
    chunks = skip.chunk_index(0)
    assert (chunks.ends - chunks.starts >= 2).all() and len(skip) == round(len(random) * (1 - single))
    assert skip.label_balance(0)["label1"] == 0.5 and _within(_measured(skip), 600, 0.5)

    nsp = PretrainingDataset(paragraphs, max_seq_length=128, seed=0, objective="nsp")
    assert _within(_measured(nsp), 600, nsp.label_balance(0)["label1"])


def test_start_line_warns_when_labels_are_skewed(paragraphs):
    def lines(mode):
        cfg = PretrainConfig(data=str(paragraphs.path), single_sentence=mode)
        ds = PretrainingDataset(paragraphs, max_seq_length=cfg.max_seq_length, seed=0,
                                single_sentence={"random": "random_document"}.get(mode, mode))
        return data_lines(cfg, ds)

    skewed = lines("random")
    assert len(skewed) == 2 and skewed[1].startswith("warning:") and "--single-sentence split or skip" in skewed[1]
    assert "SOP label 1: " in skewed[0] and "with B from another document" in skewed[0]
    assert len(lines("split")) == 1 and len(lines("skip")) == 1
    with pytest.raises(ConfigError, match="--single-sentence drop: must be random, split or skip"):
        PretrainConfig(data="x", single_sentence="drop")


def test_data_inspect_reports_balance_and_masking(paragraphs, capsys):
    assert main(["data", "inspect", str(paragraphs.path), "--examples", "200"]) == 0
    out = capsys.readouterr().out
    assert "single-sentence chunks" in out and "100.0% cover whole words" in out and "warning" in out
    assert main(["data", "inspect", str(paragraphs.path), "--examples", "200", "--single-sentence", "skip"]) == 0
    out = capsys.readouterr().out
    assert "label 1 (swapped / random B): 50.0% expected" in out and "warning" not in out
    assert main(["data", "inspect", str(paragraphs.path), "--examples", "0"]) == 2


def test_short_target_drawn_per_document(books):
    per_chunk = PretrainingDataset(books, max_seq_length=128, seed=0, short_seq_prob=0.1)
    per_doc = PretrainingDataset(books, max_seq_length=128, seed=0, short_seq_prob=0.1, short_seq_draw="document")
    shares = []
    for ds in (per_chunk, per_doc):
        short = np.concatenate([ds.chunk_index(e).targets < ds.max_num_tokens for e in range(4)])
        shares.append(short.mean())
    assert _within(shares[0], len(per_chunk) * 4, 0.1)
    assert shares[1] > 0.15  # short documents are cut into many more chunks
    docs = per_doc.split.document_offsets
    for e in range(4):
        chunks = per_doc.chunk_index(e)
        doc_of = np.searchsorted(docs, chunks.starts, side="right") - 1  # [N] document of each chunk
        for d in np.unique(doc_of):
            assert len(np.unique(chunks.targets[doc_of == d])) == 1  # one target per document
