"""Token store: build (workers, chunks, shards), contents against the tokenizer, stats, errors, atomicity, CLI."""

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from litebert.cli import main as cli_main
from litebert.data.corpus import read_documents
from litebert.data.store import TokenStore
from litebert.data.store_build import build_store
from litebert.errors import CorpusError, TokenizerError
from litebert.tokenizer import WordPieceTokenizer, load_tokenizer


@pytest.fixture(scope="module")
def corpus(shared_data, tmp_path_factory):
    """About 60 small documents of Gutenberg prose: plain text, a .gz file and a JSONL file."""
    root = tmp_path_factory.mktemp("corpus")
    lines = (shared_data / "gutenberg" / "carroll-alice.txt").read_text(encoding="utf-8").split("\n")[:600]
    docs = [lines[i : i + 15] for i in range(0, 600, 15)]
    (root / "a.txt").write_text("\n\n".join("\n".join(d) for d in docs[:20]) + "\n", encoding="utf-8")
    with gzip.open(root / "b.txt.gz", "wt", encoding="utf-8") as f:
        f.write("\n\n".join("\n".join(d) for d in docs[20:35]))
    records = [{"text": " ".join(d)} for d in docs[35:]]
    (root / "c.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return root


def _store_files(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def _sentences(split) -> list[list[int]]:
    return [split.tokens(i).tolist() for i in range(split.num_sentences)]


def test_store_matches_tokenizer(corpus, en_tokenizer_dir, tmp_path, shared_data):
    store = build_store(corpus, en_tokenizer_dir, tmp_path / "s", validation_fraction=0.2, seed=3)
    tok = load_tokenizer(en_tokenizer_dir)
    docs = read_documents(corpus)
    # reference: the tokenizer on every sentence, documents in input order (none is too short or empty here)
    expected = [[tok.encode_ids(s) for s in d] for d in docs]
    expected = [[ids for ids in d if ids] for d in expected]
    got = []
    for name in ("train", "validation"):
        split = store.split(name)
        offsets = split.document_offsets
        got += [[split.tokens(s).tolist() for s in range(offsets[d], offsets[d + 1])] for d in range(len(split))]
        ids = np.concatenate([split.tokens(0, split.num_sentences)])
        np.testing.assert_array_equal(split.word_starts(0, split.num_sentences), tok.word_start_mask()[ids])
    assert sorted(map(str, got)) == sorted(map(str, expected))  # every document exactly once, in one split
    assert 0 < store.num_documents("validation") < store.num_documents("train")
    assert store.tokenizer_fingerprint == tok.fingerprint()
    assert store.sentence(3, split="validation").tolist() in [ids for d in expected for ids in d]
    assert store.dtype == np.dtype("<u2") and store.vocab_size == 30000
    meta = store.meta
    assert meta["tokenizer"]["mask_id"] == tok.mask_id and set(meta["tokenizer"]["special_ids"]) == tok.special_ids
    assert [Path(i["path"]).name for i in meta["build"]["inputs"]] == ["a.txt", "b.txt.gz", "c.jsonl"]
    assert store.stats["kept"]["documents"] == len(docs) == store.stats["input"]["documents"]
    store.check_tokenizer(tok)
    with pytest.raises(TokenizerError, match="built with tokenizer"):
        store.check_tokenizer(WordPieceTokenizer(shared_data / "chinese" / "albert_zh_vocab.txt"))


def test_validation_split_is_deterministic(corpus, en_tokenizer_dir, tmp_path):
    a = build_store(corpus, en_tokenizer_dir, tmp_path / "a", validation_fraction=0.3, seed=1)
    b = build_store(corpus, en_tokenizer_dir, tmp_path / "b", validation_fraction=0.3, seed=1)
    c = build_store(corpus, en_tokenizer_dir, tmp_path / "c", validation_fraction=0.3, seed=2)
    assert _sentences(a.split("validation")) == _sentences(b.split("validation"))
    assert _sentences(a.split("validation")) != _sentences(c.split("validation"))
    assert a.num_documents("train") + a.num_documents("validation") == c.num_documents("train") + c.num_documents(
        "validation")
    # what a resume and the ranks of a DDP run compare: the same tokens built twice (another path) are the same
    # store, another split of them is not
    assert a.content_fingerprint == b.content_fingerprint != c.content_fingerprint
    assert TokenStore.open(tmp_path / "a").content_fingerprint == a.content_fingerprint


def test_byte_reproducible_across_workers_chunks_and_shards(corpus, en_tokenizer_dir, tmp_path):
    ref = build_store(corpus, en_tokenizer_dir, tmp_path / "ref", workers=1, validation_fraction=0.2)
    two = build_store(corpus, en_tokenizer_dir, tmp_path / "two", workers=2, chunk_bytes=700, validation_fraction=0.2)
    assert _store_files(ref.path) == _store_files(two.path)
    # small shards: many files, same sentences and documents, no document split across shards
    sharded = build_store(corpus, en_tokenizer_dir, tmp_path / "sh", shard_tokens=3000, chunk_bytes=900,
                          validation_fraction=0.2)
    train = sharded.split("train")
    assert len(train.shards) > 3
    assert _sentences(train) == _sentences(ref.split("train"))
    np.testing.assert_array_equal(train.document_offsets, ref.split("train").document_offsets)
    assert set(train.document_offsets.tolist()) >= set(train.sentence_base.tolist())
    np.testing.assert_array_equal(train.word_starts(0, 50), ref.split("train").word_starts(0, 50))
    # gather (one fancy index per shard) reads what the per-sentence slices read, across shard boundaries
    positions = np.random.default_rng(0).permutation(train.num_tokens)[:2000]
    ids, flags = train.gather(positions)
    whole_ids = np.concatenate([train.tokens(i) for i in range(train.num_sentences)])
    whole_flags = np.concatenate([train.word_starts(i) for i in range(train.num_sentences)])
    np.testing.assert_array_equal(ids, whole_ids[positions])
    np.testing.assert_array_equal(flags, whole_flags[positions])
    assert ids.dtype == np.int64 and flags.dtype == bool
    with pytest.raises(IndexError, match="outside split 'train'"):
        train.gather([train.num_tokens])
    _check_shard_lookups(train)


def _check_shard_lookups(split):
    """The per-shard lookups (what making examples reads) equal the whole-split arrays, across shard boundaries."""
    cum, docs = split.sentence_offsets, split.document_offsets  # [S + 1], [D + 1]
    sentences = np.arange(split.num_sentences + 1)
    np.testing.assert_array_equal(split.sentence_offset(sentences), cum)
    np.testing.assert_array_equal(split.document_start(np.arange(split.num_documents + 1)), docs)
    np.testing.assert_array_equal(split.document_of(sentences[:-1]), np.searchsorted(docs, sentences[:-1], "right") - 1)
    # the first boundary reaching a token count, clamped to the sentence's document as _random_segments does
    rng = np.random.default_rng(1)
    s = rng.integers(0, split.num_sentences, 3000)
    want = cum[s] + rng.integers(-5, 400, 3000)
    doc_end = docs[np.searchsorted(docs, s, "right")]
    reached = split.sentence_reaching(s, want), np.searchsorted(cum, want, "left")
    np.testing.assert_array_equal(*(np.minimum(np.maximum(e, s + 1), doc_end) for e in reached))
    for block in (1, 7, 40, 10**9):  # whole documents per block, in order, tiling the split
        firsts, lengths, offsets = zip(*split.blocks(block))
        np.testing.assert_array_equal(np.concatenate(lengths), split.sentence_lengths)
        starts = np.concatenate([f + o[:-1] for f, o in zip(firsts, offsets)] + [[split.num_sentences]])
        np.testing.assert_array_equal(starts, docs)
        assert all(len(n) <= block or len(o) == 2 for n, o in zip(lengths, offsets))  # larger: one document


def test_stats_count_what_was_skipped(en_tokenizer_dir, tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_bytes(
        b"A fine first sentence.\nAnother one here.\n\n"
        b"hi\n\n"  # one token: too short for a pair
        b"\x01\x02\n\n"  # control characters only: no tokens -> empty sentence, empty document
        b"Broken \xff byte line.\nAnd more.\n\n"
        + b" ".join([b"word"] * 40) + b"\n")
    (tmp_path / "in" / "b.jsonl").write_text('{"text": ""}\n{"text": "Two sentences. Right here."}\n')
    store = build_store(tmp_path / "in", en_tokenizer_dir, tmp_path / "s", on_bad_utf8="replace",
                        validation_fraction=0, max_sentence_tokens=16)
    s = store.stats
    assert s["skipped"]["short_documents"]["count"] == 1
    assert s["skipped"]["empty_documents"]["count"] == 2  # the control-only document and the empty JSONL text
    assert s["skipped"]["empty_sentences"]["count"] == 1
    assert s["skipped"]["bad_utf8_lines"]["count"] == 1
    assert s["changed"]["long_sentences_cut"]["count"] == 1
    assert s["input"]["documents"] == 7 and s["kept"]["documents"] == 4
    lengths = store.split().sentence_lengths
    assert lengths.max() <= 16 and s["kept"]["tokens"] == lengths.sum()
    on_disk = json.loads((store.path / "stats.json").read_text())
    assert on_disk == s


def test_chinese_word_starts(shared_data, tmp_path):
    tok_dir = tmp_path / "tok_zh"
    tok = WordPieceTokenizer(shared_data / "chinese" / "albert_zh_vocab.txt")
    tok.save_pretrained(tok_dir)
    (tmp_path / "zh.jsonl").write_text(json.dumps({"text": "今天天气很好。我们去公园吧！playing football好的"},
                                                  ensure_ascii=False) + "\n", encoding="utf-8")
    store = build_store(tmp_path / "zh.jsonl", tok_dir, tmp_path / "s", validation_fraction=0)
    split = store.split()
    assert split.num_sentences == 3
    ids = split.tokens(0, 3)
    tokens = tok.convert_ids_to_tokens(ids)
    flags = split.word_starts(0, 3)
    for token, flag in zip(tokens, flags):
        assert flag == (not token.startswith("##")), token  # every CJK character is a word; ## continues one
    assert sum(t.startswith("##") for t in tokens) >= 1


def test_errors(corpus, en_tokenizer_dir, tmp_path):
    (tmp_path / "empty.txt").write_text("\n\n   \n")
    with pytest.raises(CorpusError, match="empty corpus"):
        build_store(tmp_path / "empty.txt", en_tokenizer_dir, tmp_path / "s")
    with pytest.raises(CorpusError, match="no such file"):
        build_store(tmp_path / "nope.txt", en_tokenizer_dir, tmp_path / "s")
    (tmp_path / "bad.txt").write_bytes(b"ok.\n\xff\n")
    with pytest.raises(CorpusError, match=r"bad\.txt:2: invalid UTF-8"):
        build_store(tmp_path / "bad.txt", en_tokenizer_dir, tmp_path / "s", workers=2)
    assert not (tmp_path / "s").exists() and not list(tmp_path.glob(".s.tmp*"))  # failed builds leave nothing
    store = build_store(corpus, en_tokenizer_dir, tmp_path / "s")
    with pytest.raises(CorpusError, match="already exists .*--overwrite"):
        build_store(corpus, en_tokenizer_dir, tmp_path / "s")
    build_store(corpus, en_tokenizer_dir, tmp_path / "s", overwrite=True, validation_fraction=0)
    assert TokenStore.open(tmp_path / "s").num_documents("validation") == 0

    tokens = store.path / "train" / "00000.tokens.bin"
    tokens.write_bytes(tokens.read_bytes()[:-2])
    with pytest.raises(CorpusError, match=r"00000\.tokens\.bin: .* truncated or corrupt"):
        TokenStore.open(store.path)
    (store.path / "meta.json").write_text("{broken")
    with pytest.raises(CorpusError, match=r"meta\.json:1: not valid JSON \(.*\); rebuild the store"):
        TokenStore.open(store.path)
    with pytest.raises(CorpusError, match=r"meta\.json: not found"):
        TokenStore.open(tmp_path)


def test_cli_build_and_info(corpus, en_tokenizer_dir, tmp_path, capsys):
    out = tmp_path / "cli_store"
    rc = cli_main(["data", "build", "--input", str(corpus / "a.txt"), str(corpus / "c.jsonl"), "--tokenizer",
                   str(en_tokenizer_dir), "--out", str(out), "--workers", "1", "--quiet"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "train" in printed and "sentences" in printed and "MB/s" in printed
    assert cli_main(["data", "info", str(out)]) == 0
    assert "fingerprint" in capsys.readouterr().out
    (tmp_path / "bad.txt").write_bytes(b"\xff\n")
    rc = cli_main(["data", "build", "--input", str(tmp_path / "bad.txt"), "--tokenizer", str(en_tokenizer_dir),
                   "--out", str(tmp_path / "x"), "--quiet"])
    assert rc == 2 and "invalid UTF-8" in capsys.readouterr().err


def test_one_huge_document_suggests_max_doc_sentences(en_tokenizer_dir, tmp_path, capsys):
    # a book written one sentence per line, with no blank line anywhere: one document of 1,200 sentences
    (tmp_path / "book.txt").write_text("".join(f"this is sentence number {i} of the book.\n" for i in range(1200)))
    args = ["data", "build", "--input", str(tmp_path / "book.txt"), "--tokenizer", str(en_tokenizer_dir),
            "--workers", "1", "--validation-fraction", "0", "--quiet"]
    assert cli_main(args + ["--out", str(tmp_path / "store")]) == 0
    assert "1 document(s) of 1,200 sentences on average" in capsys.readouterr().out
    assert cli_main(args + ["--out", str(tmp_path / "cut"), "--max-doc-sentences", "100"]) == 0
    assert "--max-doc-sentences" not in capsys.readouterr().out


def test_overwrite_replaces_only_a_store(corpus, en_tokenizer_dir, tmp_path):
    """--overwrite deletes a store it replaces, and nothing else: a folder that is not a store is refused intact."""
    mine = tmp_path / "thesis"
    mine.mkdir()
    (mine / "chapter1.tex").write_text("years of work\n")
    with pytest.raises(CorpusError, match=r"thesis: --overwrite replaces only a token store, and this is not one"):
        build_store(corpus / "a.txt", en_tokenizer_dir, mine, overwrite=True)
    assert (mine / "chapter1.tex").read_text() == "years of work\n"


def test_a_killed_builds_temp_folder_is_removed_by_the_next_build(corpus, en_tokenizer_dir, tmp_path):
    """A build killed mid-way leaves .STORE.tmp-PID/; the next build of that store removes it once the pid is
    gone (a live pid's folder is left alone)."""
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)  # that process has exited
    stale = tmp_path / f".s.tmp-{dead_pid}"
    (stale / "train").mkdir(parents=True)
    (stale / "train" / "00000.tokens.bin").write_bytes(b"\0" * 1000)
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        busy = tmp_path / f".s.tmp-{alive.pid}"
        busy.mkdir()
        build_store(corpus / "a.txt", en_tokenizer_dir, tmp_path / "s", validation_fraction=0)
        assert not stale.exists() and busy.is_dir()
    finally:
        alive.kill()
        alive.wait()
