"""Tiny real models for the inference tests (pipeline, serve): one saved directory per head, with the official
ALBERT SentencePiece vocab. Heads are randomly initialised (seeded) unless a test fine-tunes one."""

from __future__ import annotations

from pathlib import Path

import torch

import litebert
from litebert.config import AlbertConfig

TINY = dict(embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
            max_position_embeddings=64)


def tokenizer(shared_data: Path):
    from litebert.tokenizer import AlbertTokenizer

    return AlbertTokenizer(shared_data / "albert-vocab" / "30k-clean.model")


def save_model(path: Path, cls_name: str, tok, seed: int = 0, **config) -> Path:
    """A `cls_name` model with seeded random weights, saved with its tokenizer."""
    torch.manual_seed(seed)
    model = getattr(litebert, cls_name)(AlbertConfig(vocab_size=tok.vocab_size, **{**TINY, **config}))
    with torch.no_grad():  # heads start at ~0 logits; spread them so predictions (and their ties) differ
        for name, p in model.named_parameters():
            if name.startswith(("classifier.", "qa_outputs.")):
                p.normal_(0, 0.5)
    model.save_pretrained(path, tokenizer=tok)
    return path
