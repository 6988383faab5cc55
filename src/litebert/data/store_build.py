"""Writing a token store (litebert.data.store has the layout and the reader): `build_store` tokenizes a corpus in
worker processes, streaming a bounded number of chunks, and one writer appends the results in input order: memory
stays flat and the bytes written are the same for any --workers. Documents go to "validation" by a hash of (seed,
document ordinal), so the split does not depend on chunking or worker count. The store is written into a
temporary folder that is renamed into place at the end (meta.json is written last), so a crash never leaves a
store that opens."""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import os
import re
import shutil
import time
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from litebert.data.corpus import Chunk, CorpusReader, split_sentences
from litebert.data.draws import GOLDEN, mix64, to_unit
from litebert.errors import CorpusError, OutputError
from litebert.faults import inject_fault
from litebert.files import (DISK_ERRNOS, OutputLock, check_output, dir_is_held, disk_error, fsync_dir, hold_dir,
                            pid_alive, reason)
from litebert.data.store import (_DOCUMENTS, _OFFSET_DTYPE, _SENTENCES, _TOKENS, _WORD_STARTS, FORMAT, SPLITS,
                                  VERSION, TokenStore, token_dtype)


def _unit_hash(seed: int, keys: np.ndarray) -> np.ndarray:
    """A uniform float in [0, 1) per key, from splitmix64(seed, key): stateless, so it suits streaming."""
    offset = (seed * GOLDEN + 0x632BE59BD9B4E019) & ((1 << 64) - 1)
    return to_unit(mix64(keys.astype(np.uint64) + np.uint64(offset)))


# ---------------------------------------------------------------------------------------------------------------
# Worker side: tokenize one chunk


@dataclass
class EncodedChunk:
    ids: np.ndarray  # [T] token ids of the kept sentences, concatenated
    lengths: np.ndarray  # [S] int64 tokens per sentence (all > 0)
    doc_ids: np.ndarray  # [S] int64 document ordinal per sentence (non-decreasing)
    num_bytes: int
    empty_sentences: int  # sentences that tokenized to nothing
    long_sentences: int  # sentences longer than max_sentence_tokens, cut at word starts
    cpu_seconds: float = 0.0  # worker CPU time spent on this chunk (for benchmarks; never written to the store)
    peak_rss_kb: int = 0  # the worker's peak resident memory so far
    word_starts: np.ndarray | None = None  # [T] bool: token starts a whole word (vocab rule, or segmented words)


_WORKER: dict = {}


def _worker_init(tokenizer, dtype: str, max_sentence_tokens: int, word_segmenter: str | None = None) -> None:
    if isinstance(tokenizer, (str, os.PathLike)):
        from litebert.tokenizer import load_tokenizer

        tokenizer = load_tokenizer(tokenizer)
    segment = None
    if word_segmenter is not None:
        from litebert.data.segment import load_segmenter

        segment = load_segmenter(word_segmenter)
    _WORKER.update(tokenizer=tokenizer, dtype=np.dtype(dtype), cap=max_sentence_tokens,
                   word_starts=tokenizer.word_start_mask(), segment=segment)


def _cut_points(word_starts: np.ndarray, cap: int) -> list[int]:
    """Piece lengths that cut one over-long sentence into pieces of <= cap tokens, at word starts when possible."""
    pieces, start, n = [], 0, len(word_starts)
    while n - start > cap:
        starts = np.flatnonzero(word_starts[start + 1 : start + cap + 1])
        cut = start + 1 + int(starts[-1]) if starts.size else start + cap
        pieces.append(cut - start)
        start = cut
    pieces.append(n - start)
    return pieces


