"""Model directories: `config.json` + `model.safetensors` (+ tokenizer files), in one of two formats.

- "hf": Hugging Face names and config, so stock `transformers` loads the directory (tied weights stored once).
- "litebert": our own names and config, for what HF cannot express (attention-only or FFN-only sharing, the
  SQuAD v2 answerability head).

Loading a task model from a directory written for another head (say a classifier from a pretraining checkpoint)
keeps the encoder, initialises the new head and reports both lists in `model.load_report`; an encoder tensor
that is missing or has the wrong shape is an error naming the file and the tensor.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from collections.abc import Callable

import torch
from safetensors.torch import load, load_file, save_file

from litebert.config import AlbertConfig
from litebert.convert.hf_map import hf_to_ours, needs_projection, ours_to_hf
from litebert.errors import CheckpointError, LitebertError
from litebert.files import atomic_write
from litebert.hub_cache import resolve_model_path
from litebert.records import (CONFIG_NAME, IDENTITY_RECORD, read_json_object, read_model_config,  # noqa: F401
                              saved_architecture)

WEIGHTS_NAME = "model.safetensors"
HEAD_PREFIXES = ("mlm.", "sop.", "classifier.", "qa_outputs.", "answer_class.")


def load_tensors(file: str | Path, data: bytes | None = None) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file; `data`: its bytes, already read (and checked) by the caller."""
    if data is None and not Path(file).is_file():
        raise CheckpointError(f"{file}: weights file not found")
    try:
        return load_file(str(file)) if data is None else load(data)
    except Exception as exc:  # safetensors raises its own error types for truncated or corrupt headers
        raise CheckpointError(f"{file}: cannot read safetensors ({exc}); the file is truncated or corrupt") from None


def _write_safetensors(tensors: dict[str, torch.Tensor], file: Path) -> None:
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(file), metadata={"format": "pt"})


def model_files(model, format: str = "auto") -> dict[str, Callable[[Path], None]]:
    """The files of a model directory, each as a function that writes it at a given path.

    `save_pretrained` runs them into a directory; a training checkpoint runs them inside its atomic save.
    """
    config: AlbertConfig = model.config
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    hf_ok = config.hf_compatible and not any(k.startswith("answer_class.") for k in state)
    if format == "auto":
        format = "hf" if hf_ok else "litebert"
    if format == "hf":
        if not hf_ok:
            why = config.hf_blocker or "the answerability head (config field qa_answerability)"
            raise LitebertError(f"cannot save in Hugging Face format: {why} has no HF equivalent; use "
                                "format='litebert' (or 'auto')")
        tensors = ours_to_hf(state, config)
        if ("sop.weight" in state or "qa_outputs.weight" in state) and config.num_labels != 2:
            # HF sizes its SOP and span heads by num_labels; both are 2-way here.
            config = config.replace(num_labels=2, label_names=None)
        config_dict = config.to_hf_dict(architecture=type(model).__name__)
    elif format == "litebert":
        tensors = state
        config_dict = {"format": "litebert", "architecture": type(model).__name__, **config.to_dict()}
    else:
        raise LitebertError(f"unknown model format {format!r}; use 'auto', 'hf' or 'litebert'")
    config_text = json.dumps(config_dict, indent=2) + "\n"
    files = {
        WEIGHTS_NAME: lambda path: _write_safetensors(tensors, path),
        CONFIG_NAME: lambda path: path.write_text(config_text, encoding="utf-8"),
    }
    identity = getattr(model, "identity", None)  # a fine-tuned model's task facts (litebert.records)
    if identity:
        identity_text = json.dumps(identity, indent=2) + "\n"
        files[IDENTITY_RECORD] = lambda path: path.write_text(identity_text, encoding="utf-8")
    return files


def save_pretrained(model, path: str | Path, format: str = "auto", tokenizer=None) -> None:
    """Write a model directory; each file lands atomically (temp file, fsync, rename). Its README.md model card
    describes the model; a training run rewrites it with how the weights were made (litebert.model_card)."""
    from litebert.model_card import write_model_card

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    for name, write in model_files(model, format).items():
        atomic_write(path / name, write)
    if tokenizer is not None:
        tokenizer.save_pretrained(path)
    write_model_card(path, parameters=model.encoder_parameters())


