"""A lower bound on the memory a pretraining run (or a loaded model) needs, checked before anything is allocated.

A config can be well-typed and still absurd (a vocab of 1e8, 1e9 positions or layers, an FFN of 1e10): the
allocator would fail with a traceback, or the machine would swap for minutes first. `check_training_memory` adds
up what training must hold at least, and refuses a run that cannot fit in the device's memory, naming the config
field behind it: the size whose reset to albert-base's value lowers the need the most.

The bound (bytes, fp32): every parameter costs 16 (the weight, its gradient and two optimizer moments, as LAMB and
AdamW keep), and the backward pass needs at least the input of each layer ([B, S, H] floats, 4 per value; only
these with gradient checkpointing) plus, without it, each layer's FFN activation ([B, S, I]) and attention
probabilities ([B, heads, S, S]); the MLM logits are [B, P, V]. Real use is higher (temporaries, the
allocator's slack), so a run this refuses can never fit; one it accepts may still run out (see the OOM message
in pretrain).
"""

from __future__ import annotations

from pathlib import Path
from collections.abc import Callable

from litebert.config import AlbertConfig
from litebert.errors import ConfigError

FLOAT = 4  # bytes per fp32 value
PER_PARAMETER = 16  # weight + gradient + two optimizer moments


def parameter_count(config: AlbertConfig) -> int:
    """Parameters of the encoder and its MLM head, counted analytically (no model is built; biases and norms,
    a few per cent, are left out of this lower bound)."""
    c = config
    e, h, i = c.embedding_size, c.hidden_size, c.intermediate_size
    groups = c.num_hidden_groups * c.inner_group_num
    attention_copies = c.num_hidden_layers if c.sharing in ("none", "ffn") else groups
    ffn_copies = c.num_hidden_layers if c.sharing in ("none", "attention") else groups
    embeddings = (c.vocab_size + c.max_position_embeddings + c.type_vocab_size) * e + e * h  # the decoder is tied
    return embeddings + attention_copies * 4 * h * h + ffn_copies * 2 * h * i + h * e


def training_bytes(config: AlbertConfig, micro_batch: int, seq_len: int, predictions: int,
                   gradient_checkpointing: bool = False) -> int:
    """Lower bound on the memory one training step needs, in bytes."""
    c = config
    tokens = micro_batch * seq_len
    need = parameter_count(c) * PER_PARAMETER
    need += micro_batch * predictions * c.vocab_size * FLOAT  # MLM logits [B, P, V]
    need += c.num_hidden_layers * tokens * c.hidden_size * FLOAT  # each layer's input [B, S, H]
    if not gradient_checkpointing:  # each layer's FFN activation [B, S, I] and attention probabilities [B, A, S, S]
        per_layer = tokens * c.intermediate_size + micro_batch * c.num_attention_heads * seq_len ** 2
        need += c.num_hidden_layers * per_layer * FLOAT
    return need


# The sizes a config can blow up, and the reference each is compared with: AlbertConfig's defaults (albert-base).
SIZE_FIELDS = ("vocab_size", "max_position_embeddings", "num_hidden_layers", "hidden_size", "intermediate_size",
               "embedding_size", "num_attention_heads")


def culprit(config: AlbertConfig, need: Callable[[AlbertConfig], int]) -> tuple[str, int] | None:
    """The size field whose reset to albert-base's value lowers `need` the most, with the need after that reset
    (None when no field above albert-base's value can be reset)."""
    reference = AlbertConfig()
    best = None
    for field in SIZE_FIELDS:
        if getattr(config, field) <= getattr(reference, field):
            continue
        try:
            lowered = need(config.replace(**{field: getattr(reference, field)}))
        except ConfigError:  # e.g. hidden_size no longer a multiple of the heads
            continue
        if best is None or lowered < best[1]:
            best = (field, lowered)
    return best


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


# Layers are applied one after another however few parameters they share: 10^6 layers (a few kilobytes of
# config) would make every forward pass run for hours, unkillable until it returns. The deepest released ALBERT
# has 24 layers and the paper's deepest ablation 48; this bound leaves room for experiments far beyond.
MAX_LAYERS = 1024


def check_depth(config: AlbertConfig, source: str) -> None:
    """The size rule no memory bound catches: a depth that only costs time."""
    if config.num_hidden_layers > MAX_LAYERS:
        raise ConfigError(f"{source}: config field 'num_hidden_layers' = {config.num_hidden_layers}: more than "
                          f"{MAX_LAYERS:,} layers is refused (every forward pass applies each one; the released "
                          f"models have at most 24)")


class _Host:  # the CPU, where every model is built and loaded first (no torch import needed to say so)
    type = "cpu"

    def __str__(self) -> str:
        return "cpu"


def check_model_memory(config: AlbertConfig, source: str) -> None:
    """Before a model directory is built (predict, fill-mask, serve, export-onnx, convert, finetune --model):
    the size rule, and its fp32 weights (the lower bound on what building it allocates on the host) against free
    memory; a ConfigError naming the field behind the excess otherwise."""
    device = _Host()
    available = available_bytes(device)

    def need(c: AlbertConfig) -> int:
        return parameter_count(c) * FLOAT

    if available is not None:
        _refuse_over(config, need, available, device, "building the model", source,
                     "lower the sizes in its config.json")
    check_depth(config, source)


def _refuse_over(config: AlbertConfig, need: Callable[[AlbertConfig], int], available: int, device, doing: str,
                 source: str, advice: str) -> None:
    total = need(config)
    if total <= available:
        return
    where = f"{doing} would need at least {_gib(total)}, but {device} has {_gib(available)} free"
    found = culprit(config, need)
    if found is None:
        raise ConfigError(f"{source}: {where}; {advice}")
    field, lowered = found
    raise ConfigError(f"{source}: config field '{field}' = {getattr(config, field)}: {where} (at "
                      f"{field} = {getattr(AlbertConfig(), field)}: {_gib(lowered)}); use a smaller value")


def check_training_memory(config: AlbertConfig, micro_batch: int, seq_len: int, predictions: int,
                          gradient_checkpointing: bool, device, source: str) -> None:
    """Raise ConfigError naming the field behind the excess when the lower bound exceeds free memory (then the
    depth rule)."""
    available = available_bytes(device)
    if available is None:
        check_depth(config, source)
        return

    def need(c: AlbertConfig) -> int:
        return training_bytes(c, micro_batch, seq_len, predictions, gradient_checkpointing)

    _refuse_over(config, need, available, device, "training", source,
                 f"lower --micro-batch-size {micro_batch} or --max-seq-length {seq_len}, or use "
                 "--gradient-checkpointing")
    check_depth(config, source)


def _gib(n: int) -> str:
    return f"{n / 2 ** 30:,.1f} GiB"