def _encode_chunk(chunk: Chunk) -> EncodedChunk:
    cpu0 = time.process_time()
    tok, dtype, cap = _WORKER["tokenizer"], _WORKER["dtype"], _WORKER["cap"]
    if chunk.kind == "documents":  # JSONL: one text per document, cut into sentences here (in parallel)
        texts, doc_ids = [], []
        for text, doc_id in zip(chunk.texts, chunk.doc_ids):
            sentences = split_sentences(text)
            texts.extend(sentences)
            doc_ids.extend([doc_id] * len(sentences))
    else:
        texts, doc_ids = chunk.texts, chunk.doc_ids
    if _WORKER["segment"] is None:
        rows = tok.encode_ids_batch(texts, num_threads=1)
        flag_rows = None
    else:  # whole words from a segmenter (Chinese): flags need each token's place in the text
        from litebert.data.segment import segmented_word_starts

        rows, flag_rows = zip(*(segmented_word_starts(tok, _WORKER["word_starts"], t, _WORKER["segment"])
                                for t in texts)) if texts else ((), ())
    lengths = np.fromiter(map(len, rows), np.int64, len(rows))
    ids = np.fromiter(chain.from_iterable(rows), dtype, int(lengths.sum()))
    flags = _WORKER["word_starts"][ids] if flag_rows is None else np.concatenate([np.zeros(0, bool), *flag_rows])
    docs = np.asarray(doc_ids, dtype=np.int64)
    keep = lengths > 0
    empty = int(len(keep) - keep.sum())
    lengths, docs = lengths[keep], docs[keep]
    long_rows = np.flatnonzero(lengths > cap)
    if long_rows.size:  # rare: cut giant "sentences" (tables, unpunctuated text) so one never fills an example
        ends = np.cumsum(lengths)
        new_lengths, new_docs, prev = [], [], 0
        for i in long_rows:
            pieces = _cut_points(flags[ends[i] - lengths[i] : ends[i]], cap)
            new_lengths += [lengths[prev:i], np.asarray(pieces, np.int64)]
            new_docs += [docs[prev:i], np.full(len(pieces), docs[i])]
            prev = i + 1
        lengths = np.concatenate(new_lengths + [lengths[prev:]])
        docs = np.concatenate(new_docs + [docs[prev:]])
    return EncodedChunk(ids, lengths, docs, chunk.num_bytes, empty, int(long_rows.size),
                        time.process_time() - cpu0, _peak_rss_kb(), flags)


def _peak_rss_kb() -> int:
    try:
        import resource
    except ImportError:  # Windows
        return 0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kB on Linux


def _ordered_map(fn, items: Iterable, workers: int, initargs: tuple, inflight: int) -> Iterator:
    """fn over items in worker processes, results in input order, at most `inflight` items in flight (so the
    reader never runs ahead of the writer: Pool.imap would queue the whole corpus)."""
    if workers <= 1:
        _worker_init(*initargs)
        try:
            yield from map(fn, items)
        finally:
            _WORKER.clear()
        return
    # forkserver: workers never inherit the parent's threads (torch/OpenMP) the way plain fork would.
    # ProcessPoolExecutor, not Pool: a worker that dies makes it raise, where Pool would respawn it forever.
    # Workers still import the caller's __main__ module: keep heavy imports (torch) out of a script's top level.
    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    context = multiprocessing.get_context(method)
    if method == "forkserver":  # the server imports these once; each worker is forked from it ready to go
        context.set_forkserver_preload(["litebert.data.store", "litebert.tokenizer"])
    try:
        with ProcessPoolExecutor(workers, mp_context=context, initializer=_worker_init, initargs=initargs) as pool:
            pending: deque = deque()
            for item in items:
                pending.append(pool.submit(fn, item))
                if len(pending) >= inflight:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
    except BrokenProcessPool as exc:
        raise CorpusError(f"a tokenizer worker process died ({exc}); its error is printed above. Retry with "
                          "--workers 1 to see it in this process") from None


# ---------------------------------------------------------------------------------------------------------------
# Writer side


