"""Tiny real models for the inference tests (pipeline, serve): one saved directory per head, with the official
ALBERT SentencePiece vocab. Heads are randomly initialised (seeded) unless a test fine-tunes one."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import litebert
from litebert.config import AlbertConfig

# A tiny config.json in albert_zh's "google" style: the official fields plus BERT leftovers (directionality,
# pooler_*, ln_type), with albert_zh's 21,128-entry WordPiece vocabulary.
ALBERT_ZH_GOOGLE_CONFIG = {
    "attention_probs_dropout_prob": 0.0, "directionality": "bidi", "hidden_act": "relu",
    "hidden_dropout_prob": 0.0, "embedding_size": 16, "hidden_size": 32, "initializer_range": 0.02,
    "intermediate_size": 48, "max_position_embeddings": 40, "num_attention_heads": 4, "num_hidden_layers": 4,
    "num_hidden_groups": 1, "inner_group_num": 1, "pooler_fc_size": 768, "pooler_type": "first_token_transform",
    "type_vocab_size": 2, "vocab_size": 21128, "ln_type": "postln",
}  # fmt: skip

TEXTS = ["a gripping , funny film", "dull .", "the plot wanders but the actors are a joy to watch from start to end"]
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


def same(a, b, atol=1e-5):
    """Equal structure and strings; numbers within atol. A batch pads rows to a common length, and float32 sums
    over other shapes round differently (~1e-8), so batched and one-at-a-time results are close, not bitwise."""
    assert _strings(a) == _strings(b)
    assert _numbers(a) == pytest.approx(_numbers(b), abs=atol)


def _strings(obj):
    if isinstance(obj, dict):
        return {k: _strings(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_strings(v) for v in obj]
    return obj if isinstance(obj, (str, type(None))) else type(obj).__name__


def _numbers(obj, ints: bool = True) -> list[float]:
    """Every number in a result, in order (strings and None dropped; ints too unless `ints`)."""
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in _numbers(v, ints)]
    if isinstance(obj, list):
        return [x for v in obj for x in _numbers(v, ints)]
    kinds = (int, float) if ints else float
    return [float(obj)] if isinstance(obj, kinds) and not isinstance(obj, bool) else []
