"""A store built by many machines: `build_part` (`data build --shard I/N`) on each, then `merge_parts` (`data
merge`): the merged store reads exactly like a single-machine build of the same files."""

import gzip
import re
import json

import numpy as np
import pytest

from litebert.cli import main as cli_main
from litebert.data.merge import build_part, merge_parts, plan_parts
from litebert.data.pretraining import PretrainingDataset
from litebert.data.store import SPLITS, TokenStore
from litebert.data.store_build import build_store
from litebert.errors import CorpusError

# Settings that exercise everything a part must get right: a validation split, documents cut by
# max_doc_sentences, short documents skipped.
SETTINGS = dict(validation_fraction=0.3, seed=5, max_doc_sentences=12, min_doc_tokens=40)


@pytest.fixture(scope="module")
def corpus(shared_data, tmp_path_factory):
    """7 files of Gutenberg prose (plain text, .gz, JSONL with an empty record), of unequal sizes."""
    root = tmp_path_factory.mktemp("corpus")
    lines = (shared_data / "gutenberg" / "carroll-alice.txt").read_text(encoding="utf-8").split("\n")
    docs = [lines[i : i + 9 + i % 17] for i in range(0, 1400, 25)]
    for k, (a, b) in enumerate([(0, 6), (6, 9), (9, 20), (20, 22), (22, 34), (34, 40)]):
        text = "\n\n".join("\n".join(d) for d in docs[a:b]) + "\n"
        if k == 2:
            with gzip.open(root / f"{k}.txt.gz", "wt", encoding="utf-8") as f:
                f.write(text)
        else:
            (root / f"{k}.txt").write_text(text, encoding="utf-8")
    records = [{"text": " ".join(d)} for d in docs[40:]] + [{"text": "  "}]
    (root / "6.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return root


def documents(store: TokenStore, split: str) -> list[list[list[int]]]:
    s = store.split(split)
    return [[ids.tolist() for ids in s.document(d)] for d in range(len(s))]


def test_merged_parts_read_exactly_like_a_single_build(corpus, en_tokenizer_dir, tmp_path):
    single = build_store(corpus, en_tokenizer_dir, tmp_path / "single", **SETTINGS)
    parts = [build_part(corpus, en_tokenizer_dir, tmp_path / f"part{i}", i, 3, **SETTINGS) for i in range(3)]
    offsets = [p.meta["part"]["doc_offset"] for p in parts]
    assert offsets[0] == 0 and 0 < offsets[1] < offsets[2]  # the later parts number their documents on
    assert all(p.num_documents("train") > 0 for p in parts)
    merged = merge_parts([tmp_path / "part2", tmp_path / "part0", tmp_path / "part1"], tmp_path / "merged")
    assert not (tmp_path / "part0").exists()  # moved into the store, not copied
    assert len(merged.split("train").shards) == 3

    for split in SPLITS:
        assert documents(merged, split) == documents(single, split)
        a, b = merged.split(split), single.split(split)
        assert a.num_sentences == b.num_sentences
        assert all(np.array_equal(a.word_starts(i), b.word_starts(i)) for i in range(a.num_sentences))
    assert 0 < single.num_documents("validation") < single.num_documents("train")
    assert merged.stats == single.stats
    without_shards = lambda meta: {**meta, "splits": {s: {k: v for k, v in meta["splits"][s].items()
                                                         if k != "shards"} for s in SPLITS}}
    assert without_shards(merged.meta) == without_shards(single.meta)
    # The pretraining examples made from them are the same too.
    made = [PretrainingDataset(s, max_seq_length=64, seed=1) for s in (merged, single)]
    assert len(made[0]) == len(made[1]) > 0
    for i in range(0, len(made[0]), 7):
        x, y = made[0][i], made[1][i]
        assert x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)


def test_parts_are_balanced_by_bytes_and_cover_the_listing_once(corpus):
    ranges, listing = plan_parts(corpus, 3)
    files = [f for r in ranges for f in r]
    assert files == sorted(corpus.iterdir()) and all(ranges)
    assert plan_parts(corpus, 3)[1] == listing and plan_parts(corpus, 2)[1] == listing


