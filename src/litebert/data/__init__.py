"""Pretraining data: read corpora, tokenize them once into a token store, make examples on the fly.

    build_store(inputs, tokenizer_dir, "store/")          # stage 1 (also `litebert data build`)
    store = TokenStore.open("store/")
    ds = PretrainingDataset(store, max_seq_length=128)    # stage 2: SOP pairs + n-gram whole-word masking
    ds.set_epoch(e)                                       # per epoch: its examples, then its order on rank r
    sampler = ResumableSampler(ds, rank=r, world_size=w, epoch=e)
    DataLoader(ds, batch_size=64, sampler=sampler, collate_fn=ds.collate_fn)

The stage-2 names (which need torch) are imported on first use, so the tokenizing worker processes of stage 1
start without importing torch.
"""

from __future__ import annotations

import importlib

from litebert.data.corpus import CorpusReader, expand_inputs, read_documents, split_sentences
from litebert.data.store import StoreSplit, TokenStore
from litebert.data.store_build import build_store, format_report

_LAZY = {
    name: "litebert.data.pretraining"
    for name in ("ChunkIndex", "Phase", "PretrainingDataset", "ResumableSampler", "build_chunk_index",
                 "collate_pretraining", "mask_sequence", "ngram_probabilities", "phase_for_step",
                 "truncation_counts")
}

__all__ = ["CorpusReader", "StoreSplit", "TokenStore", "build_store", "expand_inputs", "format_report",
           "read_documents", "split_sentences", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
