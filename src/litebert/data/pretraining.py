"""Pretraining examples made on the fly from a token store (stage 2): SOP/NSP pairs, n-gram whole-word masking.

The semantics are those of the official `create_pretraining_data.py` (see reference/anchors-mission.md 2.4), made
per epoch instead of `dupe_factor` static copies, with its defects fixed:

* every random choice of example `index` in epoch `e`, the n-gram length included (official: unseeded global numpy
  RNG), is a counter-based draw keyed by (seed, stream, epoch, index) (litebert.data.draws), so the example is a
  pure function of them, whichever batch, worker or rank builds it; a batch is built with numpy over all its
  examples at once (PretrainingDataset.examples, which a DataLoader calls through __getitems__);
* the "skip if covered" check really skips (official: a `continue` in an inner loop, a no-op);
* whole words come from the store's word-start flags (tokenizer.word_start_mask()), not from a Latin-only rule;
* random replacement tokens never include control/special ids.

Deliberate, documented differences:

* The target length (max_num_tokens, or with short_seq_prob a uniform draw in [2, max_num_tokens]) is drawn per
  chunk (the paper's "10% of the time"), not once per document and dupe copy as the official code does. A short
  document target makes all of that document's chunks short, so the official share of short examples is well
  above short_seq_prob (docs/pretraining_data.md has the measured figures); short_seq_draw="document" does it
  the official way.
* SOP pairs are truncated before the swap, so a swapped example holds exactly the tokens of its in-order twin with
  A and B exchanged (official truncates after the swap: on equal lengths that trims the other segment).
* N-grams stay inside one segment (official lets a 2/3-gram run across [SEP]); at a segment's end only the n that
  fit are drawn, with p renormalised (official draws a longer n there and gets a duplicated shorter span).
* nsp mode: when B comes from a random document the rest of the chunk is dropped (official puts it back, which makes
  the chunk boundaries depend on earlier draws).
* Single-sentence chunks: official (and our default, single_sentence="random_document") takes B from a random other
  document and labels it 1, so a few SOP "swapped" labels are really NSP negatives. single_sentence="split" cuts the
  sentence at a random word start instead and applies the ordinary 50% swap; single_sentence="skip" drops such
  chunks from the epoch. `label_balance()` gives the resulting share of each label without building examples.
* mask_unit="token" masks n-grams of tokens instead of whole words (the pre-wwm Chinese BERT masks characters).
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable, Sequence, Sized
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import numpy as np
import torch
from torch.utils.data import Dataset, Sampler

from litebert.data import draws
from litebert.data.store import StoreSplit, TokenStore
from litebert.errors import ConfigError, CorpusError, TrainingError

OBJECTIVES = ("sop", "nsp", "none")
SINGLE_SENTENCE = ("random_document", "split", "skip")
SHORT_SEQ_DRAWS = ("chunk", "document")
MASK_UNITS = ("word", "token")
IGNORE_LABEL = -100  # sop_label when objective="none" (ignored by cross-entropy)
# Stream tags keep the independent random streams apart (they sit before epoch/index in the entropy).
_CHUNK_STREAM, _EXAMPLE_STREAM, _SAMPLER_STREAM = 1, 2, 3
# Slots of an example's draws (litebert.data.draws): each kind of choice has its own counter space.
_PAIR_DRAWS, _TRUNCATE_A, _TRUNCATE_B, _NGRAM_DRAW, _WORD_ORDER, _MASK_ROLL, _MASK_TOKEN = range(1, 8)


def make_rng(*keys: int) -> np.random.Generator:
    """A Generator seeded from a tuple of non-negative ints (seed, stream, epoch, index...)."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(k) for k in keys])))


# ---------------------------------------------------------------------------------------------------------------
# Chunk index: which sentences make example i of an epoch


@dataclass(frozen=True)
class ChunkIndex:
    starts: np.ndarray  # [N] first sentence (global index in the split)
    ends: np.ndarray  # [N] one past the last sentence
    targets: np.ndarray  # [N] target length in tokens drawn for the chunk

    def __len__(self) -> int:
        return len(self.starts)


def _draw_targets(coins: np.random.Generator, lengths: np.random.Generator, count: int, max_num_tokens: int,
                  short_seq_prob: float) -> np.ndarray:
    """[count] target lengths: max_num_tokens, or with short_seq_prob a uniform draw in [2, max_num_tokens]. The
    coins and the short lengths come from two streams; both draw 32 bits at a time through the bit generator's own
    buffer, so `count` draws made in several calls equal the same draws made in one."""
    short = coins.random(count, dtype=np.float32) < short_seq_prob
    return np.where(short, lengths.integers(2, max_num_tokens + 1, count), max_num_tokens)