def test_merge_refuses_parts_that_do_not_belong_together(corpus, en_tokenizer_dir, tmp_path):
    part = lambda name, i, n=3, **kw: build_part(corpus, en_tokenizer_dir, tmp_path / name, i, n, **{**SETTINGS, **kw})
    part("a0", 0), part("a1", 1), part("a2", 2), part("a1bis", 1), part("seed", 2, seed=6), part("of2", 1, 2)
    whole = build_store(corpus, en_tokenizer_dir, tmp_path / "whole", **SETTINGS)
    cases = {
        ("a0", "a1"): "part(s) 2 of 3 missing",
        ("a0", "a1", "a1bis", "a2"): "are both part 1/3",
        ("a0", "a1", "seed"): "not a part of the same build",
        ("a0", "of2", "a2"): "not a part of the same build",
        ("a0", "a1", "whole"): "a whole store, not a part",
    }
    for names, message in cases.items():
        with pytest.raises(CorpusError, match=re.escape(message)):
            merge_parts([tmp_path / n for n in names], tmp_path / "merged")
        assert all((tmp_path / n / "meta.json").is_file() for n in names)  # nothing was moved
    assert not (tmp_path / "merged").exists() and whole.num_documents() > 0
    with pytest.raises(CorpusError, match="no input file falls to this part"):
        build_part(corpus / "0.txt", en_tokenizer_dir, tmp_path / "none", 0, 2)  # its one file is part 1


def test_cli_build_shards_and_merge(corpus, en_tokenizer_dir, tmp_path, capsys):
    for i in range(2):
        assert cli_main(["data", "build", "--input", str(corpus), "--tokenizer", str(en_tokenizer_dir), "--out",
                         str(tmp_path / f"p{i}"), "--shard", f"{i}/2", "--workers", "1", "--quiet"]) == 0
    assert cli_main(["data", "merge", str(tmp_path / "p0"), str(tmp_path / "p1"), "--out", str(tmp_path / "s")]) == 0
    assert "merged     2 part(s)" in capsys.readouterr().out
    single = build_store(corpus, en_tokenizer_dir, tmp_path / "single")
    assert documents(TokenStore.open(tmp_path / "s"), "train") == documents(single, "train")
    assert cli_main(["data", "build", "--input", str(corpus), "--tokenizer", str(en_tokenizer_dir), "--out",
                     str(tmp_path / "x"), "--shard", "2/2"]) == 2
    assert "--shard '2/2': expected I/N with 0 <= I < N" in capsys.readouterr().err


def test_document_count_without_tokenizing_matches_the_reader(tmp_path):
    from litebert.data.corpus import CorpusReader
    from litebert.data.merge import count_documents

    texts = {
        "bom.txt": "\ufeffone\ntwo\n\n\nthree\n",
        "spaces.txt": "a\n \t\nb\n\u3000\nc\r\n\r\n\r\nd",  # whitespace-only lines are blank; no final newline
        "empty.txt": "",
        "blank.txt": "\n\n  \n",
        "gz.txt.gz": "x\n\ny\n",
        "docs.jsonl": '{"text": "A. B."}\n{"text": " "}\n{"text": "C."}\n',
        "bad.txt": b"ok\n\n\xff\xfe bad\n\nmore\n",
    }
    for name, text in texts.items():
        data = text if isinstance(text, bytes) else text.encode("utf-8")
        (tmp_path / name).write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    for cut in (0, 1):
        for policy in ("replace", "skip"):
            files = sorted(tmp_path.iterdir())
            reader = CorpusReader(files, on_bad_utf8=policy, max_doc_sentences=cut)
            for _ in reader.chunks():
                pass
            assert count_documents(files, policy, cut) == reader.stats.documents, (cut, policy)
            assert count_documents(files, policy, cut, workers=2) == reader.stats.documents, (cut, policy)
    with pytest.raises(CorpusError, match=r"bad.txt:3: invalid UTF-8"):
        count_documents([tmp_path / "bad.txt"], "error", 0)
