"""Stage 2: chunking, SOP/NSP pairs, n-gram whole-word masking, determinism, sampler sharding and resume."""

import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps
from torch.utils.data import DataLoader

from litebert.data import pretraining
from litebert.data.pretraining import (
    PretrainingDataset,
    ResumableSampler,
    build_chunk_index,
    chunk_index_blocks,
    choose_ngram_spans,
    collate_pretraining,
    greedy_spans,
    greedy_spans_batch,
    make_rng,
    mask_batch,
    ngram_probabilities,
    parse_phases,
    phase_for_step,
    truncation_counts,
)
from litebert.data import draws
from litebert.data.store_build import build_store
from litebert.errors import ConfigError, CorpusError
from litebert.tokenizer import AlbertTokenizer, WordPieceTokenizer

# -- fixtures: an English store (30k-clean SentencePiece) and a Chinese one (albert_zh WordPiece) -------------------


@pytest.fixture(scope="module")
def en(shared_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("en")
    tok = AlbertTokenizer(shared_data / "albert-vocab" / "30k-clean.model")
    tok.save_pretrained(root / "tok")
    lines = []
    for name in ("austen-emma.txt", "chesterton-brown.txt"):
        text = (shared_data / "gutenberg" / name).read_text(encoding="utf-8").split("\n")[:700]
        for i in range(0, len(text), 35):  # documents of 35 sentences, plus a one-sentence document each time
            lines += text[i : i + 35] + ["", text[i], ""]
    (root / "corpus.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    store = build_store(root / "corpus.txt", root / "tok", root / "store", validation_fraction=0.1, seed=0)
    return store, tok


@pytest.fixture(scope="module")
def en_shards(en, tmp_path_factory):
    """The en corpus again, in small shards: chunk index blocks and store lookups cross shard boundaries."""
    store, _ = en
    root = tmp_path_factory.mktemp("en_shards")
    return build_store(store.path.parent / "corpus.txt", store.path.parent / "tok", root / "store",
                       validation_fraction=0.1, seed=0, shard_tokens=4000)


@pytest.fixture(scope="module")
def zh(shared_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("zh")
    tok = WordPieceTokenizer(shared_data / "chinese" / "albert_zh_vocab.txt")
    tok.save_pretrained(root / "tok")
    contexts = json.loads((shared_data / "chinese" / "cmrc2018" / "cmrc2018_dev.json").read_text(encoding="utf-8"))
    with open(root / "zh.jsonl", "w", encoding="utf-8") as f:
        for c in contexts[:40]:
            f.write(json.dumps({"text": c["context_text"]}, ensure_ascii=False) + "\n")
    store = build_store(root / "zh.jsonl", root / "tok", root / "store", validation_fraction=0)
    return store, tok


def _unmasked(ex) -> np.ndarray:
    ids = ex["input_ids"].copy()
    real = ex["masked_weights"] > 0
    ids[ex["masked_positions"][real]] = ex["masked_ids"][real]
    return ids


def _segments(ex, sep_id) -> tuple[np.ndarray, np.ndarray]:
    ids = _unmasked(ex)
    seps = np.flatnonzero(ids == sep_id)
    first_sep = np.flatnonzero(ex["token_type_ids"] == 1)[0] - 1
    assert ids[first_sep] == sep_id and seps[-1] == len(ids) - 1
    return ids[1:first_sep], ids[first_sep + 1 : -1]


def _contains(haystack: np.ndarray, needle: np.ndarray) -> int:
    """Start of needle in haystack (both token arrays), or -1."""
    windows = np.lib.stride_tricks.sliding_window_view(haystack, len(needle))
    hits = np.flatnonzero((windows == needle).all(axis=1))
    return int(hits[0]) if len(hits) else -1


# -- n-gram masking -----------------------------------------------------------------------------------------------


def test_ngram_probabilities():
    np.testing.assert_allclose(ngram_probabilities(3), [6 / 11, 3 / 11, 2 / 11])
    np.testing.assert_allclose(ngram_probabilities(3, favor_shorter=False), [2 / 11, 3 / 11, 6 / 11])


@pytest.mark.parametrize("favor_shorter", [True, False])
def test_ngram_lengths_follow_one_over_n(favor_shorter):
    """The first candidate visited is never rejected (nothing is covered yet, the budget fits 3 words), so its
    drawn n is an unbiased sample of p(n) whenever 3 words remain in its segment."""
    pvals = ngram_probabilities(3, favor_shorter)
    num_words = 60
    pos = list(range(num_words))
    end = [p + 1 for p in pos]
    avail = np.minimum(3, num_words - np.arange(num_words))
    counts = np.zeros(3)
    for i in range(4000):
        spans = choose_ngram_spans(pos, end, avail, 20, pvals, make_rng(7, i))
        k, drawn, used = spans[0]
        assert used == drawn <= avail[k]
        if avail[k] == 3:
            counts[drawn - 1] += 1
    result = sps.chisquare(counts, counts.sum() * pvals)
    assert result.pvalue > 1e-3, (counts / counts.sum(), pvals)


def test_ngram_spans_respect_budget_segments_and_each_other():
    pvals = ngram_probabilities(3)
    rng = make_rng(1)
    for i in range(300):
        sizes = rng.integers(1, 4, size=40)  # tokens per word
        end = np.cumsum(sizes)
        pos = end - sizes
        segment_end = np.full(40, 40)
        segment_end[:17] = 17  # two segments: words 0..16 and 17..39
        avail = np.minimum(3, segment_end - np.arange(40))
        spans = choose_ngram_spans(pos.tolist(), end.tolist(), avail, 12, pvals, make_rng(2, i))
        covered = [w for k, _, n in spans for w in range(k, k + n)]
        assert len(covered) == len(set(covered))  # no overlapping spans
        assert all(n <= drawn and (k < 17) == (k + n - 1 < 17) for k, drawn, n in spans)  # inside a segment
        assert sum(end[k + n - 1] - pos[k] for k, _, n in spans) <= 12


def test_span_choice_over_a_batch_equals_the_per_sequence_loop():
    """greedy_spans_batch (one loop over a batch, memoryviews) chooses exactly what greedy_spans chooses sequence by
    sequence: budgets that force back-offs, n-grams that collide, words of several tokens, 1- to 4-grams."""
    rng = make_rng(3)
    for trial in range(200):
        count = int(rng.integers(1, 9))
        words = rng.integers(1, 60, count)  # [B] words per sequence
        first = np.r_[0, np.cumsum(words)]  # [B + 1]
        sizes = rng.integers(1, 5, first[-1])  # tokens per word
        ends = np.cumsum(sizes)
        starts = ends - sizes
        seq_end = np.repeat(first[1:], words)  # one segment per sequence
        drawn = np.minimum(rng.integers(1, 5, first[-1]), seq_end - np.arange(first[-1]))  # n <= words left
        order = np.concatenate([first[b] + rng.permutation(words[b]) for b in range(count)])
        budgets = rng.integers(1, 25, count)
        expected, covered = [], bytearray(int(first[-1]))
        for b in range(count):
            greedy_spans(order[first[b] : first[b + 1]].tolist(), drawn.tolist(), starts.tolist(), ends.tolist(),
                         int(budgets[b]), covered, expected)
        assert greedy_spans_batch(order, drawn, starts, ends, first, budgets) == expected, trial


def test_batched_masking_is_uniform_over_words_and_independent_of_the_batch():
    """mask_batch over 400 sequences of 60 one-token words: every word is masked equally often (the shuffled
    visiting order is uniform), each sequence masks exactly its budget, and a sequence masked alone is masked the
    same as inside the batch."""
    count, words, budget = 400, 60, 9
    one = np.r_[0, np.arange(10, 10 + words), 1]  # [CLS] w1..w60 [SEP] as ids 0, 10.., 1
    ids = np.tile(one, count)
    maskable = np.tile(np.r_[False, np.ones(words, bool), False], count)
    offsets = np.arange(count + 1) * len(one)
    keys = draws.stream_keys((5, 2, 0), np.arange(count))
    budgets = np.full(count, budget)
    m = mask_batch(ids, np.ones(len(ids), bool), maskable, offsets, budgets, ngram_probabilities(3), 3,
                   np.arange(10, 100), keys)
    assert np.array_equal(np.bincount(m.example, minlength=count), budgets)
    assert maskable[m.positions].all() and np.array_equal(m.labels, ids[m.positions])
    per_word = np.bincount(m.positions - offsets[m.example], minlength=len(one))[1:-1]
    assert sps.chisquare(per_word).pvalue > 1e-3, per_word
    for b in (0, 7, 399):
        alone = mask_batch(one, np.ones(len(one), bool), maskable[: len(one)], np.array([0, len(one)]),
                           budgets[:1], ngram_probabilities(3), 3, np.arange(10, 100), keys[b : b + 1])
        rows = m.example == b
        assert np.array_equal(alone.positions, m.positions[rows] - offsets[b])
        assert np.array_equal(alone.input_ids, m.input_ids[offsets[b] : offsets[b + 1]])


def test_counter_draws_are_uniform_and_binomial():
    keys = draws.stream_keys((0, 1, 2), np.arange(20000))
    u = draws.uniform(keys, 3, 0)
    assert u.min() >= 0 and u.max() < 1 and sps.kstest(u, "uniform").pvalue > 1e-3
    assert sps.pearsonr(u, draws.uniform(keys, 3, 1))[0] < 0.03  # another counter: another value
    assert not np.array_equal(keys, draws.stream_keys((0, 1, 3), np.arange(20000)))
    assert np.array_equal(draws.below(np.array([0.0, 0.5, 1 - 2**-53]), 7), [0, 3, 6])
    trials = np.tile([0, 1, 5, 64, 65, 200], 3000)
    ones = draws.binomial_half(draws.stream_keys((9,), np.arange(len(trials))), 1, trials)
    for k in (1, 5, 64, 65, 200):
        got = ones[trials == k]
        assert got.min() >= 0 and got.max() <= k
        expected = sps.binom.pmf(np.arange(k + 1), k, 0.5) * len(got)
        big = expected > 5  # chi-square over the bins with enough mass, the tails pooled
        observed, expected_big = np.bincount(got, minlength=k + 1)[big], expected[big]
        if not big.all():
            observed, expected_big = np.r_[observed, (~big[got]).sum()], np.r_[expected_big, expected[~big].sum()]
        assert sps.chisquare(observed, expected_big).pvalue > 1e-3, k
    assert (ones[trials == 0] == 0).all()


@pytest.mark.parametrize("kwargs", [{}, {"objective": "nsp"}, {"objective": "none", "max_seq_length": 48},
                                    {"single_sentence": "split", "mask_unit": "token", "max_seq_length": 40}])
def test_an_example_does_not_depend_on_the_batch_that_builds_it(en, kwargs):
    """Example i of epoch e is a pure function of (seed, e, i): built alone, in any batch, in any order, by the
    DataLoader's __getitems__, the arrays are identical (what exact resume and resharding rely on)."""
    store, _ = en
    ds = PretrainingDataset(store, seed=6, **kwargs)
    ds.set_epoch(1)
    picks = np.random.default_rng(1).permutation(len(ds))[:40]
    batch = ds.examples(picks)
    again = ds.__getitems__(np.r_[picks[25:], picks[:25]].tolist())
    for j, i in enumerate(picks.tolist()):
        alone = ds.example(i)
        for other in (batch[j], again[(j - 25) % 40]):
            assert other.keys() == alone.keys()
            for key, value in alone.items():
                assert np.array_equal(other[key], value), (key, i)
    assert ds.example(int(picks[0]), epoch=2)["input_ids"].tolist() != batch[0]["input_ids"].tolist()
    with pytest.raises(IndexError, match="out of range"):
        ds.examples([0, len(ds)])


def test_a_batchs_collate_equals_collating_its_examples(en):
    store, _ = en
    ds = PretrainingDataset(store, max_seq_length=64, seed=1)
    batch = ds.examples(range(10, 26))
    for pad_to in (None, 70):
        fast, slow = collate_pretraining(batch, pad_to=pad_to, pad_id=ds.pad_id), \
            collate_pretraining(list(batch), pad_to=pad_to, pad_id=ds.pad_id)
        assert fast.keys() == slow.keys()
        for key in fast:
            assert fast[key].dtype == slow[key].dtype and torch.equal(fast[key], slow[key]), key
    with pytest.raises(ConfigError, match="pad_to=10"):
        collate_pretraining(batch, pad_to=10)


def _masking_stats(ds, count):
    total_len = masked = n_mask = n_kept = 0
    randoms = []
    keys = [(e, i) for e in range(10) for i in range(len(ds.chunk_index(e)))][:count]  # several epochs
    for epoch, i in keys:
        ex = ds.example(i, epoch=epoch)
        length = len(ex["input_ids"])
        real = ex["masked_weights"] > 0
        positions, labels = ex["masked_positions"][real], ex["masked_ids"][real]
        assert np.all(np.diff(positions) > 0) and positions.min() > 0
        expected = min(ds.max_predictions, max(1, round(length * ds.masked_lm_prob)))
        assert len(positions) <= expected
        inputs = ex["input_ids"][positions]
        assert not np.isin(labels, [ds.cls_id, ds.sep_id]).any()  # [CLS]/[SEP] never masked
        total_len += length
        masked += len(positions)
        n_mask += int((inputs == ds.mask_id).sum())
        n_kept += int((inputs == labels).sum())
        randoms += inputs[(inputs != ds.mask_id) & (inputs != labels)].tolist()
    return total_len, masked, n_mask, n_kept, np.array(randoms)


def _within(observed, n, p, sigmas=5.0):
    return abs(observed / n - p) <= sigmas * np.sqrt(p * (1 - p) / n)


def test_mask_rate_and_80_10_10(en):
    store, tok = en
    ds = PretrainingDataset(store, max_seq_length=128, max_predictions_per_seq=20, seed=3)
    total_len, masked, n_mask, n_kept, randoms = _masking_stats(ds, 600)
    assert 0.13 <= masked / total_len <= 0.155  # 15%, capped at 20 per 128-token sequence
    assert _within(n_mask, masked, 0.8) and _within(n_kept, masked, 0.1 + 0.1 / tok.vocab_size)
    assert _within(len(randoms), masked, 0.1 * (1 - 1 / tok.vocab_size))
    assert not set(randoms.tolist()) & tok.special_ids
    assert len(ds.replacement_ids) == tok.vocab_size - len(tok.special_ids)


def test_whole_word_spans_never_split_a_word_en_zh(en, zh):
    for (store, tok), count in ((en, 300), (zh, 300)):
        ds = PretrainingDataset(store, max_seq_length=128, seed=5)
        word_start = tok.word_start_mask()
        randoms = []
        for i in range(min(count, len(ds))):
            ex = ds[i]
            ids = _unmasked(ex)
            special = np.isin(ids, [ds.cls_id, ds.sep_id])
            segment_start = np.r_[False, special[:-1]]
            starts = word_start[ids] | segment_start | special  # a position where a new unit begins
            masked = np.zeros(len(ids), bool)
            masked[ex["masked_positions"][ex["masked_weights"] > 0]] = True
            # entering a masked run must be at a word start; leaving one must be at a word start or special
            entering = masked & ~np.r_[False, masked[:-1]]
            leaving = ~masked & np.r_[False, masked[:-1]]
            assert starts[entering].all() and starts[leaving].all(), tok.convert_ids_to_tokens(ids)
            inputs = ex["input_ids"][masked]
            randoms += inputs[(inputs != ds.mask_id) & (inputs != ids[masked])].tolist()
        assert not set(randoms) & tok.special_ids  # zh: 106 special/unused ids are never drawn


# -- pairs --------------------------------------------------------------------------------------------------------


def test_swapped_example_is_in_order_twin_exchanged(en):
    store, tok = en
    ds = PretrainingDataset(store, max_seq_length=64, seed=11)
    checked = 0
    chunks = ds.chunk_index()
    for i in range(200):
        if chunks.ends[i] - chunks.starts[i] < 2:
            continue
        straight, swapped = ds.example(i, swap=False), ds.example(i, swap=True)
        a0, b0 = _segments(straight, ds.sep_id)
        a1, b1 = _segments(swapped, ds.sep_id)
        np.testing.assert_array_equal(a1, b0)
        np.testing.assert_array_equal(b1, a0)
        assert (straight["sop_label"], swapped["sop_label"]) == (0, 1)
        # the in-order pair is contiguous text of the chunk: A then B, each possibly trimmed at its outer ends
        chunk = store.split().tokens(int(chunks.starts[i]), int(chunks.ends[i]))
        start_a, start_b = _contains(chunk, a0), _contains(chunk, b0)
        assert 0 <= start_a and start_a + len(a0) <= start_b
        assert ds[i]["sop_label"] in (0, 1)
        checked += 1
    assert checked > 50


@pytest.mark.parametrize("single_sentence", ["split", "random_document"])
def test_sop_labels_balanced(en, single_sentence):
    store, _ = en
    ds = PretrainingDataset(store, max_seq_length=128, seed=2, single_sentence=single_sentence)
    labels = np.array([ds[i]["sop_label"] for i in range(len(ds))])
    chunks = ds.chunk_index()
    single = (chunks.ends - chunks.starts) == 1
    # official: a single-sentence chunk takes B from another document and is always labelled 1
    expected = 0.5 if single_sentence == "split" else 0.5 * (1 + single.mean())
    assert single.any() and _within(labels.sum(), len(labels), expected)
    if single_sentence == "random_document":
        assert labels[single].all()


def test_nsp_and_none_objectives(en):
    store, _ = en
    nsp = PretrainingDataset(store, max_seq_length=128, seed=4, objective="nsp")
    chunks = nsp.chunk_index()
    labels, multi = [], (chunks.ends - chunks.starts) >= 2
    for i in range(len(nsp)):
        ex = nsp[i]
        labels.append(ex["sop_label"])
        if ex["sop_label"] == 0:  # actual next: A then B, contiguous in the chunk
            a, b = _segments(ex, nsp.sep_id)
            chunk = store.split().tokens(int(chunks.starts[i]), int(chunks.ends[i]))
            assert 0 <= _contains(chunk, a) <= _contains(chunk, b)
    labels = np.array(labels)
    assert _within(labels[multi].sum(), multi.sum(), 0.5) and labels[~multi].all()
    none = PretrainingDataset(store, max_seq_length=128, seed=4, objective="none")
    for i in range(20):
        ex = none[i]
        assert ex["sop_label"] == -100 and not ex["token_type_ids"].any()
        assert (ex["input_ids"] == none.sep_id).sum() == 1 and len(ex["input_ids"]) <= 128


def test_truncation_counts_match_official_loop():
    @given(st.integers(1, 300), st.integers(1, 300), st.integers(2, 300))
    @settings(max_examples=400, deadline=None)
    def check(la, lb, max_tokens):
        a, b = la, lb  # official truncate_seq_pair: trim the longer segment (B on ties) until it fits
        while a + b > max_tokens:
            if a > b:
                a -= 1
            else:
                b -= 1
        assert truncation_counts(la, lb, max_tokens) == (la - a, lb - b)

    check()


def test_sequences_fit_and_short_seq_prob(en):
    store, _ = en
    ds = PretrainingDataset(store, max_seq_length=64, short_seq_prob=0.1, seed=8)
    lengths = [len(ds[i]["input_ids"]) for i in range(len(ds))]
    assert max(lengths) == 64
    targets = ds.chunk_index().targets
    assert targets.min() >= 2 and targets.max() == 61
    assert _within((targets < 61).sum(), len(targets), 0.1 * (1 - 1 / 60))


# -- chunk index --------------------------------------------------------------------------------------------------


@st.composite
def _corpus_shapes(draw):
    lengths = draw(st.lists(st.integers(1, 40), min_size=1, max_size=120))
    cuts = sorted(set(draw(st.lists(st.integers(1, len(lengths)), max_size=10))) | {len(lengths)})
    return np.array(lengths), np.array([0] + cuts), draw(st.integers(2, 60)), draw(st.sampled_from([0.0, 0.3, 1.0]))


@given(_corpus_shapes(), st.integers(0, 2**31))
@settings(max_examples=150, deadline=None)
def test_chunk_index_is_official_greedy_chunking(shape, seed):
    lengths, docs, max_tokens, short_prob = shape
    index = build_chunk_index(lengths, docs, max_tokens, short_prob, make_rng(seed))
    # chunks tile the sentences in order and never cross a document
    assert index.starts[0] == 0 and np.array_equal(index.starts[1:], index.ends[:-1]) and index.ends[-1] == len(lengths)
    doc_of = np.searchsorted(docs, np.arange(len(lengths)), side="right") - 1
    assert np.array_equal(doc_of[index.starts], doc_of[index.ends - 1])
    # greedy: a chunk stops at the first sentence that brings it to its target, or at the document's end
    for s, e, target in zip(index.starts, index.ends, index.targets):
        size = lengths[s:e].sum()
        doc_end = docs[doc_of[s] + 1]
        assert size >= target or e == doc_end
        assert lengths[s : e - 1].sum() < target
    if short_prob == 0:
        assert (index.targets == max_tokens).all()
        starts, s = [], 0  # the official loop, for a fixed target
        for d in range(len(docs) - 1):
            s, size = docs[d], 0
            starts.append(s)
            for i in range(docs[d], docs[d + 1]):
                size += lengths[i]
                if size >= max_tokens and i + 1 < docs[d + 1]:
                    starts.append(i + 1)
                    size = 0
        assert index.starts.tolist() == starts


@pytest.mark.parametrize("draw", ["chunk", "document"])
def test_chunk_index_in_blocks_equals_in_memory(en_shards, draw):
    split = en_shards.split("train")
    assert len(split.shards) > 3
    lengths, docs = split.sentence_lengths, split.document_offsets
    for seed, short_prob, max_tokens, blocks in ((0, 0.1, 125, (1, 7, 10**9)), (5, 0.5, 61, (3, 50)),
                                                 (9, 1.0, 13, (11,))):
        keys = (seed, 1, 2)
        ref = build_chunk_index(lengths, docs, max_tokens, short_prob, make_rng(*keys), draw)
        for block in blocks:  # odd sizes: a call's 32-bit draws end in the middle of a 64-bit output
            got = zip(*chunk_index_blocks(split, max_tokens, short_prob, keys, draw, block))
            for a, b in zip(map(np.concatenate, got), (ref.starts, ref.ends, ref.targets)):
                np.testing.assert_array_equal(a, b)


def test_epoch_index_is_memory_mapped_and_examples_do_not_load_the_split(en_shards, monkeypatch):
    kwargs = dict(seed=4, single_sentence="skip", max_seq_length=64)
    ds = PretrainingDataset(en_shards.path, **kwargs)  # its own store object: nothing cached by other tests
    chunks = ds.chunk_index(1)
    assert isinstance(chunks.starts, np.memmap) and chunks.starts.dtype == np.int32
    split = en_shards.split("train")
    ref = build_chunk_index(split.sentence_lengths, split.document_offsets, 61, 0.1, make_rng(4, 1, 1))
    pair = ref.ends - ref.starts >= 2  # "skip" drops single-sentence chunks
    for a, b in zip((chunks.starts, chunks.ends, chunks.targets), (ref.starts, ref.ends, ref.targets)):
        np.testing.assert_array_equal(a, b[pair])
    batch = ds.examples(np.arange(0, len(chunks), 2), epoch=1).collate()
    balance = ds.label_balance(1)
    # no whole-split array was loaded: the examples read the shards' memory maps per batch
    assert not {"sentence_lengths", "sentence_offsets", "document_offsets"} & set(ds.split.__dict__)
    # the index built (and the balance counted) in blocks of a few sentences gives the same examples
    monkeypatch.setattr(pretraining, "CHUNK_BLOCK_SENTENCES", 5)
    small = PretrainingDataset(en_shards.path, **kwargs)
    again = small.examples(np.arange(0, len(chunks), 2), epoch=1).collate()
    assert all(torch.equal(batch[k], again[k]) for k in batch)
    assert small.label_balance(1) == balance


def test_sampler_order_is_numpys_permutation_in_int32():
    for n, seed, epoch in ((1, 0, 0), (1000, 3, 2), (54321, 7, 5)):
        order = ResumableSampler(n, seed=seed, epoch=epoch).global_order()
        assert order.dtype == np.int32  # half of permutation(n)'s memory, the same order (resume stays exact)
        np.testing.assert_array_equal(order, make_rng(seed, 3, epoch).permutation(n))
    sampler = ResumableSampler(20000, rank=1, world_size=3, seed=2, offset=17, skip=5)
    assert list(sampler) == sampler.indices().tolist() and len(list(sampler)) == len(sampler)


# -- determinism, collation, DataLoader ---------------------------------------------------------------------------


def _batches(ds, sampler, num_workers=0, count=3):
    loader = DataLoader(ds, batch_size=4, sampler=sampler, num_workers=num_workers, collate_fn=ds.collate_fn)
    out = []
    for batch in loader:
        out.append(batch)
        if len(out) == count:
            break
    return out


def test_same_seed_same_batches_other_epoch_other_masks(en):
    store, _ = en
    first = _batches(PretrainingDataset(store, seed=9), ResumableSampler(200, seed=1))
    again = _batches(PretrainingDataset(store, seed=9), ResumableSampler(200, seed=1))
    for x, y in zip(first, again):
        assert x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)
    other_seed = _batches(PretrainingDataset(store, seed=10), ResumableSampler(200, seed=1))
    assert not torch.equal(first[0]["input_ids"], other_seed[0]["input_ids"])
    # with fixed targets the chunks are the same every epoch, but the masks are drawn again
    ds = PretrainingDataset(store, seed=9, short_seq_prob=0.0)
    e0 = [ds.example(i, epoch=0) for i in range(30)]
    e1 = [ds.example(i, epoch=1) for i in range(30)]
    assert np.array_equal(ds.chunk_index(0).starts, ds.chunk_index(1).starts)
    differ = sum(not np.array_equal(a["masked_positions"], b["masked_positions"]) for a, b in zip(e0, e1))
    assert differ >= 25
    ds.set_epoch(1)
    assert all(np.array_equal(ds[i]["input_ids"], e1[i]["input_ids"]) for i in range(5))


def test_dataloader_workers_integration(en):
    store, _ = en
    ds = PretrainingDataset(store, max_seq_length=96, seed=1)
    ds.set_epoch(2)
    with_workers = _batches(ds, ResumableSampler(ds, seed=4), num_workers=2)
    in_process = _batches(ds, ResumableSampler(ds, seed=4), num_workers=0)
    for batch, ref in zip(with_workers, in_process):
        assert all(torch.equal(batch[k], ref[k]) for k in ref)
        b, length = batch["input_ids"].shape
        assert b == 4 and length <= 96 and batch["masked_positions"].shape == (4, 20)
        assert batch["masked_weights"].dtype == torch.float32 and batch["sop_labels"].shape == (4,)
        assert (batch["masked_positions"] < batch["attention_mask"].sum(1, keepdim=True)).all()
        padding = batch["attention_mask"] == 0
        assert (batch["input_ids"][padding] == ds.pad_id).all() and not batch["token_type_ids"][padding].any()


def test_collate_pad_to(en):
    store, _ = en
    ds = PretrainingDataset(store, max_seq_length=64, seed=1)
    examples = [ds[i] for i in range(3)]
    batch = collate_pretraining(examples, pad_to=80)
    assert batch["input_ids"].shape == (3, 80)
    for row, ex in zip(batch["input_ids"], examples):
        assert row[: len(ex["input_ids"])].tolist() == ex["input_ids"].tolist()
    with pytest.raises(ConfigError, match="pad_to=10"):
        collate_pretraining(examples, pad_to=10)


def test_dataset_config_errors(en, zh):
    store, _ = en
    with pytest.raises(CorpusError, match="split 'validation' has no documents"):
        PretrainingDataset(zh[0], split="validation")
    for kwargs in ({"objective": "mlm"}, {"max_seq_length": 4}, {"masked_lm_prob": 0}, {"seed": -1},
                   {"single_sentence": "x"}):
        with pytest.raises(ConfigError):
            PretrainingDataset(store, **kwargs)


# -- sampler ------------------------------------------------------------------------------------------------------


@given(st.integers(0, 60), st.integers(1, 6), st.booleans(), st.booleans(), st.integers(0, 3))
@settings(max_examples=200, deadline=None)
def test_rank_shards_disjoint_and_cover(n, world, shuffle, drop_last, epoch):
    samplers = [ResumableSampler(n, rank=r, world_size=world, seed=5, shuffle=shuffle, drop_last=drop_last,
                                 epoch=epoch) for r in range(world)]
    lists = [list(s) for s in samplers]
    assert len({len(x) for x in lists}) == 1
    real = [np.array(x)[~s.padding_mask()] for x, s in zip(lists, samplers)]
    flat = np.concatenate(real) if real else np.zeros(0)
    assert len(flat) == len(set(flat.tolist()))  # disjoint
    assert sum(len(x) for x in lists) - len(flat) == samplers[0].num_padding
    if drop_last:
        assert len(flat) == n // world * world
    else:
        assert sorted(flat.tolist()) == list(range(n))  # cover


def test_sampler_starts_anywhere_in_an_epoch():
    """skip: this rank's first indices are done; offset: the global order's first positions are done, and the rest
    is dealt anew (what BatchStream builds on a resume)."""
    full = list(ResumableSampler(103, rank=1, world_size=3, seed=8, epoch=4))
    resumed = ResumableSampler(103, rank=1, world_size=3, seed=8, epoch=4, skip=11)
    assert len(resumed) == len(full) - 11 and list(resumed) == full[11:]
    assert list(resumed) == list(resumed)  # no position of its own: iterating again gives the same
    assert list(ResumableSampler(103, rank=1, world_size=3, seed=8, epoch=0, skip=11)) != full[11:]
    assert list(ResumableSampler(103, rank=1, world_size=3, seed=8, epoch=4, skip=len(full))) == []  # not again
    order = ResumableSampler(103, seed=8, epoch=4).global_order()
    dealt = ResumableSampler(103, rank=1, world_size=2, seed=8, epoch=4, offset=30, skip=2, drop_last=True)
    assert list(dealt) == order[30:][: 73 // 2 * 2][1::2][2:].tolist()
    with pytest.raises(ConfigError, match="offset=-1"):
        ResumableSampler(103, offset=-1)


def test_phase_for_step():
    phases = [(0.9, 128), (0.1, 512)]
    assert phase_for_step(0.0, phases) == (0, 128)
    assert phase_for_step(0.8999, phases).max_seq_length == 128
    assert phase_for_step(0.9, phases) == (1, 512)
    assert phase_for_step(1.0, phases) == (1, 512)
    assert phase_for_step(899, phases, total_steps=1000).max_seq_length == 128
    assert phase_for_step(900, phases, total_steps=1000).max_seq_length == 512
    with pytest.raises(ConfigError, match="outside training"):
        phase_for_step(1001, phases, total_steps=1000)


def test_parse_phases():
    assert parse_phases("0.9:128,0.1:512", 64) == [(0.9, 128), (0.1, 512)]
    assert parse_phases(None, 64) == parse_phases("", 64) == [(1.0, 64)]
    for bad in ("0.5:128", "0.9:128,0.1:2", "nan:128", "0.5:64,nan:128,0.5:32", "-0.5:64,1.5:128"):
        with pytest.raises(ConfigError, match="fractions must be positive and sum to 1, lengths >= 8"):
            parse_phases(bad, 64)
    with pytest.raises(ConfigError, match="expected FRACTION:LENGTH"):
        parse_phases("0.9:128;0.1:512", 64)