class _ShardWriter:
    """Appends to the four files of one shard."""

    def __init__(self, directory: Path, index: int, dtype: np.dtype):
        self.name = f"{directory.name}/{index:05d}"
        self.prefix = directory / f"{index:05d}"
        self.dtype = dtype
        self.files = {k: open(f"{self.prefix}.{k}", "wb") for k in (_TOKENS, _WORD_STARTS, _SENTENCES, _DOCUMENTS)}
        self.hashes = {k: hashlib.sha256() for k in self.files}  # of the bytes as written: no second read
        self.max_token_id = -1
        self.tokens = self.sentences = self.documents = 0
        self._bit_carry = np.zeros(0, dtype=bool)  # < 8 flags waiting for a full byte
        self._write(_SENTENCES, np.zeros(1, _OFFSET_DTYPE))

    def _write(self, key: str, array: np.ndarray) -> None:
        data = np.ascontiguousarray(array).data
        self.files[key].write(data)
        self.hashes[key].update(data)

    def append(self, ids: np.ndarray, word_starts: np.ndarray, lengths: np.ndarray, new_doc: np.ndarray) -> None:
        if len(ids):
            self.max_token_id = max(self.max_token_id, int(ids.max()))
        self._write(_TOKENS, ids.astype(self.dtype, copy=False))
        bits = np.concatenate([self._bit_carry, word_starts])
        full = len(bits) // 8 * 8
        self._write(_WORD_STARTS, np.packbits(bits[:full]))
        self._bit_carry = bits[full:]
        self._write(_SENTENCES, (self.tokens + np.cumsum(lengths)).astype(_OFFSET_DTYPE))
        self._write(_DOCUMENTS, (self.sentences + np.flatnonzero(new_doc)).astype(_OFFSET_DTYPE))
        self.tokens += int(lengths.sum())
        self.sentences += len(lengths)
        self.documents += int(new_doc.sum())

    def close(self) -> dict:
        self._write(_WORD_STARTS, np.packbits(self._bit_carry))
        self._write(_DOCUMENTS, np.array([self.sentences], _OFFSET_DTYPE))
        for f in self.files.values():
            f.flush()
            os.fsync(f.fileno())
            f.close()
        return {"name": self.name, "documents": self.documents, "sentences": self.sentences, "tokens": self.tokens,
                "max_token_id": self.max_token_id, "sha256": {k: h.hexdigest() for k, h in self.hashes.items()}}


class _SplitWriter:
    """Appends sentences of one split, rolling to a new shard at a document start once a shard is full."""

    def __init__(self, root: Path, name: str, dtype: np.dtype, shard_tokens: int):
        self.directory = root / name
        self.dtype, self.shard_tokens = dtype, shard_tokens
        self.shards: list[dict] = []
        self.current: _ShardWriter | None = None
        self.last_doc = -1

    def append(self, ids, word_starts, lengths, docs) -> None:
        if not len(lengths):
            return
        new_doc = np.empty(len(docs), dtype=bool)
        new_doc[0] = docs[0] != self.last_doc
        new_doc[1:] = docs[1:] != docs[:-1]
        self.last_doc = int(docs[-1])
        token_start = np.cumsum(lengths) - lengths  # [S] offset of each sentence within this call
        s = t = 0  # sentences / tokens of this call already written
        while s < len(lengths):
            if self.current is None:
                self.directory.mkdir(exist_ok=True)
                self.current = _ShardWriter(self.directory, len(self.shards), self.dtype)
            # the first document start (after what this shard already holds) that finds the shard full
            full = new_doc[s:] & (token_start[s:] - t + self.current.tokens >= self.shard_tokens)
            if self.current.tokens == 0:
                full[0] = False
            cut = s + int(np.argmax(full)) if full.any() else len(lengths)
            t_cut = int(token_start[cut]) if cut < len(lengths) else len(ids)
            self.current.append(ids[t:t_cut], word_starts[t:t_cut], lengths[s:cut], new_doc[s:cut])
            if cut < len(lengths):
                self.close_shard()
            s, t = cut, t_cut

    def close_shard(self) -> None:
        if self.current is not None:
            self.shards.append(self.current.close())
            self.current = None

    def summary(self) -> dict:
        self.close_shard()
        return {
            "documents": sum(s["documents"] for s in self.shards),
            "sentences": sum(s["sentences"] for s in self.shards),
            "tokens": sum(s["tokens"] for s in self.shards),
            "shards": self.shards,
        }


