"""A lower bound on the memory a pretraining run needs, checked before anything is allocated.

A config can be well-typed and still absurd (a vocab of 1e8, 1e9 positions or layers, an FFN of 1e10): the
allocator would fail with a traceback, or the machine would swap for minutes first. `check_training_memory` adds
up what training must hold at least, and refuses a run that cannot fit in the device's memory, naming the config
field behind the largest part.

The bound (bytes, fp32): every parameter costs 16 (the weight, its gradient and two optimizer moments, as LAMB and
AdamW keep), and the backward pass needs at least the input of each layer ([B, S, H] floats, 4 per value; only
these with gradient checkpointing) plus, without it, each layer's FFN activation ([B, S, I]) and attention
probabilities ([B, heads, S, S]); the MLM logits are [B, P, V]. Real use is higher (temporaries, the
allocator's slack), so a run this refuses can never fit; one it accepts may still run out (see the OOM message
in pretrain).
"""

from __future__ import annotations

from pathlib import Path

from litebert.config import AlbertConfig
from litebert.errors import ConfigError

FLOAT = 4  # bytes per fp32 value
PER_PARAMETER = 16  # weight + gradient + two optimizer moments


def parameter_terms(config: AlbertConfig) -> dict[str, int]:
    """Parameters by the config field that sizes them (an analytic count: no model is built)."""
    c = config
    e, h, i = c.embedding_size, c.hidden_size, c.intermediate_size
    layers = c.num_hidden_layers
    groups = c.num_hidden_groups * c.inner_group_num
    attention_copies = layers if c.sharing in ("none", "ffn") else groups
    ffn_copies = layers if c.sharing in ("none", "attention") else groups
    return {
        "vocab_size": c.vocab_size * e,  # the word embeddings (the MLM decoder shares them)
        "max_position_embeddings": c.max_position_embeddings * e,
        "hidden_size": attention_copies * 4 * h * h + e * h,
        "intermediate_size": ffn_copies * 2 * h * i,
    }


def training_bytes(config: AlbertConfig, micro_batch: int, seq_len: int, predictions: int,
                   gradient_checkpointing: bool = False) -> dict[str, int]:
    """Lower bound on training memory in bytes, split by the field that drives each part."""
    c = config
    tokens = micro_batch * seq_len
    terms = {field: n * PER_PARAMETER for field, n in parameter_terms(c).items()}
    terms["vocab_size"] += micro_batch * predictions * c.vocab_size * FLOAT  # MLM logits
    per_layer_inputs = c.num_hidden_layers * tokens * c.hidden_size * FLOAT
    terms["num_hidden_layers"] = per_layer_inputs
    if not gradient_checkpointing:
        terms["intermediate_size"] += c.num_hidden_layers * tokens * c.intermediate_size * FLOAT
        terms["num_hidden_layers"] += c.num_hidden_layers * micro_batch * c.num_attention_heads * seq_len ** 2 * FLOAT
    return terms


def available_bytes(device) -> int | None:
    """Free memory of `device` (a torch.device): the GPU's free memory, or the host's MemAvailable. None when
    it cannot be told (then nothing is refused)."""
    if device.type == "cuda":
        import torch

        return int(torch.cuda.mem_get_info(device)[0])
    if device.type != "cpu":
        return None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_training_memory(config: AlbertConfig, micro_batch: int, seq_len: int, predictions: int,
                          gradient_checkpointing: bool, device, source: str) -> None:
    """Raise ConfigError naming the field behind the largest part when the lower bound exceeds free memory."""
    available = available_bytes(device)
    if available is None:
        return
    terms = training_bytes(config, micro_batch, seq_len, predictions, gradient_checkpointing)
    need = sum(terms.values())
    if need <= available:
        return
    field = max(terms, key=terms.get)
    raise ConfigError(f"{source}: config field '{field}' = {getattr(config, field)} makes training need at least "
                      f"{_gib(need)} ({_gib(terms[field])} of it from {field}), but {device} has {_gib(available)} "
                      "free; use a smaller value (or a smaller --micro-batch-size / --max-seq-length, or "
                      "--gradient-checkpointing, when the activations are the large part)")


def _gib(n: int) -> str:
    return f"{n / 2 ** 30:,.1f} GiB"
