"""README.md model cards: what a model directory holds, how it was trained and how well it did, with the YAML front
matter Hugging Face model repositories carry (library_name, tags, pipeline_tag, language, license, model-index).

`write_model_card(dir, training)` is called wherever a model directory is saved: `save_pretrained` (a bare save
says its training was not recorded), a pretraining run's final/ and a fine-tuning run's best/ (with a `Training`
record of the run). The model itself is read back from the directory (config.json), so the card describes what
was written. A README.md the user wrote (without our marker line) is never overwritten.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from litebert.files import atomic_write
from litebert import heads
from litebert.records import model_name, read_model_config, saved_architecture

CARD_NAME = "README.md"
MARKER = "<!-- model card written by litebert; it is rewritten on each save unless this line is removed -->"
# Hugging Face pipeline_tag per our pipeline task (the Hub calls embeddings "feature-extraction").
HUB_PIPELINE_TAGS = {**{t: t for t in heads.PIPELINE_TASKS}, "embeddings": "feature-extraction"}


@dataclass
class Result:
    """Figures of one evaluation: a split ("held-out", "dev") of a dataset at a step, on `examples` examples."""
    split: str
    dataset: str
    step: int
    metrics: dict[str, float]
    examples: int | None = None


@dataclass
class Training:
    """How a run made the weights: its command ("pretrain", "finetune"), where it started (a preset: random
    init; a directory), its data, steps, tokens or examples, the settings that define it, its figures."""
    command: str
    start: str
    data: str
    steps: int
    recipe: dict[str, Any]
    results: list[Result] = field(default_factory=list)
    task: str | None = None
    tokens: int | None = None
    examples: int | None = None
    language: str | None = None
    license: str | None = None
    warnings: list[str] = field(default_factory=list)  # e.g. the collapse to one class


def write_model_card(path: str | Path, training: Training | None = None, location: str | Path | None = None, *,
                     parameters: int) -> Path | None:
    """Write path/README.md for the model directory `path`; None when a README.md of the user's is there.
    `location`: where the directory will live, when it is written under a temporary name and moved there.
    `parameters`: the model's encoder + pooler count (model.encoder_parameters(): the caller holds the model, so
    this module, imported by the save code, needs no model code)."""
    card = Path(path) / CARD_NAME
    if card.is_file() and MARKER not in card.read_text(encoding="utf-8", errors="replace"):
        return None
    text = card_text(path, parameters, training, location)
    atomic_write(card, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return card


def card_text(path: str | Path, parameters: int, training: Training | None = None,
              location: str | Path | None = None) -> str:
    from litebert import __version__

    config, fmt = read_model_config(path)
    architecture = saved_architecture(path)
    task = heads.for_saved(architecture, config.problem_type, config.num_labels).pipeline_task
    tokenizer = has_tokenizer(Path(path))
    path = Path(location or path)  # what the card names and loads from
    name = model_name(path)  # runs/sst2/best -> "sst2-best"
    front: dict[str, Any] = {"library_name": "litebert", "tags": ["albert", "litebert", HUB_PIPELINE_TAGS[task]],
                             "pipeline_tag": HUB_PIPELINE_TAGS[task]}
    if fmt == "hf":
        front["tags"].append("transformers")
    if training and training.language:
        front["language"] = training.language
    if training and training.license:
        front["license"] = training.license
    results = [r for r in (training.results if training else []) if _finite(r.metrics)]
    if results:
        front["model-index"] = [{"name": name, "results": [
            {"task": {"type": HUB_PIPELINE_TAGS[task]},
             "dataset": {"name": r.dataset, "type": r.dataset, "split": r.split},
             "metrics": [{"type": k, "value": v, "name": f"{r.split} {k}"} for k, v in _finite(r.metrics).items()]}
            for r in results]}]

    shape = (f"E={config.embedding_size}, H={config.hidden_size}, {config.num_hidden_layers} layers, "
             f"{config.num_attention_heads} heads, FFN {config.intermediate_size}, cross-layer sharing "
             f"\"{config.sharing}\" ({config.num_hidden_groups} group(s)), vocabulary {config.vocab_size:,}"
             + (", pre-LayerNorm (not ALBERT's post-LayerNorm)" if config.layer_norm_position == "pre" else "")
             + (f", a distance bias on the attention scores, slopes {config.distance_bias} (not ALBERT's)"
                if config.distance_bias is not None else ""))
    lines = ["---", *_yaml(front), "---", MARKER, "", f"# {name}", "",
             f"An ALBERT model ({architecture}: {shape}; {parameters:,} encoder and pooler "
             f"parameters), saved by litebert {__version__} in "
             + ("Hugging Face format." if fmt == "hf"
                else "litebert's own format (it has no Hugging Face equivalent)."),
             "", "## Training", ""]
    lines += _training_lines(training)
    if results:
        lines += ["", "## Results", "", "| dataset | split | examples | step | metric | value |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {r.dataset} | {r.split} | {r.examples if r.examples is not None else ''} | {r.step} | {k} | "
                  f"{v:.4g} |" for r in results for k, v in _finite(r.metrics).items()]
    if training and training.warnings:
        lines += ["", "## Warnings", "", *(f"- {w}" for w in training.warnings)]
    lines += ["", "## Intended use", "", _intended_use(task, training), "", "## How to load it", "", "```python",
              "import litebert", "", f"model = litebert.{architecture}.from_pretrained(\"{path}\")"]
    lines += [f"tokenizer = litebert.load_tokenizer(\"{path}\")",
              f"pipe = litebert.pipeline(\"{task}\", \"{path}\")"] if tokenizer else []
    lines += ["```", ""]
    if not tokenizer:
        lines += ["No tokenizer was saved with it (`save_pretrained(DIR, tokenizer=...)` adds one).", ""]
    if fmt == "hf":
        lines += ["In transformers:", "", "```python", f"from transformers import AutoTokenizer, {architecture}", "",
                  f"model = {architecture}.from_pretrained(\"{path}\")"]
        lines += [f"tokenizer = AutoTokenizer.from_pretrained(\"{path}\")"] if tokenizer else []
        lines += ["```", ""]
    else:
        why = config.hf_blocker or "the answerability head (qa_answerability)"
        lines += [f"transformers cannot load this directory: its configuration ({why}) has no Hugging Face "
                  "equivalent.", ""]
    return "\n".join(lines)


def has_tokenizer(path: Path) -> bool:
    from litebert.tokenizer import AlbertTokenizer, WordPieceTokenizer
    from litebert.tokenizer_json import TOKENIZER_JSON

    names = (AlbertTokenizer.vocab_file_name, WordPieceTokenizer.vocab_file_name, TOKENIZER_JSON)
    return any((path / name).is_file() for name in names)


def _training_lines(training: Training | None) -> list[str]:
    if training is None:
        return ["Not recorded: this directory was written by `save_pretrained` outside a litebert run."]
    if training.command == "pretrain":
        what = (f"Pretrained with `litebert pretrain` from {training.start} on the token store `{training.data}`: "
                f"{training.steps:,} steps" + (f", {training.tokens:,} training tokens" if training.tokens else "")
                + ".")
    else:
        what = (f"Fine-tuned with `litebert finetune` on {training.task} (`{training.data}`) from `{training.start}`"
                + (f", {training.examples:,} training examples" if training.examples else "")
                + f"; these weights are from step {training.steps:,}.")
    recipe = ", ".join(f"{k} {v}" for k, v in training.recipe.items() if v is not None)
    return [what, "", f"Recipe: {recipe}." if recipe else ""]


def _intended_use(task: str, training: Training | None) -> str:
    if training is not None and training.command == "finetune":
        return (f"{task} on {training.task}-like inputs, and as a starting point for further fine-tuning. Its "
                "figures hold for the data above; check it on yours before relying on it.")
    return ("A starting point for fine-tuning (`litebert finetune --model DIR`), fill-mask and embeddings; it is "
            "not a task model by itself. It knows only what its training text held.")


def _finite(metrics: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in metrics.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


def _yaml(value: Any, indent: str = "") -> list[str]:
    """A YAML block for dicts, lists and scalars (strings JSON-quoted: valid YAML; floats always with a dot or
    exponent that YAML 1.1 readers take as floats)."""
    lines: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, (dict, list)) and v:
                lines.append(f"{indent}{k}:")
                lines += _yaml(v, indent + "  ")
            else:
                lines.append(f"{indent}{k}: {_scalar(v)}")
    else:
        for item in value:
            block = _yaml(item, indent + "  ") if isinstance(item, (dict, list)) else [f"{indent}  {_scalar(item)}"]
            lines.append(f"{indent}- {block[0].strip()}")
            lines += block[1:]
    return lines


def _scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        text = repr(v)
        mantissa, _, exponent = text.partition("e")
        if "." not in mantissa:  # 1e-05 -> 1.0e-05: PyYAML reads "1e-05" as a string
            text = mantissa + ".0" + (("e" + exponent) if exponent else "")
        return text
    if v is None:
        return "null"
    if isinstance(v, (list, dict)):  # empty ones only: _yaml writes the others as blocks
        return json.dumps(v)
    return json.dumps(str(v), ensure_ascii=False)