class _StoreWriter:
    """Filters documents (too short for a pair), routes them to train/validation and appends them in order.

    A plain-text document may continue in the next chunk, so the last document of each chunk is held back until
    it is complete, or until it is long enough to be kept, after which the rest of it streams straight through."""

    def __init__(self, root: Path, dtype: np.dtype, seed: int, validation_fraction: float, min_doc_tokens: int,
                 min_doc_sentences: int, shard_tokens: int, doc_offset: int = 0):
        self.doc_offset = doc_offset  # corpus-wide ordinal of this build's first document (a part of a build)
        self.seed, self.validation_fraction = seed, validation_fraction
        self.min_doc_tokens, self.min_doc_sentences = min_doc_tokens, min_doc_sentences
        self.splits = {name: _SplitWriter(root, name, dtype, shard_tokens) for name in SPLITS}
        self.pending: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self.accepted_doc = -1  # a document already kept whose sentences may still be arriving
        self.docs_seen = self.short_docs = self.empty_sentences = self.long_sentences = 0
        self.num_bytes = 0
        self.worker_cpu_seconds, self.worker_peak_rss_kb = 0.0, 0

    def add(self, enc: EncodedChunk) -> None:
        self.num_bytes += enc.num_bytes
        self.worker_cpu_seconds += enc.cpu_seconds
        self.worker_peak_rss_kb = max(self.worker_peak_rss_kb, enc.peak_rss_kb)
        self.empty_sentences += enc.empty_sentences
        self.long_sentences += enc.long_sentences
        # ids travel with their word-start flags: a (T, 2) array, column 0 the id and column 1 the flag
        ids = np.stack([enc.ids.astype(np.int64), enc.word_starts], axis=1)
        lengths, docs = enc.lengths, enc.doc_ids
        if not len(lengths):
            return
        if self.pending is not None:
            ids, lengths, docs = (np.concatenate([p, x]) for p, x in zip(self.pending, (ids, lengths, docs)))
            self.pending = None
        head = int(np.searchsorted(docs, self.accepted_doc, side="right"))  # continuation of a kept document
        if head:
            t = int(lengths[:head].sum())
            self._route(ids[:t], lengths[:head], docs[:head])
            ids, lengths, docs = ids[t:], lengths[head:], docs[head:]
            if not len(lengths):
                return
        cut = int(np.searchsorted(docs, docs[-1], side="left"))  # the last document may be incomplete
        t_cut = int(lengths[:cut].sum())
        self._filter_and_route(ids[:t_cut], lengths[:cut], docs[:cut])
        tail = (ids[t_cut:], lengths[cut:], docs[cut:])
        if self._long_enough(int(tail[1].sum()), len(tail[1])):
            self.docs_seen += 1
            self.accepted_doc = int(docs[-1])
            self._route(*tail)
        else:
            self.pending = tuple(np.array(x) for x in tail)

    def finish(self) -> dict:
        if self.pending is not None:
            self._filter_and_route(*self.pending)
            self.pending = None
        return {name: writer.summary() for name, writer in self.splits.items()}

    def _long_enough(self, tokens, sentences):
        return (tokens >= self.min_doc_tokens) & (sentences >= self.min_doc_sentences)

    def _filter_and_route(self, ids, lengths, docs) -> None:
        """Drop whole documents that are too short to give a segment pair; route the rest."""
        if not len(lengths):
            return
        starts = np.flatnonzero(np.r_[True, docs[1:] != docs[:-1]])  # [D] first sentence of each document
        sizes = np.diff(np.r_[starts, len(docs)])
        keep_doc = self._long_enough(np.add.reduceat(lengths, starts), sizes)
        self.docs_seen += len(starts)
        self.short_docs += int((~keep_doc).sum())
        if not keep_doc.all():
            keep = np.repeat(keep_doc, sizes)
            ids, lengths, docs = ids[np.repeat(keep, lengths)], lengths[keep], docs[keep]
        self._route(ids, lengths, docs)

    def _route(self, ids_flags, lengths, docs) -> None:
        ids, word_starts = ids_flags[:, 0], ids_flags[:, 1].astype(bool)  # [T], [T]
        if self.validation_fraction <= 0:
            self.splits["train"].append(ids, word_starts, lengths, docs)
            return
        val = _unit_hash(self.seed, docs + self.doc_offset) < self.validation_fraction  # [S]
        for name, sel in (("train", ~val), ("validation", val)):
            tok = np.repeat(sel, lengths)
            self.splits[name].append(ids[tok], word_starts[tok], lengths[sel], docs[sel])


# ---------------------------------------------------------------------------------------------------------------
# Build


