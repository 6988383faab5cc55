"""The token store: a corpus tokenized once into sharded, memory-mapped arrays (stage 1 of pretraining data).

This module is the format and its reader (`TokenStore`, `StoreSplit`); litebert.data.store_build writes one.

Layout of a store directory (all arrays little-endian, raw, memory-mapped on open):

    meta.json                       format, tokenizer (fingerprint, vocab size, special ids), build settings, counts
    stats.json                      what was read, kept and skipped, and why (machine-readable build report)
    train/00000.tokens.bin          token ids, uint16 when the vocab fits, else int32          [T]
    train/00000.word_starts.bin     1 bit per token (np.packbits order): token starts a whole word  [ceil(T/8)]
    train/00000.sentences.bin       int64 token offset of each sentence, then T                [S + 1]
    train/00000.documents.bin       int64 sentence offset of each document, then S             [D + 1]
    validation/00000.*              the same for the held-out documents

A document never spans two shards. Documents go to "validation" by a hash of (seed, document ordinal), so the split
does not depend on chunking or worker count. The build tokenizes in worker processes, streaming a bounded number of
chunks, and one writer appends the results in input order: memory stays flat and the bytes written are the same
for any --workers. The store is written into a temporary folder that is renamed into place at the end (meta.json
is written last), so a crash never leaves a store that opens.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import cached_property
from pathlib import Path

import numpy as np

from litebert.errors import CorpusError, TokenizerError
from litebert.files import read_json, sha256_file

FORMAT = "litebert-token-store"
VERSION = 1
SPLITS = ("train", "validation")
_TOKENS, _WORD_STARTS, _SENTENCES, _DOCUMENTS = "tokens.bin", "word_starts.bin", "sentences.bin", "documents.bin"
_OFFSET_DTYPE = np.dtype("<i8")


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype("<u2") if vocab_size <= 1 << 16 else np.dtype("<i4")


class StoreSplit:
    """One split of a store: documents -> sentences -> tokens, addressed by global sentence index."""

    def __init__(self, root: Path, name: str, info: dict, dtype: np.dtype):
        self.root, self.name, self.dtype = root, name, dtype
        self.shards: list[dict] = info["shards"]
        self.num_documents: int = info["documents"]
        self.num_sentences: int = info["sentences"]
        self.num_tokens: int = info["tokens"]
        # [K + 1] first global sentence / document index and running token count of each shard
        self.sentence_base = np.cumsum([0] + [s["sentences"] for s in self.shards])
        self.document_base = np.cumsum([0] + [s["documents"] for s in self.shards])
        self.token_base = np.cumsum([0] + [s["tokens"] for s in self.shards])
        self._maps: list[dict] | None = None

    def __len__(self) -> int:
        return self.num_documents

    def __getstate__(self):  # DataLoader workers re-open the memory maps instead of pickling their contents
        state = self.__dict__.copy()
        state["_maps"] = None
        for key in ("sentence_lengths", "sentence_offsets", "document_offsets"):
            state.pop(key, None)
        return state

    def _shard_maps(self) -> list[dict]:
        if self._maps is None:
            maps = []
            for shard in self.shards:
                prefix = self.root / shard["name"]
                t, s, d = shard["tokens"], shard["sentences"], shard["documents"]
                maps.append({
                    _TOKENS: _memmap(prefix, _TOKENS, self.dtype, t),
                    _WORD_STARTS: _memmap(prefix, _WORD_STARTS, np.dtype(np.uint8), (t + 7) // 8),
                    _SENTENCES: _memmap(prefix, _SENTENCES, _OFFSET_DTYPE, s + 1),
                    _DOCUMENTS: _memmap(prefix, _DOCUMENTS, _OFFSET_DTYPE, d + 1),
                })
            self._maps = maps
        return self._maps

    # The whole-split arrays below hold 8-16 bytes per sentence in memory: for tests and inspection. Making
    # examples uses the per-shard lookups after them, which read the memory-mapped shard files instead.
    @cached_property
    def sentence_lengths(self) -> np.ndarray:
        """[S] int64 tokens per sentence."""
        parts = [np.diff(m[_SENTENCES]) for m in self._shard_maps()]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    @cached_property
    def sentence_offsets(self) -> np.ndarray:
        """[S + 1] int64 running token count over the split (not a file offset: shards restart at 0)."""
        return np.concatenate([[0], np.cumsum(self.sentence_lengths)])

    @cached_property
    def document_offsets(self) -> np.ndarray:
        """[D + 1] int64 global index of each document's first sentence, then S."""
        parts = [m[_DOCUMENTS][:-1] + base for m, base in zip(self._shard_maps(), self.sentence_base)]
        return np.concatenate(parts + [[self.num_sentences]]).astype(np.int64)

    def _locate(self, start: int, end: int) -> tuple[dict, int, int]:
        """Shard maps and shard-local token range of global sentences [start, end) (must be in one shard)."""
        k = int(np.searchsorted(self.sentence_base, start, side="right")) - 1
        if not (0 <= start < end and k < len(self.shards) and end <= self.sentence_base[k + 1]):
            raise IndexError(f"sentences [{start}, {end}) are not inside one shard of split {self.name!r}")
        maps = self._shard_maps()[k]
        local = maps[_SENTENCES]
        base = self.sentence_base[k]
        return maps, int(local[start - base]), int(local[end - base])

    def tokens(self, start: int, end: int | None = None) -> np.ndarray:
        """Token ids of sentences [start, end) (end defaults to start + 1)."""
        maps, t0, t1 = self._locate(start, start + 1 if end is None else end)
        return np.asarray(maps[_TOKENS][t0:t1])

    def word_starts(self, start: int, end: int | None = None) -> np.ndarray:
        """[T] bool word-start flags of sentences [start, end)."""
        maps, t0, t1 = self._locate(start, start + 1 if end is None else end)
        packed = maps[_WORD_STARTS][t0 >> 3 : (t1 + 7) >> 3]
        return np.unpackbits(packed)[t0 & 7 : (t0 & 7) + t1 - t0].astype(bool)

    def gather(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Token ids (int64) and word-start flags (bool) at token positions [N] of the split's running count
        (as in sentence_offsets): one fancy index per shard for a whole batch, instead of a memmap slice (and a
        bit unpacking) per sentence."""
        positions = np.asarray(positions, dtype=np.int64)
        ids, flags = np.empty(len(positions), np.int64), np.empty(len(positions), bool)
        base = self.token_base
        if len(positions) and (positions.min() < 0 or positions.max() >= base[-1]):
            raise IndexError(f"token positions outside split {self.name!r} (0..{int(base[-1]) - 1})")
        for k, rows, local in self._by_shard(positions, base):  # only the shards the batch reads
            maps = self._shard_maps()[k]  # local: [n] shard-local token index
            ids[rows] = np.asarray(maps[_TOKENS])[local]  # asarray: plain ndarray indexing, no memmap wrapper
            packed = np.asarray(maps[_WORD_STARTS])[local >> 3]  # np.packbits order: bit 7 is the first token
            flags[rows] = (packed >> (7 - (local & 7)).astype(np.uint8)) & 1
        return ids, flags

    def document(self, index: int) -> list[np.ndarray]:
        """The sentences (token id arrays) of document `index`."""
        d0, d1 = self.document_start(np.array([index, index + 1])).tolist()
        return [self.tokens(s) for s in range(d0, d1)]

    # -- per-shard lookups: global indices [N] -> values read from the shards' memory maps -------------------------
    def _by_shard(self, index: np.ndarray, base: np.ndarray):
        """(shard, rows, shard-local index) for global indices [N] under a [K + 1] base (sentence_base,
        document_base); the index one past a shard's last belongs to that shard (its end offset)."""
        index = np.asarray(index, dtype=np.int64)
        if len(self.shards) == 1:
            yield 0, slice(None), index
            return
        shard = np.minimum(np.searchsorted(base, index, side="right") - 1, len(self.shards) - 1)
        for k in np.unique(shard).tolist():
            rows = np.flatnonzero(shard == k)
            yield k, rows, index[rows] - base[k]

    def _lookup(self, index, base: np.ndarray, kind: str, add: np.ndarray) -> np.ndarray:
        index = np.asarray(index, dtype=np.int64)
        out = np.empty(index.shape, np.int64)
        for k, rows, local in self._by_shard(index, base):
            out[rows] = np.asarray(self._shard_maps()[k][kind])[local] + add[k]
        return out

    def sentence_offset(self, sentences) -> np.ndarray:
        """[N] running token count (as sentence_offsets) at global sentence indices [N] in [0, S]."""
        return self._lookup(sentences, self.sentence_base, _SENTENCES, self.token_base)

    def document_start(self, documents) -> np.ndarray:
        """[N] global first sentence (as document_offsets) of documents [N] in [0, D] (D gives S)."""
        return self._lookup(documents, self.document_base, _DOCUMENTS, self.sentence_base)

    def document_of(self, sentences) -> np.ndarray:
        """[N] the document holding each global sentence [N] in [0, S)."""
        sentences = np.asarray(sentences, dtype=np.int64)
        out = np.empty(sentences.shape, np.int64)
        for k, rows, local in self._by_shard(sentences, self.sentence_base):
            docs = np.asarray(self._shard_maps()[k][_DOCUMENTS])  # [D_k + 1] shard-local sentence offsets
            out[rows] = np.searchsorted(docs, local, side="right") - 1 + self.document_base[k]
        return out

    def sentence_reaching(self, sentences, tokens) -> np.ndarray:
        """[N] the first sentence boundary e (global, in the shard of each sentence [N]) whose running token count
        is >= tokens [N]; past the shard's end: one past its last sentence + 1 (callers clamp to a document end)."""
        sentences, tokens = np.asarray(sentences, dtype=np.int64), np.asarray(tokens, dtype=np.int64)
        out = np.empty(sentences.shape, np.int64)
        for k, rows, _local in self._by_shard(sentences, self.sentence_base):
            offsets = np.asarray(self._shard_maps()[k][_SENTENCES])  # [S_k + 1]
            reach = np.searchsorted(offsets, tokens[rows] - self.token_base[k], side="left")
            out[rows] = reach + self.sentence_base[k]
        return out

    def blocks(self, max_sentences: int):
        """The split in blocks of whole documents of about max_sentences sentences (a longer document is one block),
        read with plain file reads (not the memory maps, whose pages would stay resident): yields (first global
        sentence, lengths [n] int64 tokens per sentence, doc_offsets [d + 1] int64 block-local document starts).
        Memory stays at one block whatever the split's size."""
        for k, shard in enumerate(self.shards):
            prefix = self.root / shard["name"]
            d, num_docs = 0, shard["documents"]
            while d < num_docs:
                docs = _read(prefix, _DOCUMENTS, d, min(num_docs - d, max_sentences) + 1)  # >= 1 sentence per doc
                take = max(1, int(np.searchsorted(docs, docs[0] + max_sentences, side="right")) - 1)
                s0, s1 = int(docs[0]), int(docs[take])
                lengths = np.diff(_read(prefix, _SENTENCES, s0, s1 - s0 + 1))
                yield int(self.sentence_base[k]) + s0, lengths, docs[: take + 1] - s0
                d += take


def _read(prefix: Path, kind: str, start: int, count: int) -> np.ndarray:
    """Entries [start, start + count) of a shard's int64 offsets file, read (not mapped)."""
    return np.fromfile(f"{prefix}.{kind}", dtype=_OFFSET_DTYPE, count=count,
                       offset=start * _OFFSET_DTYPE.itemsize).astype(np.int64)


def _memmap(prefix: Path, kind: str, dtype: np.dtype, count: int) -> np.ndarray:
    path = Path(f"{prefix}.{kind}")
    expected = count * dtype.itemsize
    try:
        size = path.stat().st_size
    except OSError:
        raise CorpusError(f"{path}: missing from the token store (rebuild it with `litebert data build`)") from None
    if size != expected:
        raise CorpusError(f"{path}: {size} bytes, meta.json says {expected}: the store is truncated or corrupt "
                          "(rebuild it with `litebert data build`)")
    if count == 0:
        return np.zeros(0, dtype)
    return np.memmap(path, dtype=dtype, mode="r", shape=(count,))


class TokenStore:
    """A built token store. `TokenStore.open(path)`; `store.split("train")`; `store.tokenizer_fingerprint`."""

    def __init__(self, path: Path, meta: dict, stats: dict):
        self.path, self.meta, self.stats = path, meta, stats
        self.build_info: dict = {}  # set by build_store: worker CPU seconds and peak RSS of this build
        self.dtype = np.dtype(meta["dtype"])
        self._splits = {name: StoreSplit(path, name, meta["splits"][name], self.dtype) for name in SPLITS}

    @classmethod
    def open(cls, path: str | os.PathLike) -> TokenStore:
        path = Path(path)
        meta_path = path / "meta.json"
        if not meta_path.is_file():
            hint = " (the build did not finish)" if path.is_dir() else ""
            raise CorpusError(f"{meta_path}: not found: {path} is not a token store{hint}; "
                              "build one with `litebert data build`")
        meta = _read_json(meta_path)
        if meta.get("format") != FORMAT or meta.get("version") != VERSION:
            raise CorpusError(f"{meta_path}: not a {FORMAT} version {VERSION} (format={meta.get('format')!r}, "
                              f"version={meta.get('version')!r}); rebuild it with `litebert data build`")
        try:
            for name in SPLITS:
                split = meta["splits"][name]
                if sum(s["tokens"] for s in split["shards"]) != split["tokens"]:
                    raise KeyError(f"splits.{name}.tokens")
            np.dtype(meta["dtype"])
            meta["tokenizer"]["fingerprint"], meta["tokenizer"]["vocab_size"], meta["tokenizer"]["special_ids"]
        except (KeyError, TypeError, ValueError) as exc:
            raise CorpusError(f"{meta_path}: missing or inconsistent field {exc}; rebuild the store") from None
        stats = _read_json(path / "stats.json") if (path / "stats.json").is_file() else {}
        store = cls(path, meta, stats)
        for split in store._splits.values():  # checks every file's size now, not on the first batch
            split._shard_maps()
        return store

    def split(self, name: str = "train") -> StoreSplit:
        if name not in self._splits:
            raise CorpusError(f"split {name!r}: a token store has {', '.join(SPLITS)}")
        return self._splits[name]

    def num_documents(self, split: str = "train") -> int:
        return self.split(split).num_documents

    def sentence(self, index: int, split: str = "train") -> np.ndarray:
        return self.split(split).tokens(index)

    @property
    def tokenizer_fingerprint(self) -> str:
        return self.meta["tokenizer"]["fingerprint"]

    @property
    def content_fingerprint(self) -> str:
        """sha256 of what the store holds: every split's shard records (counts and checksums of the token files) and
        the tokenizer. A store copied or moved elsewhere keeps it; one rebuilt from other text or with other
        settings (validation fraction, seed, document limits) does not."""
        held = json.dumps([self.meta["splits"], self.meta["tokenizer"]], sort_keys=True)
        return hashlib.sha256(held.encode()).hexdigest()

    @property
    def vocab_size(self) -> int:
        return int(self.meta["tokenizer"]["vocab_size"])

    @property
    def special_ids(self) -> frozenset[int]:
        return frozenset(self.meta["tokenizer"]["special_ids"])

    def token_id(self, name: str) -> int:
        """'pad', 'unk', 'cls', 'sep' or 'mask' -> its id."""
        return int(self.meta["tokenizer"][f"{name}_id"])

    def check_tokens(self, vocab_size: int) -> None:
        """Before training: every shard file matches the sha256 recorded at build (stores built before checksums
        have none to check), and no token id is >= `vocab_size` (the recorded maximum, or a scan for older
        stores). Raises CorpusError naming the file; reads the whole store once."""
        for split in self._splits.values():
            for shard, maps in zip(split.shards, split._shard_maps()):
                prefix = self.path / shard["name"]
                for kind, expected in (shard.get("sha256") or {}).items():
                    if sha256_file(Path(f"{prefix}.{kind}")) != expected:
                        raise CorpusError(f"{prefix}.{kind}: sha256 differs from meta.json: the shard is corrupt "
                                          "(rebuild the store with `litebert data build`)")
                tokens = maps[_TOKENS]
                top = shard.get("max_token_id")
                if top is None:
                    top = int(tokens.max()) if len(tokens) else -1
                if top >= vocab_size:
                    raise CorpusError(f"{prefix}.{_TOKENS}: holds token id {top}, outside the model's vocabulary "
                                      f"of {vocab_size}; the store does not belong to this tokenizer or is corrupt "
                                      "(rebuild it with `litebert data build`)")

    def check_tokenizer(self, tokenizer) -> None:
        """Raise TokenizerError unless `tokenizer` is the one this store was built with."""
        if tokenizer.fingerprint() != self.tokenizer_fingerprint:
            raise TokenizerError(f"{self.path}: built with tokenizer {self.tokenizer_fingerprint[:12]}, not "
                                 f"{tokenizer.fingerprint()[:12]} ({tokenizer!r}); rebuild the store or use that "
                                 "tokenizer")

    def __repr__(self) -> str:
        sizes = ", ".join(f"{n}: {s.num_documents} docs / {s.num_tokens} tokens" for n, s in self._splits.items())
        return f"TokenStore({str(self.path)!r}, {sizes})"


def _read_json(path: Path) -> dict:
    """A store's meta.json or stats.json."""
    return read_json(path, CorpusError, expect=dict, hint="rebuild the store")