def read_model_state(path: str | Path, weights: bytes | None = None
                     ) -> tuple[AlbertConfig, str, dict[str, torch.Tensor], list[str]]:
    """(config, format, state dict in our names, ignored HF tensors) of a model directory; `weights`: the bytes of
    its weights file when the caller has read them already."""
    path = Path(path)
    config, fmt = read_model_config(path)
    weights_file = path / WEIGHTS_NAME
    tensors = load_tensors(weights_file, weights)
    not_float = [f"{name} ({t.dtype})" for name, t in tensors.items() if not t.is_floating_point()]
    if not_float:
        raise CheckpointError(f"{weights_file}: weights must be floating point; got {', '.join(not_float[:5])}"
                              + (f" and {len(not_float) - 5} more" if len(not_float) > 5 else ""))
    if fmt == "litebert":
        return config, fmt, tensors, []
    try:
        if config.embedding_size == config.hidden_size and config.embedding_projection is None:
            config = config.replace(embedding_projection=needs_projection(tensors, config))
        state, ignored = hf_to_ours(tensors, config, source=str(weights_file))
    except (RuntimeError, ValueError, IndexError) as exc:  # e.g. fused q/k/v parts of different shapes
        raise CheckpointError(f"{weights_file}: tensors do not fit {CONFIG_NAME} ({exc})") from None
    return config, fmt, state, ignored


def load_pretrained(cls, path: str | Path, **config_overrides: Any):
    path = resolve_model_path(path)  # a Hub id ("albert/albert-base-v2") reads the local Hub cache
    if not path.is_dir():
        raise CheckpointError(f"{path}: model directory not found")
    config, fmt, state, ignored = read_model_state(path)
    changed_head = any(k in config_overrides for k in ("num_labels", "label_names", "problem_type",
                                                       "qa_answerability"))
    config = config.replace(**config_overrides) if config_overrides else config
    model = cls(config)
    model.load_report = load_checked(model, state, path / WEIGHTS_NAME, changed_head=changed_head)
    model.load_report.update(format=fmt, ignored=ignored)
    # The identity travels with the weights it describes: not to another class or a re-labelled head.
    same_head = not changed_head and saved_architecture(path) == cls.__name__
    if same_head and (path / IDENTITY_RECORD).is_file():
        model.identity = read_json_object(path / IDENTITY_RECORD)
    return model


def load_checked(model, state: dict[str, torch.Tensor], weights_file: Path, changed_head: bool = False
                 ) -> dict[str, list[str]]:
    """Load `state` (our names, with or without the `albert.` prefix) into `model`, the encoder in full: a
    missing or misshapen encoder tensor is an error naming `weights_file`; another class's head is left out
    ("unused") and a head the state lacks keeps the model's initial values ("initialised"), both reported.
    `changed_head`: the model's task head has a new shape (a new label set) and starts afresh too."""
    state = _match_prefix(state, model)
    expected = model.state_dict()
    report: dict[str, list[str]] = {"initialised": [], "unused": []}
    for name, tensor in list(state.items()):
        if name not in expected:
            if name.startswith(HEAD_PREFIXES) or name.startswith("albert.pooler."):
                report["unused"].append(name)  # another class's head (or pooler): not an error
                del state[name]
                continue
            raise CheckpointError(f"{weights_file}: unexpected tensor {name!r} for {type(model).__name__}")
        if tuple(tensor.shape) != tuple(expected[name].shape):
            if name.startswith(HEAD_PREFIXES) and changed_head:
                report["initialised"].append(name)  # a new label set: start that head afresh
                del state[name]
                continue
            raise CheckpointError(f"{weights_file}: tensor {name!r} has shape {tuple(tensor.shape)}, the model "
                                  f"expects {tuple(expected[name].shape)}")
    for name in expected:
        if name not in state:
            if name.startswith(HEAD_PREFIXES) or name.startswith(("albert.pooler.", "pooler.")):
                if name not in report["initialised"]:
                    report["initialised"].append(name)
            else:
                raise CheckpointError(f"{weights_file}: tensor {name!r} is missing")
    model.load_state_dict(state, strict=False)
    return report


def _match_prefix(state: dict[str, torch.Tensor], model) -> dict[str, torch.Tensor]:
    """A bare AlbertModel has no `albert.` prefix; a task model does. Accept either on disk."""
    wants_prefix = hasattr(model, "albert")
    has_prefix = any(k.startswith("albert.") for k in state)
    if wants_prefix and not has_prefix:
        return {("albert." + k if not k.startswith(HEAD_PREFIXES) else k): v for k, v in state.items()}
    if not wants_prefix and has_prefix:
        return {k[len("albert."):]: v for k, v in state.items() if k.startswith("albert.")} | {
            k: v for k, v in state.items() if not k.startswith("albert.")}
    return state