def build_store(
    inputs,
    tokenizer,
    out: str | os.PathLike,
    *,
    workers: int = 1,
    validation_fraction: float = 0.01,
    on_bad_utf8: str = "error",
    seed: int = 0,
    max_sentence_tokens: int = 512,
    min_doc_tokens: int = 2,
    min_doc_sentences: int = 1,
    shard_tokens: int = 1 << 28,
    chunk_bytes: int = 1 << 20,
    overwrite: bool = False,
    progress: Callable[[int], None] | None = None,
    max_doc_sentences: int = 0,
    word_segmenter: str | None = None,
    doc_offset: int = 0,
    part: dict | None = None,
) -> TokenStore:
    """Tokenize `inputs` (files, folders, globs) into a token store at `out`; returns the opened store.

    tokenizer: a tokenizer directory / file (loaded with litebert.tokenizer.load_tokenizer in each worker) or a
    tokenizer object (pickled to the workers). Documents with fewer than min_doc_tokens tokens or
    min_doc_sentences sentences are skipped (and counted): a pretraining pair needs at least one token per segment.
    Sentences longer than max_sentence_tokens are cut at word starts (a safety net for unpunctuated text).
    Plain-text documents longer than max_doc_sentences sentences are cut into pieces (0: never; counted).
    The store keeps a copy of its tokenizer in STORE/tokenizer/, so a store is self-contained.
    word_segmenter="jieba": whole words come from segmenting the text (Chinese whole-word masking; needs jieba)
    instead of from the tokenizer's vocab alone; the store's word-start flags hold those word boundaries.
    The build's report is in `store.stats` (also stats.json); `progress(bytes_done)` is called after each chunk.
    A part of a build made by many machines (litebert.data.merge) passes `doc_offset`, the corpus-wide ordinal of
    its first document (the validation split hashes those), and `part`, recorded in meta.json; a part may hold no
    document (the merged store is checked instead).
    """
    if not 0.0 <= validation_fraction < 1.0:
        raise CorpusError(f"validation_fraction={validation_fraction}: must be in [0, 1)")
    if seed < 0 or workers < 1 or max_sentence_tokens < 1 or shard_tokens < 1:
        raise CorpusError("seed must be >= 0; workers, max_sentence_tokens and shard_tokens must be >= 1")
    out = Path(out)
    check_output(out if out.exists() and not out.is_dir() else out.parent, shown=str(out))  # before any work
    if out.exists() and not overwrite:
        raise CorpusError(f"{out}: already exists (use --overwrite to replace it)")
    if out.exists() and not (out / "meta.json").is_file():
        raise CorpusError(f"{out}: --overwrite replaces only a token store, and this is not one (no meta.json); "
                          "remove it yourself or choose another --out")
    if max_doc_sentences < 0:
        raise CorpusError(f"max_doc_sentences={max_doc_sentences}: must be >= 0 (0: never cut)")
    if word_segmenter is not None:
        from litebert.data.segment import load_segmenter

        load_segmenter(word_segmenter)  # fail now (unknown name, jieba missing), not in a worker
    reader = CorpusReader(inputs, on_bad_utf8=on_bad_utf8, chunk_bytes=chunk_bytes,
                          max_doc_sentences=max_doc_sentences)
    tok = tokenizer
    if isinstance(tokenizer, (str, os.PathLike)):
        from litebert.tokenizer import load_tokenizer

        tok = load_tokenizer(tokenizer)
        tokenizer = str(Path(tokenizer).resolve())
    dtype = token_dtype(tok.vocab_size)

    with writing_store(out) as tmp:
        try:
            inject_fault("stop", 0, 0)  # (tests: a build that has taken its locks stops here)
            writer = _StoreWriter(tmp, dtype, seed, validation_fraction, min_doc_tokens, min_doc_sentences,
                                  shard_tokens, doc_offset)
            # one worker: tokenize in this process with the tokenizer already loaded; more: each worker loads it
            initargs = (tok if workers == 1 else tokenizer, dtype.str, max_sentence_tokens, word_segmenter)
            encoded = _ordered_map(_encode_chunk, reader.chunks(), workers, initargs, inflight=2 * workers)
            for enc in encoded:
                writer.add(enc)
                if progress is not None:
                    progress(writer.num_bytes)
            splits = writer.finish()
            stats = _build_stats(reader, writer, splits, on_bad_utf8)
            if part is None:
                check_usable(stats, validation_fraction)
            meta = {
                "format": FORMAT,
                "version": VERSION,
                "dtype": dtype.str,
                "tokenizer": {
                    "class": type(tok).__name__, "fingerprint": tok.fingerprint(), "vocab_size": int(tok.vocab_size),
                    "pad_id": tok.pad_id, "unk_id": tok.unk_id, "cls_id": tok.cls_id, "sep_id": tok.sep_id,
                    "mask_id": tok.mask_id, "special_ids": sorted(int(i) for i in tok.special_ids),
                },
                "build": {
                    "inputs": reader.stats.file_info, "seed": seed, "validation_fraction": validation_fraction,
                    "on_bad_utf8": on_bad_utf8, "max_sentence_tokens": max_sentence_tokens,
                    "min_doc_tokens": min_doc_tokens, "min_doc_sentences": min_doc_sentences,
                    "shard_tokens": shard_tokens, "max_doc_sentences": max_doc_sentences,
                    **({"word_segmenter": word_segmenter} if word_segmenter else {}),
                },
                "splits": splits,
            }
            if part is not None:
                meta["part"] = {**part, "documents_read": reader.stats.documents}
            tok.save_pretrained(tmp / "tokenizer")
            _write_json(tmp / "stats.json", stats)
            _write_json(tmp / "meta.json", meta)  # last: its presence marks a complete store
            fsync_dir(tmp)
            _swap_into_place(tmp, out)
        except BaseException as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            err = disk_error(exc) if isinstance(exc, Exception) else None
            if err is None or err.errno not in DISK_ERRNOS:
                raise
            raise OutputError(f"--out {out}: the build stopped: {reason(err)} ({err.filename or tmp}); the partial "
                              "store was removed and nothing was replaced. Free some space or choose another --out"
                              ) from None
    store = TokenStore.open(out)
    # how the build went on this machine: varies run to run, so it is not part of the store
    store.build_info = {"worker_cpu_seconds": writer.worker_cpu_seconds,
                        "worker_peak_rss_mb": writer.worker_peak_rss_kb / 1024}
    return store


