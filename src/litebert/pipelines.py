"""Inference from strings: `litebert.pipeline(task, model_dir)` -> a callable that returns plain Python.

    clf = litebert.pipeline("text-classification", "runs/sst2")      # the task may be left out: None
    clf("a gripping, funny film")            -> {"label": "1", "score": 0.93, "scores": {"0": 0.07, "1": 0.93}}
    clf(["one text", ("a", "pair")])         -> [ {...}, {...} ]

Tasks and their inputs (one item, or a list of items -> a list of results):
- text-classification: str, (text, pair) tuple, or {"text", "text_pair"}; single-label, regression or
  multi-label as the directory's head says.
- token-classification: str; words are \\w+ runs and single punctuation marks (CoNLL-style), entities come
  back with character offsets into the input.
- question-answering: {"question", "context"}; long contexts go through the fine-tuning code's doc-stride
  windows; SQuAD v2 heads may answer "" (no answer).
- multiple-choice: {"context", "question", "options": [...]}.
- fill-mask: str with one or more "[MASK]".
- embeddings: str; pooling "mean" (over real tokens) or "cls", optional L2 normalisation;
  `emb.similarity(a, b)`: their cosine similarity.

What the model is (task, head, labels, max length, doc stride) comes from the directory's records
(`litebert.records`). The pipeline is the head family's class (litebert.families, named by litebert.heads), the
one prediction path that CLI predict/evaluate, `serve` and fine-tuning's dev evaluation run too: features come
from the fine-tuning code (data/tasks.py, squad.py, ner.py, race.py), so inference tokenizes exactly as training
did, and each family's results have one schema (docs/architecture.md). Lists are run in batches of similar length
(little padding).

backend: "fp32" or "bf16" (PyTorch, weights cast to bfloat16) or "onnx" (onnxruntime; a directory written by
`export-onnx`, or `onnx_file=` beside a model directory). The ONNX backend does not import torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from litebert import heads
from litebert.errors import ConfigError, LitebertError
from litebert.records import ModelRecord, read_record
from litebert.runners import OnnxRunner, TorchRunner

if TYPE_CHECKING:
    from litebert.families.base import Family

TASKS = heads.PIPELINE_TASKS
BACKENDS = ("auto", "fp32", "bf16", "onnx")  # auto: device.py's probe, as training uses (bf16 where faster)
TRUNCATIONS = ("longest_first", "error")  # error: refuse an input longer than the model's max_seq_length
ONNX_FILE = "model.onnx"


def pipeline(task: str | None, model: str | Path, backend: str = "auto", *, batch_size: int = 32,
             onnx_file: str | Path | None = None, threads: int | None = None,
             truncation: str = "longest_first", device: str | None = None) -> Family:
    """A ready pipeline for `model` (a model directory, a fine-tuning run directory, or an `export-onnx`
    directory). task None: the directory's own task. backend "auto": the precision the start-up probe picks
    (`pipe.precision` says which answered). truncation "error": an input over the model's max_seq_length is
    refused instead of cut (results always say how many tokens were cut: `truncated_tokens`). device: where the
    PyTorch backends run ("cpu", "cuda", "cuda:N"; default cpu); inputs go there and results come back to the
    host, so the results' form does not depend on it."""
    if backend not in BACKENDS:
        raise ConfigError(f"backend {backend!r} is not one of {', '.join(BACKENDS)}")
    if truncation not in TRUNCATIONS:
        raise ConfigError(f"truncation {truncation!r} is not one of {', '.join(TRUNCATIONS)}")
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
    weights_dir, record = read_record(model)
    task = task or record.task
    family = heads.for_pipeline(task)
    if task != "embeddings" and task != record.task:
        trained = f" fine-tuned for {record.finetune_task}" if record.finetune_task else ""
        raise ConfigError(f"{model} is a {record.head} model ({record.architecture}){trained}: it serves "
                          f"{record.task!r} (and 'embeddings'), not {task!r}, which needs a trained "
                          f"{family.model_class}")
    from litebert.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(weights_dir)
    if backend == "onnx":
        if device not in (None, "cpu"):
            raise ConfigError(f"device {device!r}: the onnx backend runs on the CPU (onnxruntime's CPU provider)")
        runner = OnnxRunner(_onnx_path(weights_dir, onnx_file, task, record), threads)
    else:
        backend = inference_precision(backend, device)
        runner = TorchRunner.load(weights_dir, task, backend, threads, device)
    if runner.vocab_size is not None and runner.vocab_size != tokenizer.vocab_size:
        raise LitebertError(f"{weights_dir}: the model's vocab_size {runner.vocab_size} does not match its "
                            f"tokenizer's {tokenizer.vocab_size}")
    pipe = family.family_class()(record, tokenizer, runner, batch_size)
    pipe.precision, pipe.truncation, pipe.source = backend, truncation, str(model)
    return pipe


def inference_precision(precision: str, device: str | None = None) -> str:
    """The precision an inference door runs at: "auto" is device.py's rule, the one training uses (on a CPU the
    start-up probe: bf16 where this host runs it faster, else fp32; on a GPU bf16 where it has bf16, else fp32,
    since fp16 weights without a loss scale can overflow)."""
    if precision != "auto":
        return precision
    import torch

    from litebert.device import resolve_precision

    resolved = resolve_precision("auto", torch.device(device or "cpu"))
    return resolved if resolved in ("fp32", "bf16") else "fp32"


def _onnx_path(weights_dir: Path, onnx_file, task: str, record: ModelRecord) -> Path:
    path = Path(onnx_file) if onnx_file else weights_dir / (record.onnx_file or ONNX_FILE)
    if not path.is_file():
        raise ConfigError(f"{path}: no ONNX file; export one with `litebert export-onnx {weights_dir} "
                          f"--task {heads.for_pipeline(task).export_task} --out DIR` or pass onnx_file=")
    if task == "embeddings" and record.task != "embeddings" and not onnx_file:
        raise ConfigError(f"{path} is the {record.task} graph; embeddings need the 'base' export (onnx_file=)")
    return path