def _chain_chunks(lengths: np.ndarray, doc_offsets: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starts and ends [N] of the greedy chunks of whole documents: lengths [S] tokens per sentence, doc_offsets
    [D + 1] first sentence of each document then S, targets [S] the target of a chunk starting at each sentence.

    Every sentence s gets the end `nxt[s]` of a chunk that would start at s (one searchsorted over the running token
    count); the real chunk starts are the orbit of sentence 0 under nxt, found by pointer doubling in
    O(S log N) numpy work instead of a Python loop over chunks.
    """
    num = len(lengths)  # S
    cum = np.concatenate([[0], np.cumsum(lengths)])  # [S + 1]
    doc_end = np.repeat(doc_offsets[1:], np.diff(doc_offsets))  # [S] one past the last sentence of s's document
    nxt = np.searchsorted(cum, cum[:-1] + targets, side="left")  # first end with >= target tokens
    nxt = np.minimum(np.maximum(nxt, np.arange(1, num + 1)), doc_end)  # [S]
    jump = np.append(nxt, num)  # [S + 1]: nxt^(2^k); the end node maps to itself
    on_chain = np.zeros(num + 1, dtype=bool)
    on_chain[0] = True
    while not on_chain[num]:  # after round k: every node reachable from 0 in < 2^(k+1) steps is marked
        on_chain[jump[on_chain]] = True
        jump = jump[jump]
    starts = np.flatnonzero(on_chain[:num])
    return starts, nxt[starts]


def build_chunk_index(lengths: np.ndarray, doc_offsets: np.ndarray, max_num_tokens: int, short_seq_prob: float,
                      rng: np.random.Generator, short_seq_draw: str = "chunk") -> ChunkIndex:
    """Greedy official chunking, vectorised, over in-memory arrays: sentences accumulate into a chunk until it holds
    >= target tokens or the document ends; every chunk draws its own target (short_seq_draw="chunk"), or every
    document draws one for all its chunks (short_seq_draw="document", the official
    create_instances_from_document). The draws: one coin per sentence (or document), then one short length each.

    PretrainingDataset builds the same index block by block into a file (chunk_index_file); this is the reference
    it is tested against.
    """
    count = len(lengths) if short_seq_draw == "chunk" else len(doc_offsets) - 1  # S or D
    targets = _draw_targets(rng, rng, count, max_num_tokens, short_seq_prob)  # [S] or [D]
    if short_seq_draw == "document":
        targets = np.repeat(targets, np.diff(doc_offsets))  # [S] each sentence gets its document's target
    starts, ends = _chain_chunks(lengths, doc_offsets, targets)
    return ChunkIndex(starts, ends, targets[starts])


CHUNK_BLOCK_SENTENCES = 1 << 18  # sentences per block of chunk_index_file: ~20 MB of temporaries at most


def chunk_index_blocks(split: StoreSplit, max_num_tokens: int, short_seq_prob: float, keys: tuple[int, ...],
                       short_seq_draw: str = "chunk", block: int = CHUNK_BLOCK_SENTENCES):
    """build_chunk_index(split's lengths, split's documents, ..., make_rng(*keys)) block by block: yields its
    (starts, ends, targets) for blocks of whole documents in order (chunks never cross a document, so a block's
    chunks are the global ones), reading the split in blocks. The draws are the same: the coins come from one
    Generator in order, the short lengths from a second one first moved past all the coins (build_chunk_index
    draws all coins, then all lengths, from one)."""
    count = split.num_sentences if short_seq_draw == "chunk" else split.num_documents
    coins, short_lengths = make_rng(*keys), make_rng(*keys)
    for done in range(0, count, block):  # skip the coins: the same 32-bit draws, thrown away a block at a time
        short_lengths.random(min(block, count - done), dtype=np.float32)
    for first, lengths, doc_offsets in split.blocks(block):
        n = len(lengths) if short_seq_draw == "chunk" else len(doc_offsets) - 1
        targets = _draw_targets(coins, short_lengths, n, max_num_tokens, short_seq_prob)
        if short_seq_draw == "document":
            targets = np.repeat(targets, np.diff(doc_offsets))
        starts, ends = _chain_chunks(lengths, doc_offsets, targets)
        yield first + starts, first + ends, targets[starts]


def chunk_index_file(blocks, num_sentences: int, pairs_only: bool = False) -> ChunkIndex:
    """A ChunkIndex whose arrays are memory-mapped from an unlinked temporary file (in TMPDIR) written from
    chunk_index_blocks' blocks: the epoch's index costs no process memory beyond the pages read, and the file
    disappears with the last mapping (or the process). pairs_only keeps chunks of >= 2 sentences.
    Records of int32 (int64 when the split has >= 2^31 sentences) start, end, target: one page per lookup."""
    index = np.int32 if num_sentences < 2**31 else np.int64
    record = np.dtype([("start", index), ("end", index), ("target", np.int32)])
    count = 0
    with tempfile.TemporaryFile(prefix="litebert-chunks-") as f:
        for starts, ends, targets in blocks:
            keep = ends - starts >= 2 if pairs_only else slice(None)
            rows = np.empty(len(starts[keep]), record)
            rows["start"], rows["end"], rows["target"] = starts[keep], ends[keep], targets[keep]
            f.write(rows.tobytes())
            count += len(rows)
        f.flush()
        # the mapping holds its own reference to the file: closing it here leaves the data readable
        table = np.memmap(f, dtype=record, mode="r", shape=(count,)) if count else np.zeros(0, record)
    return ChunkIndex(table["start"], table["end"], table["target"])


# ---------------------------------------------------------------------------------------------------------------
# Truncation and n-gram masking


def truncation_counts(len_a, len_b, max_num_tokens: int):
    """Tokens the official truncate_seq_pair removes from A and B: always from the longer, B on ties.
    (Which end each token leaves from is a coin flip per token, i.e. Binomial(k, 1/2) from the front.)
    Ints give a pair of ints; arrays of lengths give a pair of arrays (elementwise)."""
    len_a, len_b = np.asarray(len_a), np.asarray(len_b)
    excess = np.maximum(len_a + len_b - max_num_tokens, 0)
    first = np.minimum(excess, np.abs(len_a - len_b))  # until both have the same length
    rest = excess - first  # then alternately, starting with B
    a_longer = len_a > len_b
    remove_a = np.where(a_longer, first, 0) + rest // 2
    remove_b = np.where(a_longer, 0, first) + (rest + 1) // 2
    return (int(remove_a), int(remove_b)) if remove_a.ndim == 0 else (remove_a, remove_b)


def ngram_probabilities(max_ngram: int, favor_shorter: bool = True) -> np.ndarray:
    """p(n) = (1/n) / sum_k (1/k) for n = 1..max_ngram: 6/11, 3/11, 2/11 for 3 (official favor_shorter_ngram)."""
    p = 1.0 / np.arange(1, max_ngram + 1)
    p /= p.sum()
    return p if favor_shorter else p[::-1].copy()


def draw_ngram_lengths(u: np.ndarray, avail: np.ndarray, pvals: np.ndarray) -> np.ndarray:
    """[W] n per candidate word by inverse CDF from uniforms u [W], with p(n) restricted to n <= avail [W]."""
    csum = np.cumsum(pvals)  # [N]
    return 1 + np.searchsorted(csum[:-1], u * csum[np.asarray(avail) - 1], side="right")


_ONES = [b"\x01" * n for n in range(64)]  # covered[k : k + n] = _ONES[n]


def greedy_spans(order: Sequence[int], drawn: Sequence[int], starts: Sequence[int], ends: Sequence[int],
                 budget: int, covered: bytearray, spans: list[int]) -> None:
    """The official greedy n-gram selection: appends first word, used n of each chosen span to `spans` (flat).

    Candidates are visited in `order`; each has its drawn n; n backs off while the span would exceed the budget;
    spans that touch a covered word are skipped. Word k covers tokens [starts[k], ends[k]); covered (one byte per
    word) is updated in place. Plain lists: this loop runs once per candidate, where numpy calls cost more.
    choose_ngram_spans uses it; mask_batch uses greedy_spans_batch, which makes the same choices for a batch.
    """
    used = 0
    for k in order:
        if covered[k]:  # the official check meant to do this, but its `continue` only left an inner loop
            continue
        n, start = drawn[k], starts[k]
        end = ends[k + n - 1]
        while n > 1 and used + end - start > budget:
            n -= 1  # back off to a shorter n-gram that fits the budget
            end = ends[k + n - 1]
        if used + end - start > budget or (n > 1 and any(covered[k + 1 : k + n])):
            continue
        covered[k : k + n] = _ONES[n]
        used += end - start
        spans += (k, n)
        if used >= budget:
            break


def greedy_spans_batch(order: np.ndarray, drawn: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                       first: np.ndarray, budgets: np.ndarray) -> list[int]:
    """greedy_spans for B sequences in one loop, the same choices: sequence b visits order[first[b]:first[b + 1]]
    (global word numbers) with budgets[b]. order, drawn, starts, ends: [W] int arrays; first: [B + 1].

    Faster than greedy_spans per sequence on its Python lists: a sequence stops after ~20 of its ~100 words, so
    the arrays are read through memoryviews (a Python int made per word visited, not per word) and each word's
    drawn n and token count come packed in one int64; back-off reads the ends only when the drawn span is over
    the budget. Returns first word, used n of each chosen span, flat, sequence after sequence.
    """
    order, drawn, starts, ends = (np.ascontiguousarray(a, dtype=np.int64) for a in (order, drawn, starts, ends))
    size = ends[np.arange(len(drawn)) + drawn - 1] - starts  # [W] tokens of each word's drawn n-gram
    packed = memoryview((size << 32) | drawn)  # [W] n and tokens: one read per visited word
    visit, starts_v, ends_v = memoryview(order), memoryview(starts), memoryview(ends)
    covered, spans, first = bytearray(len(drawn)), [], np.asarray(first).tolist()
    for b, budget in enumerate(budgets.tolist()):
        used = 0
        for k in visit[first[b] : first[b + 1]]:
            if covered[k]:
                continue
            word = packed[k]
            n, tokens = word & 0xFFFFFFFF, word >> 32
            if used + tokens > budget:
                if n == 1:
                    continue
                start = starts_v[k]
                while n > 1 and used + tokens > budget:
                    n -= 1  # back off to a shorter n-gram that fits the budget
                    tokens = ends_v[k + n - 1] - start
                if used + tokens > budget:
                    continue
            if n > 1 and any(covered[k + 1 : k + n]):
                continue
            covered[k : k + n] = _ONES[n]
            used += tokens
            spans += (k, n)
            if used >= budget:
                break
    return spans


def choose_ngram_spans(word_pos: Sequence[int], word_end: Sequence[int], avail: np.ndarray, budget: int,
                       pvals: np.ndarray, rng: np.random.Generator) -> list[tuple[int, int, int]]:
    """Official n-gram selection over the whole words of one sequence, drawing from a numpy Generator. Returns
    (first word, drawn n, used n) per chosen span.

    Word k covers tokens [word_pos[k], word_end[k]). Candidates are visited in random order; each draws n with
    p(n) restricted to n <= avail[k] (words left in its segment); then greedy_spans.
    """
    num_words = len(word_pos)
    order = rng.permutation(num_words).tolist()
    drawn = draw_ngram_lengths(rng.random(num_words), avail, pvals).tolist()  # [W]
    spans: list[int] = []
    greedy_spans(order, drawn, list(word_pos), list(word_end), budget, bytearray(num_words), spans)
    return [(k, drawn[k], n) for k, n in zip(spans[::2], spans[1::2])]


@dataclass
class Masked:
    input_ids: np.ndarray  # [T] the sequences, concatenated, with [MASK] / random / kept tokens where masked
    positions: np.ndarray  # [M] sorted masked positions in the concatenation
    labels: np.ndarray  # [M] the original ids there
    example: np.ndarray  # [M] the sequence each masked position belongs to
    slot: np.ndarray  # [M] its rank among that sequence's masked positions
    kinds: np.ndarray  # [M] int8 what the 80/10/10 rule did there (mlm_scores: MASKED 0, KEPT 1, RANDOM 2)


def mask_batch(ids: np.ndarray, unit_starts: np.ndarray, maskable: np.ndarray, offsets: np.ndarray,
               budgets: np.ndarray, pvals: np.ndarray, mask_id: int, replacement_ids: np.ndarray,
               keys: np.ndarray, replace: tuple[float, float] = (0.8, 0.1)) -> Masked:
    """N-gram whole-word masking of B sequences at once, then 80% [MASK] / 10% kept / 10% random non-special token
    (`replace`: the [MASK] and kept shares; the rest is random; (0.8, 0.1) is ALBERT's rule).

    ids, unit_starts, maskable: [T], the sequences concatenated; sequence b is [offsets[b], offsets[b + 1]) and
    starts and ends with a non-maskable token ([CLS] ... [SEP]). A masked span starts at a flagged token or at the
    first token of a segment; the non-maskable positions separate segments and are never masked. budgets [B]:
    tokens to mask per sequence. keys [B]: each sequence's random stream (draws.stream_keys), so a sequence's
    masks do not depend on the other sequences of the batch. Only the greedy span choice loops in Python.
    """
    total = len(ids)
    boundary = ~maskable  # [T]
    segment_start = np.empty_like(maskable)
    segment_start[:1], segment_start[1:] = True, boundary[:-1]
    unit_start = maskable & (unit_starts | segment_start)  # [T]
    bounds = np.flatnonzero(unit_start | boundary)
    first = np.flatnonzero(unit_start[bounds])  # indices into bounds of word starts
    word_pos = bounds[first]  # [W] first token of each word
    word_end = np.append(bounds, total)[first + 1]  # [W] the next word start or special token
    segment = np.cumsum(boundary)[word_pos]  # [W] segment number of each word (segments never cross sequences)
    last_in_segment = np.searchsorted(segment, segment, side="right") - 1
    avail = np.minimum(len(pvals), last_in_segment - np.arange(len(word_pos)) + 1)  # [W] words left for an n-gram
    owner = np.searchsorted(offsets, word_pos, side="right") - 1  # [W] sequence of each word
    word_first = np.searchsorted(owner, np.arange(len(offsets)))  # [B + 1] each sequence's first word
    counter = np.arange(len(word_pos)) - word_first[owner]  # [W] word number within its sequence
    word_keys = keys[owner]
    drawn = draw_ngram_lengths(draws.uniform(word_keys, _NGRAM_DRAW, counter), avail, pvals)  # [W]
    # [W] words by sequence, shuffled within it: sorted on (sequence, 32 random bits). numpy's default sort is
    # deterministic; two equal keys (same sequence and bits, p ~ W^2 / 2^33 per sequence) just keep one order.
    order = np.argsort((owner.astype(np.uint64) << np.uint64(32)) | (draws.bits(word_keys, _WORD_ORDER, counter)
                                                                     >> np.uint64(32)))
    chosen = greedy_spans_batch(order, drawn, word_pos, word_end, word_first, budgets)
    k, n = np.array(chosen, dtype=np.int64).reshape(-1, 2).T  # [S] first word and length of each span
    span_start, span_len = word_pos[k], word_end[k + n - 1] - word_pos[k]
    positions = np.sort(np.repeat(span_start - (np.cumsum(span_len) - span_len), span_len)
                        + np.arange(span_len.sum()))  # [M]
    example = np.searchsorted(offsets, positions, side="right") - 1  # [M]
    slot = np.arange(len(positions)) - np.searchsorted(example, example)  # [M]
    labels = ids[positions]
    position_keys = keys[example]
    roll = draws.uniform(position_keys, _MASK_ROLL, slot)
    random_tokens = replacement_ids[draws.below(draws.uniform(position_keys, _MASK_TOKEN, slot),
                                                len(replacement_ids))]
    masked, kept = replace[0], replace[0] + replace[1]
    kinds = np.where(roll < masked, 0, np.where(roll < kept, 1, 2)).astype(np.int8)  # [M] [MASK] / kept / random
    out = ids.copy()
    out[positions] = np.where(roll < masked, mask_id, np.where(roll < kept, labels, random_tokens))
    return Masked(out, positions, labels, example, slot, kinds)


def parse_mask_replace(spec: str, name: str = "mask_replace=") -> tuple[float, float]:
    """"80/10/10" ([MASK] / kept / random, in percent, summing to 100) -> the [MASK] and kept shares; `name`
    prefixes the error (the CLI passes its flag)."""
    parts = str(spec).split("/")
    try:
        shares = [float(p) for p in parts]
    except ValueError:
        shares = []
    if len(shares) != 3 or min(shares) < 0 or abs(sum(shares) - 100) > 1e-6:
        raise ConfigError(f"{name}{spec!r}: expected three percentages [MASK]/kept/random summing to 100, "
                          "e.g. 80/10/10 (ALBERT) or 100/0/0")
    return shares[0] / 100, shares[1] / 100


def mask_sequence(ids: np.ndarray, word_starts: np.ndarray, maskable: np.ndarray, num_to_predict: int,
                  pvals: np.ndarray, mask_id: int, replacement_ids: np.ndarray,
                  rng: np.random.Generator) -> Masked:
    """mask_batch for one sequence (ids, word_starts, maskable: [L]), its random stream keyed from rng."""
    keys = np.array([rng.integers(0, 1 << 63)], dtype=np.uint64)
    return mask_batch(ids, word_starts, maskable, np.array([0, len(ids)]), np.array([num_to_predict]), pvals,
                      mask_id, replacement_ids, keys)


# ---------------------------------------------------------------------------------------------------------------
# Dataset


class PretrainingDataset(Dataset):
    """Map-style dataset of pretraining examples; example i of epoch e depends only on (seed, e, i).

    Each item is a dict of numpy arrays: input_ids, token_type_ids, attention_mask [L] (L <= max_seq_length,
    unpadded), masked_positions, masked_ids, masked_weights, masked_kinds [P = max_predictions_per_seq] (padded,
    weight 0), and
    sop_label (0 in order / actual next, 1 swapped / random; -100 for objective "none"). len() is the number of
    chunks of the current epoch, which changes a little from epoch to epoch (targets are re-drawn): call
    set_epoch(e) before building the epoch's sampler. DataLoader workers get a copy of the dataset when an iterator
    starts, so with persistent_workers=True set_epoch does not reach them.
    """

    def __init__(self, store: TokenStore | str | os.PathLike, split: str = "train", max_seq_length: int = 128,
                 max_predictions_per_seq: int = 20, masked_lm_prob: float = 0.15, short_seq_prob: float = 0.1,
                 ngram: int = 3, favor_shorter_ngram: bool = True, objective: str = "sop",
                 single_sentence: str = "random_document", seed: int = 0, epoch: int = 0,
                 short_seq_draw: str = "chunk", mask_unit: str = "word", mask_replace: str = "80/10/10"):
        if not isinstance(store, TokenStore):
            store = TokenStore.open(store)
        if objective not in OBJECTIVES:
            raise ConfigError(f"objective={objective!r}: use one of {', '.join(OBJECTIVES)}")
        for name, value, allowed in (("single_sentence", single_sentence, SINGLE_SENTENCE),
                                     ("short_seq_draw", short_seq_draw, SHORT_SEQ_DRAWS),
                                     ("mask_unit", mask_unit, MASK_UNITS)):
            if value not in allowed:
                raise ConfigError(f"{name}={value!r}: use one of {', '.join(allowed)}")
        specials = 2 if objective == "none" else 3
        if max_seq_length < specials + 2:
            raise ConfigError(f"max_seq_length={max_seq_length}: needs room for {specials} special tokens and 2 more")
        if not (0 < masked_lm_prob < 1 and 0 <= short_seq_prob <= 1 and ngram >= 1 and max_predictions_per_seq >= 1):
            raise ConfigError("need 0 < masked_lm_prob < 1, 0 <= short_seq_prob <= 1, ngram >= 1, "
                              "max_predictions_per_seq >= 1")
        if seed < 0:
            raise ConfigError(f"seed={seed}: must be >= 0")
        self.store, self.split_name = store, split
        self.split: StoreSplit = store.split(split)
        if self.split.num_documents == 0:
            raise CorpusError(f"{store.path}: split {split!r} has no documents (was the store built with "
                              "--validation-fraction > 0 on enough documents?)")
        self.max_seq_length, self.max_predictions = max_seq_length, max_predictions_per_seq
        self.max_num_tokens = max_seq_length - specials
        self.masked_lm_prob, self.short_seq_prob = masked_lm_prob, short_seq_prob
        self.objective, self.single_sentence = objective, single_sentence
        self.short_seq_draw, self.mask_unit = short_seq_draw, mask_unit
        self.mask_replace = parse_mask_replace(mask_replace)
        self.seed, self.epoch = seed, int(epoch)
        self.pvals = ngram_probabilities(ngram, favor_shorter_ngram)
        self.cls_id, self.sep_id, self.mask_id, self.pad_id = (store.token_id(k) for k in ("cls", "sep", "mask", "pad"))
        self.replacement_ids = np.setdiff1d(np.arange(store.vocab_size), sorted(store.special_ids))
        self._index_cache: dict[int, ChunkIndex] = {}

    # -- epochs ----------------------------------------------------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def chunk_index(self, epoch: int | None = None) -> ChunkIndex:
        epoch = self.epoch if epoch is None else int(epoch)
        if epoch not in self._index_cache:
            if len(self._index_cache) >= 2:
                self._index_cache.pop(next(iter(self._index_cache)))
            # Built block by block into a memory-mapped file: memory stays flat whatever the corpus size.
            blocks = chunk_index_blocks(self.split, self.max_num_tokens, self.short_seq_prob,
                                        (self.seed, _CHUNK_STREAM, epoch), self.short_seq_draw, CHUNK_BLOCK_SENTENCES)
            pairs_only = self.single_sentence == "skip" and self.objective != "none"
            self._index_cache[epoch] = chunk_index_file(blocks, self.split.num_sentences, pairs_only)
        return self._index_cache[epoch]

    def label_balance(self, epoch: int | None = None) -> dict:
        """What the epoch's chunks imply, without building examples: the share of examples whose B comes from a
        random other document, the expected share of label 1 (SOP swapped / NSP random), and the share of short
        targets. A single-sentence chunk takes a random B under "random_document" (label 1 always), and under
        "split" too when it has one token; every other pair is swapped (SOP) or replaced (NSP) with p = 1/2."""
        chunks = self.chunk_index(epoch)
        n = max(len(chunks), 1)
        singles = forced = short = 0  # counted a block of chunks at a time (the index is memory-mapped)
        for lo in range(0, len(chunks), CHUNK_BLOCK_SENTENCES):
            starts, ends = chunks.starts[lo : lo + CHUNK_BLOCK_SENTENCES], chunks.ends[lo : lo + CHUNK_BLOCK_SENTENCES]
            single = (ends - starts) == 1  # [block]
            if self.single_sentence == "split" and self.objective == "sop":
                tokens = self.split.sentence_offset(ends) - self.split.sentence_offset(starts)
                forced += int((single & (tokens < 2)).sum())
            elif self.objective != "none":
                forced += int(single.sum())
            singles += int(single.sum())
            short += int((chunks.targets[lo : lo + CHUNK_BLOCK_SENTENCES] < self.max_num_tokens).sum())
        label1 = (forced + 0.5 * (len(chunks) - forced)) / n  # forced random B, else the 50% coin
        random_b = label1 if self.objective == "nsp" else forced / n
        return {"examples": len(chunks), "single_sentence_chunks": float(singles / n),
                "random_b": float(random_b), "label1": float(label1) if self.objective != "none" else float("nan"),
                "short_targets": float(short / n)}

    def __len__(self) -> int:
        return len(self.chunk_index())

    def __getitem__(self, index: int) -> dict:
        return self.example(index)

    def __getitems__(self, indices: Sequence[int]) -> ExampleBatch:
        """A DataLoader's whole batch at once (torch calls this instead of __getitem__ per index)."""
        return self.examples(indices)

    @property
    def collate_fn(self):
        """collate_pretraining with this store's pad id."""
        return partial(collate_pretraining, pad_id=self.pad_id)

    # -- examples --------------------------------------------------------------------------------------------------
    def example(self, index: int, *, epoch: int | None = None, swap: bool | None = None) -> dict:
        """Example `index` of `epoch` (default: the current one). swap=True/False forces the SOP swap coin
        (every other random choice stays the same), for tests and inspection; it has no effect on a
        single-sentence chunk under single_sentence="random_document" (always a random B, label 1)."""
        return self.examples([index], epoch=epoch, swap=swap)[0]

    def examples(self, indices: Sequence[int] | np.ndarray, *, epoch: int | None = None,
                 swap: bool | None = None) -> ExampleBatch:
        """Examples `indices` of `epoch`, built together: numpy over the batch, one store read, one masking pass.

        Every random choice of example i is a draw from its own counter-based stream keyed by (seed, epoch, i)
        (litebert.data.draws), so an example is the same whatever batch, worker or rank builds it.
        """
        epoch = self.epoch if epoch is None else int(epoch)
        chunks = self.chunk_index(epoch)
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)  # [B]
        bad = idx[(idx < 0) | (idx >= len(chunks))]
        if len(bad):
            raise IndexError(f"example {int(bad[0])} out of range: epoch {epoch} has {len(chunks)}")
        keys = draws.stream_keys((self.seed, _EXAMPLE_STREAM, epoch), idx)  # [B]
        s0, s1 = chunks.starts[idx], chunks.ends[idx]  # [B] the chunk's sentences
        t0, t1 = self.split.sentence_offset(s0), self.split.sentence_offset(s1)  # [B] its tokens (positions)
        if self.objective == "none":
            remove = np.maximum(t1 - t0 - self.max_num_tokens, 0)
            front = draws.binomial_half(keys, _TRUNCATE_A, remove)  # each removed token leaves front or back 50/50
            return self._finish(keys, [(t0 + front, t1 - (remove - front))], np.full(len(idx), IGNORE_LABEL))

        u = draws.uniform(keys[:, None], _PAIR_DRAWS, np.arange(5))  # [B, 5] A's end, coin, doc, B's start, cut
        num_sentences = s1 - s0  # [B]
        a_end = np.where(num_sentences >= 2, 1 + draws.below(u[:, 0], np.maximum(num_sentences - 1, 1)), 1)
        coin = u[:, 1] < 0.5  # SOP: swap; NSP: B from a random document
        cut = self.split.sentence_offset(s0 + a_end) - t0  # [B] tokens in A
        if self.single_sentence == "split" and self.objective == "sop":
            split = (num_sentences == 1) & (t1 - t0 >= 2)
            for r in np.flatnonzero(split).tolist():  # rare: only one-sentence chunks
                cut[r] = self._random_word_cut(int(s0[r]), u[r, 4])
            num_sentences = np.where(split, 2, num_sentences)  # now ordinary pairs
        a = [t0, t0 + cut]
        b = [t0 + cut, t1.copy()]
        random_b = (num_sentences == 1) | (coin & (self.objective == "nsp"))
        label = random_b.astype(np.int64)
        if random_b.any():
            r = np.flatnonzero(random_b)
            b[0][r], b[1][r] = self._random_segments(s0[r], chunks.targets[idx[r]] - cut[r], u[r, 2], u[r, 3])
        remove_a, remove_b = truncation_counts(a[1] - a[0], b[1] - b[0], self.max_num_tokens)
        front_a = draws.binomial_half(keys, _TRUNCATE_A, remove_a)  # each removed token leaves front or back 50/50
        front_b = draws.binomial_half(keys, _TRUNCATE_B, remove_b)
        a = (a[0] + front_a, a[1] - (remove_a - front_a))
        b = (b[0] + front_b, b[1] - (remove_b - front_b))
        if self.objective == "sop":
            swapped = (num_sentences >= 2) & (coin if swap is None else bool(swap))
            a, b = (tuple(np.where(swapped, y, x) for x, y in zip(a, b)),
                    tuple(np.where(swapped, x, y) for x, y in zip(a, b)))
            label = np.where(swapped, 1, label)
        return self._finish(keys, [a, b], label)

    def _random_word_cut(self, sentence: int, u: float) -> int:
        """A cut point in [1, len-1] of a one-sentence chunk, at a word start when the sentence has one there."""
        ws = self.split.word_starts(sentence)
        starts = np.flatnonzero(ws[1:]) + 1
        return int(starts[draws.below(u, len(starts))]) if len(starts) else 1 + int(draws.below(u, len(ws) - 1))

    def _random_segments(self, s0: np.ndarray, target_len: np.ndarray, u_doc: np.ndarray,
                         u_start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Official random-next B, per row: a random other document, from a random sentence, until >= target_len
        tokens. Returns its token range (start, stop) [R] in the split."""
        split = self.split
        num_docs = split.num_documents
        doc = split.document_of(s0)  # [R] the chunk's own document
        if num_docs > 1:
            other = draws.below(u_doc, num_docs - 1)
            doc = other + (other >= doc)
        d0, d1 = split.document_start(doc), split.document_start(doc + 1)
        b0 = d0 + draws.below(u_start, d1 - d0)
        start = split.sentence_offset(b0)
        b1 = np.minimum(np.maximum(split.sentence_reaching(b0, start + target_len), b0 + 1), d1)
        return start, split.sentence_offset(b1)

    def _finish(self, keys: np.ndarray, segments: list, label: np.ndarray) -> ExampleBatch:
        """[CLS] A [SEP] (B [SEP]) per example from the segments' token ranges (start, stop) [B], token types,
        then masking; pads the prediction slots to P."""
        count, pieces = len(keys), 2 * len(segments) + 1  # B; [CLS], A, [SEP], (B, [SEP])
        piece_len = np.ones((count, pieces), np.int64)  # [B, pieces]
        piece_src = np.full((count, pieces), -1, np.int64)  # first token's position in the split; -1: special
        for i, (start, stop) in enumerate(segments):
            piece_len[:, 2 * i + 1], piece_src[:, 2 * i + 1] = stop - start, start
        lengths = piece_len.sum(axis=1)  # [B] L per example
        offsets = np.concatenate([[0], np.cumsum(lengths)])  # [B + 1]
        piece_len = piece_len.ravel()
        piece = np.repeat(np.arange(len(piece_len)), piece_len)  # [T] piece of each token
        within = np.arange(int(offsets[-1])) - np.repeat(np.cumsum(piece_len) - piece_len, piece_len)  # [T]
        src = piece_src.ravel()[piece]  # [T]
        maskable = src >= 0  # [T] segment tokens; [CLS]/[SEP] are not
        column = piece % pieces  # [T] 0: [CLS], 1: A, 2: [SEP], 3: B, 4: [SEP]
        ids = np.where(column == 0, self.cls_id, self.sep_id).astype(np.int64)  # [T]
        flags = np.ones(len(ids), bool)  # [T] word starts (specials: True)
        ids[maskable], flags[maskable] = self.split.gather(src[maskable] + within[maskable])
        budgets = np.minimum(self.max_predictions, np.maximum(1, np.rint(lengths * self.masked_lm_prob)))
        units = flags if self.mask_unit == "word" else np.ones(len(ids), bool)  # where a masked span may start
        m = mask_batch(ids, units, maskable, offsets, budgets.astype(np.int64), self.pvals, self.mask_id,
                       self.replacement_ids, keys, self.mask_replace)
        positions = np.zeros((count, self.max_predictions), np.int64)  # [B, P]
        labels = np.zeros((count, self.max_predictions), np.int64)
        weights = np.zeros((count, self.max_predictions), np.float32)
        kinds = np.zeros((count, self.max_predictions), np.int8)  # padding slots: 0, with weight 0
        positions[m.example, m.slot] = m.positions - offsets[m.example]
        labels[m.example, m.slot], weights[m.example, m.slot] = m.labels, 1.0
        kinds[m.example, m.slot] = m.kinds
        return ExampleBatch(m.input_ids, (column >= 3).astype(np.int64), flags, offsets, positions, labels, weights,
                            np.asarray(label, np.int64), kinds)


class ExampleBatch(Sequence):
    """B pretraining examples stored concatenated (what PretrainingDataset.examples / __getitems__ return).

    batch[b] is example b's dict (views); collate() pads all of them into tensors at once. input_ids,
    token_type_ids, word_starts: [T], the B sequences concatenated, example b at [offsets[b], offsets[b + 1]);
    masked_positions, masked_ids, masked_weights, masked_kinds: [B, P]; sop_labels: [B]. masked_kinds (int8) says
    what the 80/10/10 rule did at each target (litebert.mlm_scores: [MASK] 0, kept 1, random 2), for the held-out
    scores by kind; training never reads it.
    """

    def __init__(self, input_ids, token_type_ids, word_starts, offsets, masked_positions, masked_ids,
                 masked_weights, sop_labels, masked_kinds):
        self.input_ids, self.token_type_ids, self.word_starts = input_ids, token_type_ids, word_starts
        self.offsets, self.sop_labels = offsets, sop_labels
        self.masked_positions, self.masked_ids, self.masked_weights = masked_positions, masked_ids, masked_weights
        self.masked_kinds = masked_kinds

    def __len__(self) -> int:
        return len(self.sop_labels)

    def __getitem__(self, b: int) -> dict:
        if not -len(self) <= b < len(self):
            raise IndexError(f"example {b} of a batch of {len(self)}")
        b %= len(self)
        lo, hi = int(self.offsets[b]), int(self.offsets[b + 1])
        return {
            "input_ids": self.input_ids[lo:hi],  # [L]
            "token_type_ids": self.token_type_ids[lo:hi],
            "attention_mask": np.ones(hi - lo, np.int64),
            "masked_positions": self.masked_positions[b],  # [P]
            "masked_ids": self.masked_ids[b],
            "masked_weights": self.masked_weights[b],
            "masked_kinds": self.masked_kinds[b],
            "sop_label": int(self.sop_labels[b]),
            "word_starts": self.word_starts[lo:hi],  # [L] the store's word boundaries (for `data inspect` and tests)
        }

    def collate(self, pad_to: int | None = None, pad_id: int = 0) -> dict:
        """collate_pretraining's tensors, scattered in one go from the concatenated sequences."""
        lengths = np.diff(self.offsets)  # [B]
        length = _padded_length(int(lengths.max()) if len(lengths) else 0, pad_to)
        row = np.repeat(np.arange(len(lengths)), lengths)  # [T]
        col = np.arange(len(self.input_ids)) - self.offsets[row]  # [T]
        batch = {}
        for key, values, fill in (("input_ids", self.input_ids, pad_id), ("token_type_ids", self.token_type_ids, 0),
                                  ("attention_mask", 1, 0)):
            out = np.full((len(lengths), length), fill, dtype=np.int64)  # [B, L]
            out[row, col] = values
            batch[key] = torch.from_numpy(out)
        for key in ("masked_positions", "masked_ids", "masked_weights", "masked_kinds"):
            batch[key] = torch.from_numpy(getattr(self, key))
        batch["sop_labels"] = torch.from_numpy(self.sop_labels)
        return batch


def _padded_length(longest: int, pad_to: int | None) -> int:
    if pad_to is None:
        return longest
    if pad_to < longest:
        raise ConfigError(f"pad_to={pad_to} is shorter than the longest example ({longest} tokens)")
    return pad_to


def collate_pretraining(examples: Sequence[dict], pad_to: int | None = None, pad_id: int = 0) -> dict:
    """Stack examples into torch tensors, padding sequences to the longest in the batch (or to pad_to).

    Returns input_ids, token_type_ids, attention_mask [B, L]; masked_positions, masked_ids, masked_weights,
    masked_kinds [B, P] (when the examples have it); sop_labels [B]. An ExampleBatch (what the dataset's
    __getitems__ gives a DataLoader) is padded without a loop.
    """
    if isinstance(examples, ExampleBatch):
        return examples.collate(pad_to, pad_id)
    length = _padded_length(max(len(e["input_ids"]) for e in examples), pad_to)
    batch = {}
    for key, fill in (("input_ids", pad_id), ("token_type_ids", 0), ("attention_mask", 0)):
        out = np.full((len(examples), length), fill, dtype=np.int64)  # [B, L]
        for row, e in zip(out, examples):
            row[: len(e[key])] = e[key]
        batch[key] = torch.from_numpy(out)
    for key in ("masked_positions", "masked_ids", "masked_weights"):
        batch[key] = torch.from_numpy(np.stack([e[key] for e in examples]))
    if all("masked_kinds" in e for e in examples):  # the dataset's examples have it; hand-made ones may not
        batch["masked_kinds"] = torch.from_numpy(np.stack([e["masked_kinds"] for e in examples]))
    batch["sop_labels"] = torch.tensor([e["sop_label"] for e in examples], dtype=torch.long)
    return batch


# ---------------------------------------------------------------------------------------------------------------
# Sampling across ranks, from anywhere in an epoch


class ResumableSampler(Sampler[int]):
    """Shuffled (per seed and epoch), rank-sharded indices of one epoch, started anywhere in it.

    The epoch's order is one permutation of (seed, epoch), the same for every world size (its "global order").
    Its first `offset` positions count as done (what the ranks of an earlier sharding used up, see
    `consumed_positions`). The rest is padded by repeating its head until it divides by world_size (or its tail is
    dropped with drop_last), and rank r takes positions r, r + W, ... of it, like torch's DistributedSampler; of
    those it skips the first `skip` (what this rank had already taken before a resume). Padding entries are the last
    `num_padding` of the rest; `padding_mask()` marks them on this rank so evaluation can drop duplicates.
    num_examples may be an int or a sized object (e.g. the dataset after its set_epoch).

    The sampler has no position of its own: one is made per (epoch, offset, skip), by `BatchStream` in training,
    whose data state is the run's whole data position.
    """

    def __init__(self, num_examples: int | Sized, rank: int = 0, world_size: int = 1, seed: int = 0,
                 shuffle: bool = True, drop_last: bool = False, epoch: int = 0, offset: int = 0, skip: int = 0):
        if world_size < 1 or not 0 <= rank < world_size:
            raise ConfigError(f"rank={rank}, world_size={world_size}: need 0 <= rank < world_size")
        for name, value in (("seed", seed), ("epoch", epoch), ("offset", offset), ("skip", skip)):
            if value < 0:
                raise ConfigError(f"{name}={value}: must be >= 0")
        self.source, self.rank, self.world_size = num_examples, rank, world_size
        self.seed, self.shuffle, self.drop_last = seed, shuffle, drop_last
        self.epoch, self.offset, self.skip = int(epoch), int(offset), int(skip)

    @property
    def num_examples(self) -> int:
        return self.source if isinstance(self.source, int) else len(self.source)

    def _rest(self) -> int:
        """Positions of the global order after `offset`."""
        return max(0, self.num_examples - self.offset)

    def _total(self) -> int:
        n, w = self._rest(), self.world_size
        return n // w * w if self.drop_last else math.ceil(n / w) * w

    @property
    def num_samples(self) -> int:
        """Indices of this rank's shard of the rest of the epoch, `skip` included."""
        return self._total() // self.world_size

    @property
    def num_padding(self) -> int:
        """Repeated (padding) entries in the rest of the epoch, across all ranks."""
        return max(0, self._total() - self._rest())

    def global_order(self) -> np.ndarray:
        """[num_samples * world_size] the rest of the epoch's order (after `offset`) before sharding, padding
        included."""
        n = self.num_examples
        # int32 where it fits: half the memory of permutation(n)'s int64, and the same order (shuffle makes the
        # same draws whatever the dtype). This is the only array of the epoch's size the sampler holds.
        order = np.arange(n, dtype=np.int32 if n < 2**31 else np.int64)
        if self.shuffle:
            make_rng(self.seed, _SAMPLER_STREAM, self.epoch).shuffle(order)
        order, total = order[self.offset:], self._total()
        if total > len(order):
            order = np.resize(order, total)  # repeats the head, cyclically when needed
        return order[:total]

    def indices(self) -> np.ndarray:
        """[num_samples - skip] this rank's indices for the rest of the epoch."""
        return self.global_order()[self.rank :: self.world_size][self.skip:]

    def padding_mask(self) -> np.ndarray:
        """[num_samples - skip] True where this rank's index is a repeat added as padding."""
        global_position = np.arange(self.rank, self._total(), self.world_size)[self.skip:]
        return global_position >= self._rest()

    def __iter__(self):
        indices = self.indices()  # a view of global_order: Python ints are made a block at a time, not all at once
        for lo in range(0, len(indices), 4096):
            yield from indices[lo : lo + 4096].tolist()

    def __len__(self) -> int:
        return max(0, self.num_samples - self.skip)


# ---------------------------------------------------------------------------------------------------------------
# Sequence-length phases


class Phase(NamedTuple):
    index: int
    max_seq_length: int


def parse_phases(spec: str | None, default_length: int) -> list[tuple[float, int]]:
    """"0.9:128,0.1:512" -> [(0.9, 128), (0.1, 512)]: fractions of the training steps and their sequence lengths
    (no spec: every step at default_length). The one place a schedule is read and checked (`--phases`)."""
    if not spec:
        return [(1.0, default_length)]
    try:
        phases = [(float(f), int(n)) for f, n in (part.split(":") for part in spec.split(","))]
    except ValueError:
        raise ConfigError(f"--phases {spec!r}: expected FRACTION:LENGTH[,FRACTION:LENGTH...]") from None
    if abs(sum(f for f, _ in phases) - 1.0) > 1e-6 or any(not f > 0 or n < 8 for f, n in phases):  # NaN: not > 0
        raise ConfigError(f"--phases {spec!r}: fractions must be positive and sum to 1, lengths >= 8")
    return phases


def phase_for_step(step: float, phases: Sequence[tuple[float, int]], total_steps: int | None = None) -> Phase:
    """The phase a step falls in, for parse_phases' schedules like [(0.9, 128), (0.1, 512)] (90% of steps at
    128, then 512).

    step is a fraction of training in [0, 1], or a step number when total_steps is given.
    """
    fraction = step / total_steps if total_steps else step
    if not 0 <= fraction <= 1:
        raise ConfigError(f"step {step} is outside training (0..{total_steps or 1})")
    edge = 0.0
    for i, (f, length) in enumerate(phases):
        edge += f
        if fraction < edge - 1e-12:
            return Phase(i, int(length))
    return Phase(len(phases) - 1, int(phases[-1][1]))


# ---------------------------------------------------------------------------------------------------------------
# The training stream: one rank's micro-batches, resumable at any step


def consumed_positions(state: dict[str, int], micro_batch_size: int, world: int) -> int:
    """How many positions of the current epoch's global order a saved data state has used up, on all ranks."""
    return int(state.get("offset", 0)) + int(state["position"]) * micro_batch_size * world


class BatchStream:
    """Micro-batches for one rank, in an order fixed by (seed, phase, epoch, position), so a run can resume at any
    step: `state_dict()` is the run's whole data position, {phase, epoch, position, offset}. Position = micro-batches
    this rank has taken from the current epoch since `offset`, the number of positions of the epoch's global order
    that were done before a resume on another world size or micro-batch size (0 otherwise).

    `make_dataset(max_seq_length)` builds the training dataset of a phase's sequence length; `phases` are
    parse_phases' (fraction, length) pairs over `total_steps` optimizer steps."""

    def __init__(self, make_dataset: Callable[[int], PretrainingDataset], phases: Sequence[tuple[float, int]],
                 total_steps: int, micro_batch_size: int, *, rank: int = 0, world: int = 1, seed: int = 0,
                 num_workers: int = 0, state: dict[str, int] | None = None):
        self.make_dataset, self.phases, self.total_steps = make_dataset, list(phases), total_steps
        self.micro_batch_size, self.rank, self.world = micro_batch_size, rank, world
        self.seed, self.num_workers = seed, num_workers
        self.state = dict(state or {"phase": 0, "epoch": 0, "position": 0, "offset": 0})
        self._iter = None

    def state_dict(self) -> dict[str, int]:
        return dict(self.state)

    def load_state_dict(self, state: dict[str, int], micro_batch_size: int, world: int) -> bool:
        """Continue from the state_dict() of a run of `world` ranks x `micro_batch_size`. The same sharding goes on
        exactly where that run stopped (returns True). Another one (returns False): the positions of the epoch's
        global order that all ranks used up are a prefix of it, and the new ranks deal the rest among them (the
        offset), so no example is skipped or repeated."""
        data = {k: int(v) for k, v in state.items()}
        data.setdefault("offset", 0)
        exact = (micro_batch_size, world) == (self.micro_batch_size, self.world)
        self.state = data if exact else {"phase": data["phase"], "epoch": data["epoch"], "position": 0,
                                         "offset": consumed_positions(data, micro_batch_size, world)}
        self._iter = None
        return exact

    def dataset(self) -> PretrainingDataset:
        """The training dataset of the current phase, at the current epoch."""
        dataset = self.make_dataset(self.phases[self.state["phase"]][1])
        dataset.set_epoch(self.state["epoch"])
        return dataset

    def sampler(self, num_examples: int) -> ResumableSampler:
        """This rank's indices for the rest of the current epoch, as the state says."""
        s = self.state
        return ResumableSampler(num_examples, rank=self.rank, world_size=self.world, seed=self.seed, shuffle=True,
                                drop_last=True, epoch=s["epoch"], offset=s["offset"],
                                skip=s["position"] * self.micro_batch_size)

    def _open(self) -> None:
        dataset, length = self.dataset(), self.phases[self.state["phase"]][1]
        if len(dataset) < self.micro_batch_size * self.world:
            raise TrainingError(f"{dataset.store.path}: only {len(dataset)} training examples at length {length}, "
                                f"fewer than one global micro-batch ({self.micro_batch_size} x {self.world} ranks); "
                                "use a bigger corpus")
        # Pad to the phase's full length: static shapes (compile-friendly); ALBERT's pairs fill it anyway.
        collate = partial(collate_pretraining, pad_to=length, pad_id=dataset.pad_id)
        # Its own generator: the DataLoader draws a base seed per iterator, which must not consume the global
        # RNG that dropout uses (or a resumed run would drop out differently).
        loader_rng = torch.Generator().manual_seed(self.seed * 1_000_003 + self.state["epoch"])
        loader = torch.utils.data.DataLoader(dataset, batch_size=self.micro_batch_size,
                                             sampler=self.sampler(len(dataset)), generator=loader_rng,
                                             drop_last=True, num_workers=self.num_workers, collate_fn=collate)
        self._iter = iter(loader)

    def next(self, step: int) -> dict[str, torch.Tensor]:
        """The next micro-batch for optimizer step `step` (which picks the phase)."""
        phase = phase_for_step(step, self.phases, self.total_steps).index
        if phase != self.state["phase"]:  # a new sequence length: a fresh pass over the data at that length
            self.state, self._iter = {"phase": phase, "epoch": 0, "position": 0, "offset": 0}, None
        if self._iter is None:
            self._open()
        try:
            batch = next(self._iter)
        except StopIteration:
            self.state.update(epoch=self.state["epoch"] + 1, position=0, offset=0)
            self._open()
            batch = next(self._iter)
        self.state["position"] += 1
        return batch