@contextlib.contextmanager
def writing_store(out: Path) -> Iterator[Path]:
    """One writer per store path at a time, a build or a merge: the lock file .OUT.lock beside the store (the store
    itself is replaced by a rename, so it cannot carry the lock) and the flocked temp folder the new store is
    written in (`_build_folder`), which this yields."""
    with OutputLock(out.parent / f".{out.name}.lock", f"--out {out}"), _build_folder(out) as tmp:
        yield tmp


@contextlib.contextmanager
def _build_folder(out: Path) -> Iterator[Path]:
    """The build's temp folder .OUT.tmp-PID, flocked (files.hold_dir) while the build runs; the caller holds the
    lock file .OUT.lock.

    The lock file can be deleted under a running build (a tmp cleaner, a hand clean-up), and a second build would
    then lock a new one. Its temp folder cannot be deleted without wrecking the build itself, so a build also
    refuses to start while another build's temp folder of the same store is held. It takes its own first, so two
    builds that both got past the lock file see each other. Other stores' builds in the same parent are not
    touched (their folders have other names)."""
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    held = hold_dir(tmp)
    try:
        others = [p for p in _build_folders(out) if p != tmp and dir_is_held(p)]
        if others:
            pid = others[0].name.rsplit("-", 1)[1]
            raise OutputError(f"--out {out}: in use by another litebert process (pid {pid}, which holds "
                              f"{others[0]}); wait for it to finish or choose another output")
        _remove_stale_temps(out)
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if held is not None:
            os.close(held)


def _build_folders(out: Path) -> list[Path]:
    """The temp and set-aside folders (.OUT.tmp-PID, .OUT.old-PID) of builds of `out`."""
    pattern = re.compile(rf"^\.{re.escape(out.name)}\.(tmp|old)-(\d+)$")
    return [entry for entry in out.parent.iterdir()
            if pattern.match(entry.name) and entry.is_dir() and not entry.is_symlink()]


def _remove_stale_temps(out: Path) -> list[Path]:
    """Remove the temp and set-aside folders of builds whose process is gone (killed mid-build); the caller holds
    the store's lock, and a live pid's folder (or one still held) is left alone."""
    removed = []
    for entry in _build_folders(out):
        if not pid_alive(int(entry.name.rsplit("-", 1)[1])) and not dir_is_held(entry):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


# Documents this long (in sentences) on average mean the corpus has no document breaks: a book written one
# sentence per line with no blank lines reads as one document.


HUGE_DOCUMENT_SENTENCES = 1000


def huge_documents(documents: int, sentences: int, cut: int) -> list[str]:
    """A warning, with the option that fixes it, when the documents are whole books."""
    if cut or not documents or sentences / documents < HUGE_DOCUMENT_SENTENCES:
        return []
    return [f"{documents} document(s) of {sentences / documents:,.0f} sentences on average: a text with no blank "
            "lines between documents reads as one document, so sentence pairs and the validation split take whole "
            "files; pass --max-doc-sentences 100 (or another size) to cut them into documents"]


