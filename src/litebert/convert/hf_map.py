"""Weight maps between our parameter names and Hugging Face's ALBERT, as tables.

Each row pairs one of our tensors with the Hugging Face tensor(s) it is made of. Only the fused QKV projection is
not a plain copy: ours is one [3H, H] matrix, Hugging Face keeps query, key and value apart.

Templates: `{j}` is our sub-layer index; `{g}`/`{k}` are Hugging Face's group and inner block, and j = g*K + k.
The base-model rows carry no prefix; task models put everything of the encoder under `albert.` in both worlds.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from litebert.config import AlbertConfig
from litebert.errors import ConversionError

HF_BLOCK = "encoder.albert_layer_groups.{g}.albert_layers.{k}."

BASE_ROWS = [
    ("embeddings.word_embeddings.weight", "embeddings.word_embeddings.weight"),
    ("embeddings.position_embeddings.weight", "embeddings.position_embeddings.weight"),
    ("embeddings.token_type_embeddings.weight", "embeddings.token_type_embeddings.weight"),
    ("embeddings.norm.weight", "embeddings.LayerNorm.weight"),
    ("embeddings.norm.bias", "embeddings.LayerNorm.bias"),
    ("encoder.project_in.weight", "encoder.embedding_hidden_mapping_in.weight"),
    ("encoder.project_in.bias", "encoder.embedding_hidden_mapping_in.bias"),
    ("pooler.dense.weight", "pooler.weight"),
    ("pooler.dense.bias", "pooler.bias"),
]

BLOCK_ROWS = [  # per (g, k); "qkv" rows concatenate three HF tensors
    ("encoder.attention.{j}.qkv.weight", [HF_BLOCK + f"attention.{n}.weight" for n in ("query", "key", "value")]),
    ("encoder.attention.{j}.qkv.bias", [HF_BLOCK + f"attention.{n}.bias" for n in ("query", "key", "value")]),
    ("encoder.attention.{j}.out.weight", HF_BLOCK + "attention.dense.weight"),
    ("encoder.attention.{j}.out.bias", HF_BLOCK + "attention.dense.bias"),
    ("encoder.attention.{j}.norm.weight", HF_BLOCK + "attention.LayerNorm.weight"),
    ("encoder.attention.{j}.norm.bias", HF_BLOCK + "attention.LayerNorm.bias"),
    ("encoder.ffn.{j}.up.weight", HF_BLOCK + "ffn.weight"),
    ("encoder.ffn.{j}.up.bias", HF_BLOCK + "ffn.bias"),
    ("encoder.ffn.{j}.down.weight", HF_BLOCK + "ffn_output.weight"),
    ("encoder.ffn.{j}.down.bias", HF_BLOCK + "ffn_output.bias"),
    ("encoder.ffn.{j}.norm.weight", HF_BLOCK + "full_layer_layer_norm.weight"),
    ("encoder.ffn.{j}.norm.bias", HF_BLOCK + "full_layer_layer_norm.bias"),
]

HEAD_ROWS = [  # top level of the task models
    ("mlm.dense.weight", "predictions.dense.weight"),
    ("mlm.dense.bias", "predictions.dense.bias"),
    ("mlm.norm.weight", "predictions.LayerNorm.weight"),
    ("mlm.norm.bias", "predictions.LayerNorm.bias"),
    ("mlm.bias", "predictions.bias"),
    ("sop.weight", "sop_classifier.classifier.weight"),
    ("sop.bias", "sop_classifier.classifier.bias"),
    ("classifier.weight", "classifier.weight"),
    ("classifier.bias", "classifier.bias"),
    ("qa_outputs.weight", "qa_outputs.weight"),
    ("qa_outputs.bias", "qa_outputs.bias"),
]

# HF tensors that carry no information of their own: tied copies and buffers.
HF_REDUNDANT = ("predictions.decoder.weight", "predictions.decoder.bias", "embeddings.position_ids",
                "embeddings.token_type_ids")


@dataclass(frozen=True)
class Row:
    ours: str
    hf: tuple[str, ...]  # one name = copy; three = concatenate along dim 0

    @property
    def fused(self) -> bool:
        return len(self.hf) > 1


def rows_for(config: AlbertConfig, prefix: str = "albert.") -> list[Row]:
    """Every row for this config. `prefix` is where the base model sits ("" for a bare AlbertModel)."""
    if config.hf_blocker:
        raise ConversionError(f"config field {config.hf_blocker} has no Hugging Face form; save with "
                              "format='litebert'")
    G = config.num_hidden_layers if config.sharing == "none" else config.num_hidden_groups
    K = config.inner_group_num
    rows = [Row(prefix + ours, (prefix + hf,)) for ours, hf in BASE_ROWS]
    for g in range(G):
        for k in range(K):
            for ours, hf in BLOCK_ROWS:
                names = hf if isinstance(hf, list) else [hf]
                rows.append(Row(prefix + ours.format(j=g * K + k),
                                tuple(prefix + n.format(g=g, k=k) for n in names)))
    rows += [Row(ours, (hf,)) for ours, hf in HEAD_ROWS]
    return rows


def _base_prefix(names) -> str:
    return "albert." if any(n.startswith("albert.") for n in names) else ""


def ours_to_hf(state: dict[str, torch.Tensor], config: AlbertConfig) -> dict[str, torch.Tensor]:
    """Our state dict -> Hugging Face names. Tensors our model lacks (an absent head) are simply not emitted;
    a tensor of ours with no row is an error, so nothing is dropped silently."""
    prefix = _base_prefix(state)
    state = dict(state)
    if not config.has_projection:
        # HF always projects E -> H. With E == H an identity projection is exact.
        H = config.hidden_size
        state[prefix + "encoder.project_in.weight"] = torch.eye(H)
        state[prefix + "encoder.project_in.bias"] = torch.zeros(H)
    out: dict[str, torch.Tensor] = {}
    used = set()
    for row in rows_for(config, prefix):
        if row.ours not in state:
            continue
        tensor = state[row.ours]
        parts = tensor.chunk(len(row.hf), dim=0) if row.fused else (tensor,)
        out.update({name: part.contiguous() for name, part in zip(row.hf, parts)})
        used.add(row.ours)
    leftover = sorted(set(state) - used)
    if leftover:
        raise ConversionError(f"no Hugging Face name for tensor(s) {leftover}; save with format='litebert'")
    return out


def hf_to_ours(state: dict[str, torch.Tensor], config: AlbertConfig,
               source: str = "state dict") -> tuple[dict[str, torch.Tensor], list[str]]:
    """Hugging Face state dict -> ours. Returns (state, ignored HF names).

    With E == H and no projection in `config`, the HF identity projection is dropped; a non-identity one is an
    error (load with `embedding_projection=True` to keep it: `needs_projection` tells which).
    """
    prefix = _base_prefix(state)
    out: dict[str, torch.Tensor] = {}
    used = set()
    for row in rows_for(config, prefix):
        present = [name in state for name in row.hf]
        if not any(present):
            continue
        if not all(present):
            missing = [n for n, p in zip(row.hf, present) if not p]
            raise ConversionError(f"{source}: tensor(s) {missing} missing (needed for {row.ours})")
        tensors = [state[name] for name in row.hf]
        out[row.ours] = torch.cat(tensors, dim=0) if row.fused else tensors[0]
        used.update(row.hf)
    if not config.has_projection:
        w, b = out.pop(prefix + "encoder.project_in.weight", None), out.pop(prefix + "encoder.project_in.bias", None)
        if w is not None and not is_identity_projection(w, b):
            raise ConversionError(f"{source}: embedding_hidden_mapping_in is not the identity; the config needs "
                                  "embedding_projection=True")
    ignored = sorted(n for n in state if n not in used and n.endswith(HF_REDUNDANT))
    unknown = sorted(set(state) - used - set(ignored))
    if unknown:
        raise ConversionError(f"{source}: unexpected tensor(s) {unknown[:10]}"
                              + (f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""))
    return out, ignored


def is_identity_projection(weight: torch.Tensor, bias: torch.Tensor | None) -> bool:
    if weight.shape[0] != weight.shape[1]:
        return False
    eye = torch.eye(weight.shape[0], dtype=weight.dtype)
    return bool(torch.equal(weight, eye) and (bias is None or not bias.any()))


def needs_projection(state: dict[str, torch.Tensor], config: AlbertConfig) -> bool:
    """Whether an HF state dict with E == H carries a real (non-identity) E->H projection."""
    if config.embedding_size != config.hidden_size:
        return True
    prefix = _base_prefix(state)
    w = state.get(prefix + "encoder.embedding_hidden_mapping_in.weight")
    return w is not None and not is_identity_projection(w, state.get(prefix + "encoder.embedding_hidden_mapping_in.bias"))


# HF tensor-name prefix -> the part of the model it belongs to; the pooler sits inside the base model.
HEAD_PREFIXES = {"predictions.": "mlm", "sop_classifier.": "sop", "classifier.": "classifier", "qa_outputs.": "qa",
                 "albert.pooler.": "pooler", "pooler.": "pooler"}
CLASSIFIER_CLASSES = ("AlbertForSequenceClassification", "AlbertForTokenClassification", "AlbertForMultipleChoice")


def heads_of(names) -> set[str]:
    """Which heads (and whether a pooler) a state dict with these HF names carries."""
    return {head for n in names for p, head in HEAD_PREFIXES.items() if n.startswith(p)}


def choose_model_class(names, architecture_hint: str | None = None) -> str:
    """The litebert class for a state dict with these HF names.

    Span head -> QA; classifier -> the hinted classifier class (config.json "architectures"), else sequence
    classification when a pooler is present and token classification when not (HF's token model has none);
    MLM + SOP -> pretraining; MLM alone (TF-Hub modules) -> masked LM; no head -> the bare encoder.
    """
    heads = heads_of(names)
    if "qa" in heads:
        return "AlbertForQuestionAnswering"
    if "classifier" in heads:
        if architecture_hint in CLASSIFIER_CLASSES:
            return architecture_hint
        return "AlbertForSequenceClassification" if "pooler" in heads else "AlbertForTokenClassification"
    if "mlm" in heads:
        return "AlbertForPreTraining" if "sop" in heads else "AlbertForMaskedLM"
    return "AlbertModel"
