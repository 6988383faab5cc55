"""TensorFlow ALBERT checkpoints (google-research/albert, TF-Hub, brightmart/albert_zh) -> Hugging Face names.

`load_tf_albert(path)` reads a checkpoint with the pure-numpy `tf_bundle` reader (TensorFlow is never imported),
maps every tensor through an explicit name TABLE, checks each shape against the config, and returns
`(hf_config_dict, hf_state_dict, report)`. The state dict uses the parameter names of transformers'
`AlbertForPreTraining` / `AlbertForSequenceClassification` / `AlbertForQuestionAnswering`, so
`transformers.AlbertConfig(**hf_config_dict)` + `load_state_dict(hf_state_dict)` is all a caller needs, and
`litebert.convert.hf_map.hf_to_ours` takes it from there.

Layouts:
- official (google-research/albert, TF-Hub with its `module/` prefix stripped, albert_zh "google" models):
  `bert/encoder/transformer/group_{g}/inner_group_{k}/...`; TF kernels are [in, out], HF weights [out, in].
  When embedding_size == hidden_size the official graph has no `embedding_hidden_mapping_in` while HF always has
  one: we emit an identity weight and a zero bias (exact).
- brightmart (albert_zh's own modeling.py): word ids -> word_embeddings [V, E] -> word_embeddings_2 [E, H], then
  H-wide position/type embeddings and LayerNorm; BERT-style layer scopes, `layer_shared` (all layers share one) or
  `layer_{i}`; the MLM head is dense H->H, LayerNorm(H), then x @ word_embeddings_2^T @ word_embeddings^T.
  This is exactly standard ALBERT with embedding_size := H and word table := word_embeddings @ word_embeddings_2
  (lookup-then-project == project-the-table-then-lookup, and the tied decoder computes x @ (W @ W2)^T), plus an
  identity embedding_hidden_mapping_in. We convert it that way and say so in the report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from litebert.config import AlbertConfig
from litebert.convert.hf_map import HF_BLOCK, choose_model_class, heads_of
from litebert.convert.tf_bundle import CheckpointReader
from litebert.errors import ConfigError, ConversionError
from litebert.files import read_json

TF_SOURCES = ("auto", "tf", "tfhub", "albert_zh")

# ----------------------------------------------------------------------------------------------------------------
# Name tables. Each row: (TF variable or scope, HF parameter or module, kind). kind "param" copies one tensor,
# "dense" expands to kernel (transposed) + bias, "layer_norm" to gamma + beta. {g} = group, {k} = inner group.

_EMBEDDINGS = [
    ("bert/embeddings/word_embeddings", "albert.embeddings.word_embeddings.weight", "param"),
    ("bert/embeddings/position_embeddings", "albert.embeddings.position_embeddings.weight", "param"),
    ("bert/embeddings/token_type_embeddings", "albert.embeddings.token_type_embeddings.weight", "param"),
    ("bert/embeddings/LayerNorm", "albert.embeddings.LayerNorm", "layer_norm"),
]
_HEADS = [
    ("bert/pooler/dense", "albert.pooler", "dense"),
    ("cls/predictions/transform/dense", "predictions.dense", "dense"),
    ("cls/predictions/transform/LayerNorm", "predictions.LayerNorm", "layer_norm"),
    ("cls/predictions/output_bias", "predictions.bias", "param"),
    ("cls/seq_relationship/output_weights", "sop_classifier.classifier.weight", "param"),  # [2, H]: already [out, in]
    ("cls/seq_relationship/output_bias", "sop_classifier.classifier.bias", "param"),
    ("output_weights", "classifier.weight", "param"),  # fine-tuned classifier / RACE head, [num_labels, H]
    ("output_bias", "classifier.bias", "param"),
    ("cls/squad/output_weights", "qa_outputs.weight", "param"),  # SQuAD v1 span head, [2, H]
    ("cls/squad/output_bias", "qa_outputs.bias", "param"),
]
_HF_LAYER = "albert." + HF_BLOCK.removesuffix(".")  # albert.encoder.albert_layer_groups.{g}.albert_layers.{k}
_OFFICIAL_LAYER = [
    ("attention_1/self/query", "attention.query", "dense"),
    ("attention_1/self/key", "attention.key", "dense"),
    ("attention_1/self/value", "attention.value", "dense"),
    ("attention_1/output/dense", "attention.dense", "dense"),
    ("LayerNorm", "attention.LayerNorm", "layer_norm"),  # post-attention LN
    ("ffn_1/intermediate/dense", "ffn", "dense"),
    ("ffn_1/intermediate/output/dense", "ffn_output", "dense"),  # nested under intermediate in the official code
    ("LayerNorm_1", "full_layer_layer_norm", "layer_norm"),  # post-FFN LN
]
_BRIGHTMART_LAYER = [
    ("attention/self/query", "attention.query", "dense"),
    ("attention/self/key", "attention.key", "dense"),
    ("attention/self/value", "attention.value", "dense"),
    ("attention/output/dense", "attention.dense", "dense"),
    ("attention/output/LayerNorm", "attention.LayerNorm", "layer_norm"),
    ("intermediate/dense", "ffn", "dense"),
    ("output/dense", "ffn_output", "dense"),
    ("output/LayerNorm", "full_layer_layer_norm", "layer_norm"),
]


def _layers(tf_scope: str, hf_scope: str, rows: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    return [(f"{tf_scope}/{tf}", f"{hf_scope}.{hf}", kind) for tf, hf, kind in rows]


OFFICIAL_TABLE = [
    *_EMBEDDINGS,
    ("bert/encoder/embedding_hidden_mapping_in", "albert.encoder.embedding_hidden_mapping_in", "dense"),
    *_layers("bert/encoder/transformer/group_{g}/inner_group_{k}", _HF_LAYER, _OFFICIAL_LAYER),
    *_HEADS,
]
BRIGHTMART_TABLE = [
    *_EMBEDDINGS,
    ("bert/embeddings/word_embeddings_2", "<projection>", "param"),  # [E, H], folded into the word table
    *_layers("bert/encoder/layer_shared", _HF_LAYER.format(g=0, k=0), _BRIGHTMART_LAYER),
    *_layers("bert/encoder/layer_{g}", _HF_LAYER.format(g="{g}", k=0), _BRIGHTMART_LAYER),
    *_HEADS,
]

# Tensors dropped on purpose, with the reason shown in the report.
SKIP_RULES = [
    (r"(^|/)global_step$", "training step counter"),
    (r"/adam_[mv]$", "optimizer slot (AdamW/LAMB first/second moment)"),
    (r"AdamWeightDecayOptimizer", "optimizer slot (AdamWeightDecayOptimizer)"),
    (r"(^|/)LAMB(_\d+)?(/|$)", "optimizer slot (LAMB)"),
    (r"/(Adam|Adam_1|Momentum)$|(^|/)beta[12]_power$", "optimizer slot (tf.train optimizer)"),
    (r"/ExponentialMovingAverage$", "moving-average shadow copy"),
    (r"(^|/)(current_loss_scale|good_steps|loss_scale)$", "mixed-precision loss-scale state"),
    (r"^_CHECKPOINTABLE_OBJECT_GRAPH$", "TF2 object-graph metadata"),
]
# Tensors we recognise but Hugging Face ALBERT has no place for: unused, with this reason.
NO_HF_EQUIVALENT = [
    (r"^(start_logits|end_logits|answer_class)/",
     "official SQuAD v2 head (run_squad_v2: end logits conditioned on the start position, answer_class over "
     "[CLS] and start features); neither litebert's nor HF's QA model computes it, so --allow-unused converts "
     "the encoder only (then fine-tune a v2 head: litebert finetune squad2.0)"),
    (r"^bert/encoder/layer_shared/(attention|intermediate|output)_\d+/",
     "albert_zh partial sharing (shared_type attention/ffn, modeling_preln.py); HF shares whole layers only"),
    (r"/\.ATTRIBUTES/VARIABLE_VALUE$",
     "TF2 object-based (Keras) checkpoint name; only the official TF1 name layout is mapped"),
    (r"(^|/)layer_normalization(_\d+)?/",
     "Keras-style name from a TF2 re-implementation, not the official ALBERT layout"),
]  # fmt: skip


def _expand(table: list[tuple[str, str, str]]) -> list[tuple[str, str, bool]]:
    """Variable-level rules: (TF template, HF template, transpose)."""
    rows = []
    for tf, hf, kind in table:
        if kind == "dense":
            rows += [(f"{tf}/kernel", f"{hf}.weight", True), (f"{tf}/bias", f"{hf}.bias", False)]
        elif kind == "layer_norm":
            rows += [(f"{tf}/gamma", f"{hf}.weight", False), (f"{tf}/beta", f"{hf}.bias", False)]
        else:
            rows.append((tf, hf, False))
    return rows


def compile_template(template: str) -> re.Pattern:
    """'a/group_{g}/b' -> a regex capturing g (and k) as digits."""
    body = re.escape(template).replace(r"\{g\}", r"(?P<g>\d+)").replace(r"\{k\}", r"(?P<k>\d+)")
    return re.compile(f"^{body}$")


# layout -> [(TF name pattern, TF template, HF template, transpose)]: every variable-level rule, compiled.
RULES = {
    layout: [(compile_template(tf), tf, hf, t) for tf, hf, t in _expand(table)]
    for layout, table in (("official", OFFICIAL_TABLE), ("brightmart", BRIGHTMART_TABLE))
}


def map_tf_name(name: str, layout: str = "official") -> tuple[str, bool] | None:
    """HF parameter name for one TF variable (without `module/`), and whether the tensor is transposed."""
    for pattern, _, hf, transpose in RULES[layout]:
        m = pattern.match(name)
        if m:
            return hf.format(**m.groupdict()), transpose
    return None


# ----------------------------------------------------------------------------------------------------------------
# The report.


@dataclass
class ConversionReport:
    checkpoint: str
    source: str  # "tf" | "tfhub" | "albert_zh"
    layout: str  # "official" | "brightmart"
    config_file: str | None = None
    architecture: str = "AlbertModel"
    mapped: list[tuple[str, str, tuple[int, ...]]] = field(default_factory=list)  # (tf name, hf name, hf shape)
    synthesized: list[tuple[str, tuple[int, ...], str]] = field(default_factory=list)  # (hf name, shape, why)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (tf name, reason): dropped on purpose
    unused: list[tuple[str, str]] = field(default_factory=list)  # (tf name, reason): dropped by allow_unused
    notes: list[str] = field(default_factory=list)
    tokenizer_files: list[str] = field(default_factory=list)

    def format_report(self) -> str:
        lines = [
            f"TF checkpoint: {self.checkpoint}  (source {self.source}, {self.layout} layout)",
            f"config: {self.config_file or '(given as a dict)'}",
            f"architecture: {self.architecture}",
            f"mapped {len(self.mapped)} tensor(s):",
        ]
        width = max((len(tf) for tf, _, _ in self.mapped), default=0)
        lines += [f"  {tf:<{width}}  ->  {hf}  {list(shape)}" for tf, hf, shape in self.mapped]
        if self.synthesized:
            lines.append(f"synthesized {len(self.synthesized)}:")
            lines += [f"  {hf}  {list(shape)}: {why}" for hf, shape, why in self.synthesized]
        lines.append(f"skipped {len(self.skipped)} on purpose" + (":" if self.skipped else ""))
        lines += [f"  {tf}: {why}" for tf, why in self.skipped]
        lines.append(f"unused {len(self.unused)} (allow_unused)" + (":" if self.unused else ""))
        lines += [f"  {tf}: {why}" for tf, why in self.unused]
        if self.tokenizer_files:
            lines.append("tokenizer files: " + ", ".join(self.tokenizer_files))
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------------------
# Config.

_REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
# The labels come from the classifier's shape (_describe_heads), the special ids from the vocab (_special_ids).
_NOT_FROM_THE_CONFIG = ("id2label", "label2id")


def find_official_config(ckpt_dir: Path) -> Path:
    """The official-format config beside a checkpoint: albert_config*.json, bert_config*.json or assets/ (TF-Hub)."""
    for folder in (ckpt_dir, ckpt_dir / "assets", ckpt_dir.parent / "assets"):
        exact = folder / "albert_config.json"
        if exact.is_file():
            return exact
        found = sorted({*folder.glob("albert_config*.json"), *folder.glob("bert_config*.json")})
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            names = ", ".join(f.name for f in found)
            raise ConversionError(f"{folder}: several configs ({names}); pass one with config=PATH (--config)")
    raise ConversionError(
        f"{ckpt_dir}: no albert_config*.json beside the checkpoint; pass config=PATH (--config) in the official format"
    )


def _load_config(config: str | Path | dict | None, ckpt_dir: Path) -> tuple[dict, str | None]:
    if isinstance(config, dict):
        return dict(config), None
    path = Path(config) if config is not None else find_official_config(ckpt_dir)
    return read_json(path, ConversionError, "ALBERT config not found", expect=dict,
                     what="an ALBERT config (a JSON object)"), str(path)


def _special_ids(folder: Path) -> dict[str, int]:
    """pad/bos/eos ids from a WordPiece vocab.txt ([PAD]/[CLS]/[SEP]); the spm defaults (0/2/3) otherwise."""
    ids = {"pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 3}
    vocab = folder / "vocab.txt"
    if vocab.is_file():
        tokens = {t.strip(): i for i, t in enumerate(vocab.read_text(encoding="utf-8", errors="replace").splitlines())}
        for key, tok in (("pad_token_id", "[PAD]"), ("bos_token_id", "[CLS]"), ("eos_token_id", "[SEP]")):
            if tok in tokens:
                ids[key] = tokens[tok]
    return ids


def _hf_config(official: dict, cfg_name: str, shapes: dict[str, tuple[int, ...]], layout: str) -> tuple[dict, list]:
    """Official-format config -> HF AlbertConfig kwargs; missing sizes come from the embedding tables.

    The field mapping itself (names, the "gelu" spelling, defaults, validation) is `AlbertConfig.from_official_dict`,
    the one reading of albert_config.json; this adds what only a checkpoint can tell (table shapes, the layout).
    """
    missing = [f for f in _REQUIRED if f not in official]
    if missing:
        raise ConversionError(f"{cfg_name}: missing field(s) {', '.join(missing)} (needed to rebuild the model)")
    notes = []
    act = str(official.get("hidden_act", "gelu")).lower()
    if act == "gelu":
        notes.append('hidden_act "gelu" in the official code is the tanh approximation -> HF "gelu_new"')
    if str(official.get("ln_type", "postln")).lower() not in ("postln", "post_ln", "post"):
        raise ConversionError(
            f"{cfg_name}: ln_type {official['ln_type']!r}: a pre-LayerNorm transformer (albert_zh modeling_preln.py) "
            "cannot be expressed by ALBERT, whose layers are post-LayerNorm"
        )
    word = tuple(shapes.get("bert/embeddings/word_embeddings", (official.get("vocab_size", 0), 128)))
    if len(word) != 2:
        raise ConversionError(f"bert/embeddings/word_embeddings has shape {list(word)}; expected [vocab, E]")
    pos = shapes.get("bert/embeddings/position_embeddings", (512, 0))
    typ = shapes.get("bert/embeddings/token_type_embeddings", (2, 0))
    filled = {"vocab_size": word[0], "embedding_size": word[1], "max_position_embeddings": pos[0],
              "type_vocab_size": typ[0], **official, "hidden_act": act}
    if layout == "brightmart":
        filled["embedding_size"] = filled["hidden_size"]  # after folding word_embeddings_2 into the word table
        shared = any(n.startswith("bert/encoder/layer_shared/") for n in shapes)
        filled["num_hidden_groups"] = 1 if shared else filled["num_hidden_layers"]
        filled["inner_group_num"] = 1
    try:
        config = AlbertConfig.from_official_dict(filled, source=cfg_name)
    except ConfigError as exc:
        raise ConversionError(str(exc)) from None
    cfg = {k: v for k, v in config.to_hf_dict().items() if k not in _NOT_FROM_THE_CONFIG}
    _check_group_assignment(cfg, cfg_name, layout)
    return cfg, notes


def _check_group_assignment(cfg: dict, cfg_name: str, layout: str) -> None:
    """Official: layer i uses group int(i / L * G); HF: int(i / (L / G)). Equal except for float rounding."""
    n_layers, n_groups = cfg["num_hidden_layers"], cfg["num_hidden_groups"]
    if not 1 <= n_groups <= n_layers:
        raise ConversionError(f"{cfg_name}: num_hidden_groups {n_groups} must be in 1..{n_layers}")
    if layout == "brightmart":  # one `layer_{i}` scope per layer (or one shared): no formula involved
        return
    for i in range(n_layers):
        official, hf = int(i / n_layers * n_groups), int(i / (n_layers / n_groups))
        if official != hf:
            raise ConversionError(
                f"{cfg_name}: with num_hidden_layers={n_layers}, num_hidden_groups={n_groups}, the official code "
                f"runs layer {i} with group {official} but Hugging Face ALBERT would use group {hf}; no renaming "
                "can fix that"
            )


def expected_hf_shapes(cfg: dict, heads: set[str], num_labels: int = 2) -> dict[str, tuple[int, ...]]:
    """Every parameter (and its shape) of the HF ALBERT model with these heads ("mlm", "sop", "classifier", "qa")."""
    V, E, H = cfg["vocab_size"], cfg["embedding_size"], cfg["hidden_size"]
    I, P, T = cfg["intermediate_size"], cfg["max_position_embeddings"], cfg["type_vocab_size"]

    def linear(name: str, n_out: int, n_in: int) -> dict:
        return {f"{name}.weight": (n_out, n_in), f"{name}.bias": (n_out,)}

    def norm(name: str, n: int) -> dict:
        return {f"{name}.weight": (n,), f"{name}.bias": (n,)}

    s = {
        "albert.embeddings.word_embeddings.weight": (V, E),
        "albert.embeddings.position_embeddings.weight": (P, E),
        "albert.embeddings.token_type_embeddings.weight": (T, E),
        **norm("albert.embeddings.LayerNorm", E),
        **linear("albert.encoder.embedding_hidden_mapping_in", H, E),
        **linear("albert.pooler", H, H),
    }
    for g in range(cfg["num_hidden_groups"]):
        for k in range(cfg["inner_group_num"]):
            layer = _HF_LAYER.format(g=g, k=k)
            for proj in ("query", "key", "value", "dense"):
                s.update(linear(f"{layer}.attention.{proj}", H, H))
            s.update(norm(f"{layer}.attention.LayerNorm", H))
            s.update(linear(f"{layer}.ffn", I, H))
            s.update(linear(f"{layer}.ffn_output", H, I))
            s.update(norm(f"{layer}.full_layer_layer_norm", H))
    if "mlm" in heads:
        s.update(linear("predictions.dense", E, H))
        s.update(norm("predictions.LayerNorm", E))
        s["predictions.bias"] = (V,)
    if "sop" in heads:
        s.update(linear("sop_classifier.classifier", 2, H))
    if "classifier" in heads:
        s.update(linear("classifier", num_labels, H))
    if "qa" in heads:
        s.update(linear("qa_outputs", 2, H))
    return s


# ----------------------------------------------------------------------------------------------------------------
# Conversion.


def _detect(names: list[str], source: str) -> tuple[str, str, bool]:
    """(source, layout, strip `module/`) from the tensor names and the requested source."""
    # A TF-Hub module names everything `module/...`. Fine-tuning from one the official way (hub.Module inside
    # run_classifier / run_squad_v1 / run_race) adds the task head and global_step un-prefixed: then the encoder
    # is under module/ and no encoder or pretraining-head variable is outside it.
    outside_module = ("bert/", "cls/predictions/", "cls/seq_relationship/")
    hub = any(n.startswith("module/") for n in names) and not any(n.startswith(outside_module) for n in names)
    bare = [_strip(n, hub) for n in names]
    bright = sorted(
        n for n in bare if n == "bert/embeddings/word_embeddings_2" or re.match(r"bert/encoder/layer_(shared|\d+)/", n)
    )
    layout = "brightmart" if bright else "official"
    if source not in TF_SOURCES:
        raise ConversionError(f"source {source!r} is not one of {', '.join(TF_SOURCES)}")
    if source == "auto":
        source = "tfhub" if hub else ("albert_zh" if bright else "tf")
    if hub and source != "tfhub":
        raise ConversionError("the encoder's tensor names start with 'module/' (a TF-Hub module, or a model "
                              "fine-tuned from one); use source='tfhub'")
    if bright and source != "albert_zh":
        shown = ", ".join(bright[:3])
        raise ConversionError(
            f"tensors {shown} are brightmart/albert_zh's own layout, not the official one; use source='albert_zh'"
        )
    return source, layout, hub


def load_tf_albert(
    path: str | Path,
    source: str = "auto",
    allow_unused: bool = False,
    *,
    config: str | Path | dict | None = None,
    verify: bool = True,
) -> tuple[dict[str, Any], dict[str, torch.Tensor], ConversionReport]:
    """Convert a TF ALBERT checkpoint to (HF config kwargs, HF state dict, report).

    path: checkpoint prefix, its .index file, or a directory (TF-Hub module directories work too).
    source: "tf" (google-research/albert), "tfhub" (names prefixed `module/`), "albert_zh" (brightmart; both its
        "google" and its own layout), or "auto" (decided from the names).
    allow_unused: drop tensors no rule maps (listed in report.unused) instead of raising ConversionError.
    config: the official-format albert_config.json (path or dict); default: found beside the checkpoint.
    verify: check CRC-32C of every tensor read.
    Optimizer slots and global_step are never read: they are listed in report.skipped.
    """
    reader = CheckpointReader(path, verify=verify)
    source, layout, hub = _detect(list(reader.entries), source)
    report = ConversionReport(checkpoint=str(reader.prefix), source=source, layout=layout)
    targets = _sort_tensors(reader, layout, hub, allow_unused, report)

    ckpt_dir = reader.prefix.parent
    official, report.config_file = _load_config(config, ckpt_dir)
    cfg_name = report.config_file or "config dict"
    bare_shapes = {_strip(n, hub): reader.shape(n) for n in targets}
    cfg, report.notes = _hf_config(official, cfg_name, bare_shapes, layout)
    head_names = sorted(n for n in targets if hub and not n.startswith("module/"))
    if head_names:
        report.notes.append(f"fine-tuned from a TF-Hub module: encoder under module/, head {', '.join(head_names)}")
    hf_names = [hf for hf, _ in targets.values()]
    heads = heads_of(hf_names)
    num_labels = next((reader.shape(n)[0] for n, (hf, _) in targets.items() if hf == "classifier.weight"), 2)
    _describe_heads(cfg, hf_names, num_labels, report)
    cfg.update(_special_ids(ckpt_dir))

    arrays = {hf: (name, reader.get_tensor(name), t) for name, (hf, t) in targets.items()}
    arrays = {hf: (name, arr.T if t else arr, t) for hf, (name, arr, t) in arrays.items()}  # kernels -> [out, in]
    if layout == "brightmart":
        _fold_projection(arrays, cfg, report)
    expected = expected_hf_shapes(cfg, heads, num_labels)
    state = _checked_state(arrays, expected, cfg, cfg_name, report)
    _complete_state(state, expected, cfg, heads, report, reader.index_path)

    report.tokenizer_files = _tokenizer_files(ckpt_dir)
    if source == "albert_zh":
        report.notes.append("albert_zh models use the BERT Chinese WordPiece vocab (vocab.txt), not SentencePiece")
    return cfg, state, report


def _strip(name: str, hub: bool) -> str:
    return name[len("module/") :] if hub and name.startswith("module/") else name


def _sort_tensors(
    reader: CheckpointReader, layout: str, hub: bool, allow_unused: bool, report: ConversionReport
) -> dict[str, tuple[str, bool]]:
    """TF name (as stored) -> (HF name, transpose); skipped and unused tensors go to the report."""
    targets: dict[str, tuple[str, bool]] = {}
    for name, entry in reader.entries.items():
        bare = _strip(name, hub)
        skip = next((why for pat, why in SKIP_RULES if re.search(pat, bare)), None)
        if skip is None and entry.dtype_name in ("string", "resource", "variant"):
            skip = f"{entry.dtype_name} tensor, not a weight"
        if skip is not None:
            report.skipped.append((name, skip))
            continue
        hit = map_tf_name(bare, layout)
        if hit is None:
            why = next((w for pat, w in NO_HF_EQUIVALENT if re.search(pat, bare)), "no rule in the name table")
            report.unused.append((name, why))
        else:
            targets[name] = hit
    if report.unused and not allow_unused:
        shown = "\n  ".join(f"{n} {list(reader.shape(n))}: {w}" for n, w in report.unused[:25])
        more = f"\n  ... and {len(report.unused) - 25} more" if len(report.unused) > 25 else ""
        raise ConversionError(
            f"{reader.index_path}: {len(report.unused)} tensor(s) map to no Hugging Face ALBERT parameter:\n  "
            f"{shown}{more}\npass allow_unused=True (--allow-unused) to drop them"
        )
    seen: dict[str, str] = {}
    for name, (hf, _) in targets.items():
        if hf in seen:
            raise ConversionError(f"{reader.index_path}: {seen[hf]} and {name} both map to {hf}")
        seen[hf] = name
    return targets


def _describe_heads(cfg: dict, hf_names: list[str], num_labels: int, report: ConversionReport) -> None:
    heads = heads_of(hf_names)
    report.architecture = choose_model_class(hf_names)
    cfg["architectures"] = [report.architecture]
    if "classifier" in heads:
        cfg["num_labels"] = int(num_labels)
        report.notes.append(
            f"top-level output_weights [{num_labels}, H] -> classifier.*: a GLUE classifier (or, with one label, "
            "possibly the official run_race head: convert with head='multiple-choice' (--head))"
        )
    if report.architecture == "AlbertForQuestionAnswering":
        report.notes.append(
            "albert.pooler.* is kept, but HF AlbertForQuestionAnswering has no pooler: from_pretrained ignores it; "
            "drop it before load_state_dict(strict=True)"
        )
    if "mlm" in heads and "sop" not in heads:
        report.notes.append("no SOP head in the checkpoint (TF-Hub modules do not carry it)")


def _checked_state(
    arrays: dict[str, tuple[str, np.ndarray, bool]],
    expected: dict[str, tuple[int, ...]],
    cfg: dict,
    cfg_name: str,
    report: ConversionReport,
) -> dict[str, torch.Tensor]:
    """Compare every converted array with the shape the config implies; name both sides on a mismatch."""
    state: dict[str, torch.Tensor] = {}
    for hf, (name, arr, transposed) in arrays.items():
        want = expected.get(hf)
        if want is None:
            raise ConversionError(
                f"{name} {list(arr.shape)} -> {hf}: the config ({cfg_name}: num_hidden_groups="
                f"{cfg['num_hidden_groups']}, inner_group_num={cfg['inner_group_num']}) has no such parameter"
            )
        if tuple(arr.shape) != tuple(want):
            tf_shape, tf_want = (arr.T.shape, want[::-1]) if transposed else (arr.shape, want)
            raise ConversionError(
                f"shape mismatch: TF {name} {list(tf_shape)} -> HF {hf} {list(arr.shape)}; the config "
                f"({cfg_name}) expects HF {list(want)}, i.e. TF {list(tf_want)}"
            )
        if not np.issubdtype(arr.dtype, np.floating):
            raise ConversionError(f"{name}: dtype {arr.dtype} where a floating-point weight ({hf}) is expected")
        state[hf] = torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32))
        report.mapped.append((name, hf, tuple(arr.shape)))
    return state


def _complete_state(state: dict, expected: dict, cfg: dict, heads: set[str], report: ConversionReport, where) -> None:
    """Add the identity projection (E == H) and the tied decoder; fail on anything still missing."""
    mapping_in = "albert.encoder.embedding_hidden_mapping_in"
    if f"{mapping_in}.weight" not in state and cfg["embedding_size"] == cfg["hidden_size"]:
        h, dtype = cfg["hidden_size"], next(iter(state.values())).dtype
        why = "identity: the official graph has no projection when embedding_size == hidden_size; HF always has one"
        state[f"{mapping_in}.weight"] = torch.eye(h, dtype=dtype)
        state[f"{mapping_in}.bias"] = torch.zeros(h, dtype=dtype)
        report.synthesized += [(f"{mapping_in}.weight", (h, h), why), (f"{mapping_in}.bias", (h,), "zeros (see above)")]
    missing = [k for k in expected if k not in state]
    if missing:
        shown = ", ".join(missing[:10]) + (" ..." if len(missing) > 10 else "")
        raise ConversionError(f"{where}: the checkpoint lacks {len(missing)} parameter(s) the model needs: {shown}")
    if "mlm" in heads:  # transformers ties these; listing them lets load_state_dict(strict=True) pass
        for tied, source in (("predictions.decoder.weight", "albert.embeddings.word_embeddings.weight"),
                             ("predictions.decoder.bias", "predictions.bias")):  # fmt: skip
            state[tied] = state[source]
            report.synthesized.append((tied, tuple(state[source].shape), f"tied to {source}"))


def _fold_projection(arrays: dict, cfg: dict, report: ConversionReport) -> None:
    """brightmart: word table [V, E] @ word_embeddings_2 [E, H] -> one [V, H] table (exact; see the module doc)."""
    key = "albert.embeddings.word_embeddings.weight"
    if "<projection>" not in arrays or key not in arrays:
        raise ConversionError(
            "brightmart layout needs both bert/embeddings/word_embeddings and bert/embeddings/word_embeddings_2 "
            "to rebuild its factorized embeddings"
        )
    proj_name, w2, _ = arrays.pop("<projection>")
    word_name, word, _ = arrays[key]
    if w2.shape != (word.shape[1], cfg["hidden_size"]):
        raise ConversionError(
            f"shape mismatch: TF {proj_name} {list(w2.shape)} should be [{word.shape[1]}, {cfg['hidden_size']}] "
            f"(embedding width of {word_name} {list(word.shape)}, hidden_size) to project the word table"
        )
    folded = (word.astype(np.float64) @ w2.astype(np.float64)).astype(word.dtype)  # [V, H]
    arrays[key] = (f"{word_name} @ {proj_name}", folded, False)
    report.notes.append(
        f"albert_zh brightmart layout: {word_name} {list(word.shape)} @ {proj_name} {list(w2.shape)} folded into "
        f"one {list(folded.shape)} table, embedding_size = hidden_size = {cfg['hidden_size']}: exact, but the "
        "embedding no longer factorizes (V*H instead of V*E + E*H parameters). albert_zh's modeling_preln.py "
        "(pre-LayerNorm) saves the same names; such a checkpoint would convert but compute something else"
    )


def _tokenizer_files(folder: Path) -> list[str]:
    found = []
    for sub in (folder, folder / "assets", folder.parent / "assets"):
        found += [str(p) for p in sorted(sub.glob("*.model"))] + [str(p) for p in sorted(sub.glob("vocab*.txt"))]
    return found