def _build_stats(reader: CorpusReader, writer: _StoreWriter, splits: dict, on_bad_utf8: str) -> dict:
    rs = reader.stats
    bad_action = {"error": "none", "replace": "replaced with U+FFFD", "skip": "line skipped"}[on_bad_utf8]
    return {
        "input": {"files": rs.files, "bytes": rs.bytes, "lines": rs.lines, "documents": rs.documents + rs.empty_records},
        "kept": {k: sum(splits[s][k] for s in SPLITS) for k in ("documents", "sentences", "tokens")},
        "splits": {s: {k: splits[s][k] for k in ("documents", "sentences", "tokens")} for s in SPLITS},
        "skipped": {
            "empty_documents": {"count": rs.empty_records + rs.documents - writer.docs_seen,
                                "why": "JSONL text empty, or no line of the document produced a token"},
            "short_documents": {"count": writer.short_docs,
                                "why": f"fewer than {writer.min_doc_tokens} tokens or {writer.min_doc_sentences} "
                                       "sentence(s): too short for a segment pair"},
            "empty_sentences": {"count": writer.empty_sentences, "why": "line produced no token"},
            "bad_utf8_lines": {"count": rs.bad_utf8_lines, "why": f"invalid UTF-8 ({bad_action})"},
        },
        "warnings": split_warnings(splits, writer.validation_fraction) + huge_documents(
            sum(splits[s]["documents"] for s in SPLITS), sum(splits[s]["sentences"] for s in SPLITS),
            reader.stats.documents_cut),
        "changed": {
            "long_sentences_cut": {"count": writer.long_sentences,
                                   "why": "sentence longer than max_sentence_tokens, cut at word starts"},
            "long_documents_cut": {"count": reader.stats.documents_cut,
                                   "why": "plain-text document longer than max_doc_sentences, cut into pieces"},
        },
    }


def check_usable(stats: dict, validation_fraction: float) -> None:
    """A store must keep a document, and one for training."""
    if stats["kept"]["documents"] == 0:
        raise CorpusError(f"empty corpus: no document with tokens in {stats['input']['files']} input file(s) "
                          f"({_skips_line(stats)})")
    if stats["splits"]["train"]["documents"] == 0:
        raise CorpusError(f"all {stats['kept']['documents']} document(s) went to the validation split "
                          f"(lower --validation-fraction {validation_fraction})")


def split_warnings(splits: dict, validation_fraction: float) -> list[str]:
    if validation_fraction > 0 and splits["validation"]["documents"] == 0:
        return [f"the validation split is empty: {splits['train']['documents']} document(s) and validation fraction "
                f"{validation_fraction} left none (use more documents or --validation-fraction 0)"]
    return []


def _skips_line(stats: dict) -> str:
    parts = [f"{v['count']} {k.replace('_', ' ')}" for k, v in stats["skipped"].items() if v["count"]]
    return "skipped: " + (", ".join(parts) if parts else "nothing")


def format_report(stats: dict) -> str:
    """The human-readable build report (the same numbers as stats.json)."""
    lines = [f"read       {stats['input']['files']} file(s), {stats['input']['bytes'] / 1e6:.2f} MB, "
             f"{stats['input']['lines']} lines, {stats['input']['documents']} documents"]
    for name, s in stats["splits"].items():
        lines.append(f"{name:<11}{s['documents']} documents, {s['sentences']} sentences, {s['tokens']} tokens")
    for group in ("skipped", "changed"):
        for key, item in stats[group].items():
            if item["count"]:
                lines.append(f"{group:<11}{item['count']} {key.replace('_', ' ')}: {item['why']}")
    lines += [f"warning    {w}" for w in stats.get("warnings", [])]
    return "\n".join(lines)


def _write_json(path: Path, obj: dict) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, sort_keys=True, ensure_ascii=False)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())


def _swap_into_place(tmp: Path, out: Path) -> None:
    """Rename tmp to out; an existing out (overwrite) is moved aside first and deleted after."""
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.old-{os.getpid()}"
        os.replace(out, old)
    os.replace(tmp, out)
    fsync_dir(out.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------------------
# Reading
