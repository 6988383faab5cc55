"""ONNX export of a model directory, checked against PyTorch in onnxruntime.

The graph takes `input_ids`, `attention_mask`, `token_type_ids` (int64, [batch, sequence], or
[batch, choice, sequence] for multiple choice) and returns the task's outputs under transformers' names
(`logits`, `start_logits`, `end_logits`, `last_hidden_state`, ...).
Batch, sequence (and choice) are dynamic axes.

Exporters: "torchscript" (default) is torch's TorchScript-based exporter (`dynamo=False`): it needs no extra
package, exports a tiny model in about a second, and its SDPA symbolic (opset >= 14) turns our boolean
[B, 1, 1, L] mask into an additive one. "dynamo" is the torch.export-based exporter (torch's own default since
2.9); it needs the `onnxscript` package and is much slower to export. Both produce the same graph semantics.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn
from torch.export import Dim

from litebert import heads
from litebert.errors import ConversionError, TokenizerError
from litebert.files import check_output, disk_error, fsync_dir, fsync_file, move_into_place, reason
from litebert.model import MODEL_CLASSES
from litebert.records import CONFIG_NAME, INFERENCE_RECORD, read_record
from litebert.rundir import resolve_model_dir
from litebert.tokenizer import load_tokenizer

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
EXPORTERS = ("torchscript", "dynamo")
MIN_OPSET = 14  # the first opset with a scaled_dot_product_attention symbolic in torch's exporter


# Export tasks and their graphs' outputs are the head families' (litebert.heads): output names follow
# transformers' model outputs (logits, start_logits, last_hidden_state, ...), so code written against an exported
# transformers ALBERT reads ours unchanged.
TASKS: dict[str, heads.HeadFamily] = {t: heads.for_export(t) for t in heads.EXPORT_TASKS}


@dataclass
class ExportResult:
    path: Path
    task: str
    model_class: str
    opset: int
    exporter: str
    inputs: dict[str, tuple[str, ...]]
    outputs: dict[str, tuple[str | None, ...]]
    max_abs_diff: float | None = None  # onnxruntime vs PyTorch on a fresh input; None without onnxruntime
    checked_shape: tuple[int, ...] | None = None
    notes: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)  # the graph, then what was written beside it
    quantized: bool = False

    def format(self) -> str:
        dims = lambda axes: "[" + ", ".join(a or "_" for a in axes) + "]"  # noqa: E731
        lines = [f"{self.path}: {self.model_class} ({self.task}), opset {self.opset}, {self.exporter} exporter"]
        lines += [f"  input  {n} int64 {dims(a)}" for n, a in self.inputs.items()]
        lines += [f"  output {n} float {dims(a)}" for n, a in self.outputs.items()]
        if self.max_abs_diff is not None:
            lines.append(f"  onnxruntime vs PyTorch at shape {list(self.checked_shape)}: max |diff| "
                         f"{self.max_abs_diff:.2e}")
        lines += [f"  note: {n}" for n in self.notes]
        lines += [f"  wrote {f}" for f in self.files[1:]]
        return "\n".join(lines)


class OnnxWrapper(nn.Module):
    """The model itself, called with positional int64 inputs and returning its task outputs as a tuple.

    The exporters trace tensors, not dataclasses; this adds no computation of its own.
    """

    def __init__(self, model: nn.Module, attrs: tuple[str, ...]):
        super().__init__()
        self.model = model
        self.attrs = attrs  # AlbertOutput fields, in output order

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.model(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        return tuple(getattr(out, name) for name in self.attrs)


def example_inputs(config, batch: int, seq_len: int, choices: int | None = None,
                   generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
    """Random ids and segments with right padding of varying length ([B, L] or [B, C, L], int64)."""
    shape = (batch, seq_len) if choices is None else (batch, choices, seq_len)
    ids = torch.randint(0, config.vocab_size, shape, generator=generator)
    lengths = torch.randint(max(1, seq_len // 2), seq_len + 1, shape[:-1], generator=generator)
    lengths.view(-1)[0] = seq_len  # one full row, and (for batch > 1) usually some padded ones
    positions = torch.arange(seq_len)
    mask = (positions < lengths.unsqueeze(-1)).long()
    segment_start = (lengths // 2).unsqueeze(-1)
    token_types = ((positions >= segment_start) & mask.bool()).long() % config.type_vocab_size
    return {"input_ids": ids * mask, "attention_mask": mask, "token_type_ids": token_types}


def load_for_task(model_dir: str | Path, task: str):
    """The task's litebert class from `model_dir`; a head that would be freshly initialised is an error."""
    if task not in TASKS:
        raise ConversionError(f"task {task!r} is not one of {', '.join(TASKS)} (--task)")
    spec = TASKS[task]
    model = MODEL_CLASSES[spec.model_class].from_pretrained(model_dir).eval()
    fresh = model.load_report.get("initialised", [])
    if fresh:
        raise ConversionError(f"{model_dir}: has no trained weights for {', '.join(fresh)}, which "
                              f"{spec.model_class} needs; export a directory fine-tuned for '{task}' or pick the "
                              "--task its heads belong to")
    return model


def export_onnx(model_dir: str | Path, out: str | Path, task: str | None = None, opset: int = 17, *,
                exporter: str = "torchscript", verify: bool = True, atol: float = 1e-4,
                quantize: str | None = None, graph_only: bool = False) -> ExportResult:
    """Export `model_dir` (a model or fine-tuning run directory) for `task` (default: the directory's own) into
    `out`: a directory that gets model.onnx, or an .onnx file name; beside the graph go config.json, the
    tokenizer files and inference.json (the task record `litebert.pipeline` and `serve` read), so the folder is
    a deployable unit. When onnxruntime is installed and `verify`, the graph runs at a shape other than the
    traced one and must match PyTorch within atol. quantize="int8": onnxruntime's dynamic quantization (int8
    weights, activations quantized per call) of the verified graph; its difference from PyTorch is reported.

    A directory without a tokenizer is refused (its export could not take text, and `serve` could not load it)
    unless `graph_only`: then the folder gets the graph and config.json only, no inference.json, so nothing mistakes
    it for a servable export. The export is written whole into a temporary sibling and swapped in: a failure (a
    full disk) leaves the previous export as it was, and the error names the file."""
    if exporter not in EXPORTERS:
        raise ConversionError(f"exporter {exporter!r} is not one of {', '.join(EXPORTERS)}")
    if opset < MIN_OPSET:
        raise ConversionError(f"opset {opset}: attention (scaled_dot_product_attention) needs opset >= {MIN_OPSET}")
    if quantize not in (None, "int8"):
        raise ConversionError(f"quantize {quantize!r}: only 'int8' (dynamic quantization) is supported")
    check_output(out, kind="file" if Path(out).suffix == ".onnx" else "dir")  # see _destination
    model_dir = resolve_model_dir(model_dir)
    record = _record(model_dir)
    task = task or _pipeline_export_task(record.task)
    model = load_for_task(model_dir, task)
    tokenizer = None if graph_only else _tokenizer_of(model_dir)
    spec = TASKS[task]
    out_dir, final_graph = _destination(Path(out), model_dir)
    folder = Path(out).suffix != ".onnx"  # the whole folder is ours to replace; else only the files we write
    staging = out_dir.parent / f".{out_dir.name}.export-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)  # a leftover of a crashed export by a process with our pid
    staging.mkdir()
    graph = staging / final_graph.name
    try:
        result = _export_into(model, model_dir, staging, graph, task, spec, record, tokenizer, exporter, opset,
                              verify, atol, quantize)
        _swap_in(staging, out_dir, folder)
    except Exception as exc:
        shutil.rmtree(staging, ignore_errors=True)
        err = disk_error(exc)
        if err is None:
            raise
        kept = "the previous export there is unchanged" if final_graph.exists() else "nothing was written"
        raise ConversionError(f"{final_graph}: cannot write the export ({reason(err)}: {err.strerror or err}); "
                              f"{kept}") from None
    result.path = final_graph
    result.files = [out_dir / f.name for f in result.files]
    return result


def _tokenizer_of(model_dir: Path):
    try:
        return load_tokenizer(model_dir)
    except TokenizerError as exc:
        raise ConversionError(f"{model_dir} has no tokenizer ({exc}): its export could not take text and `serve` "
                              "could not load it; save the tokenizer into the directory "
                              "(model.save_pretrained(dir, tokenizer=tok)), or export the graph alone with "
                              "--graph-only") from None


def _export_into(model, model_dir: Path, out_dir: Path, graph: Path, task: str, spec: heads.HeadFamily, record,
                 tokenizer, exporter: str, opset: int, verify: bool, atol: float, quantize: str | None
                 ) -> ExportResult:
    """The export, written into `out_dir` (the staging folder)."""
    outputs = dict(spec.outputs)
    attrs = dict(spec.attrs)
    if task == "qa" and model.config.qa_answerability:
        outputs["has_answer_logits"] = ("batch",)  # the SQuAD v2 has-answer head (no transformers equivalent)
        attrs["has_answer_logits"] = "logits"
    in_axes = ("batch", "choice", "sequence") if spec.choice_axis else ("batch", "sequence")
    graph_fp32 = graph.with_name(f".{graph.stem}.fp32.onnx") if quantize else graph
    # The exporter restores the module's mode afterwards: keep it eval.
    wrapper = OnnxWrapper(model, tuple(attrs.get(n, n) for n in outputs)).eval()
    gen = torch.Generator().manual_seed(0)
    seq = min(8, model.config.max_position_embeddings)
    trace = example_inputs(model.config, 2, seq, 2 if spec.choice_axis else None, gen)
    args = tuple(trace[n] for n in INPUT_NAMES)
    try:
        if exporter == "torchscript":
            _export_torchscript(wrapper, args, graph_fp32, in_axes, outputs, opset)
        else:
            _export_dynamo(wrapper, args, graph_fp32, in_axes, outputs, opset, model.config.max_position_embeddings)
    except (RuntimeError, ValueError, TypeError, torch.onnx.errors.OnnxExporterError) as exc:
        if disk_error(exc) is not None:
            raise
        raise ConversionError(f"{model_dir}: ONNX export ({exporter}, opset {opset}) failed: {exc}") from None
    result = ExportResult(graph, task, spec.model_class, opset, exporter, {n: in_axes for n in INPUT_NAMES}, outputs)
    if verify:
        _verify(wrapper, graph_fp32, spec, result, atol, gen)
    if quantize:
        _quantize_int8(graph_fp32, graph, wrapper, spec, result, gen)
        graph_fp32.unlink(missing_ok=True)
    result.files = [graph, *_write_beside(model_dir, out_dir, graph, task, record, tokenizer, result.notes)]
    for path in out_dir.iterdir():
        fsync_file(path)
    fsync_dir(out_dir)
    return result


def _swap_in(staging: Path, out_dir: Path, folder: bool) -> None:
    """Put the finished export in place: the whole folder by two renames (the old one aside, then removed), or,
    for an .onnx file name in a folder of other things, each file by its own atomic rename."""
    if folder:
        aside = move_into_place(staging, out_dir)
        fsync_dir(out_dir.parent)
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)
        return
    for path in sorted(staging.iterdir()):
        os.replace(path, out_dir / path.name)
    fsync_dir(out_dir)
    staging.rmdir()


def _record(model_dir: Path):
    return read_record(model_dir)[1]


def _pipeline_export_task(pipeline_task: str) -> str:
    return heads.for_pipeline(pipeline_task).export_task


def _destination(out: Path, model_dir: Path) -> tuple[Path, Path]:
    """(folder, graph file): an .onnx name is the graph itself, anything else a folder that gets model.onnx."""
    out_dir, graph = (out.parent, out) if out.suffix == ".onnx" else (out, out / "model.onnx")
    if out_dir.resolve() == model_dir.resolve():
        raise ConversionError(f"{out}: write the export to its own folder, not into the model directory "
                              f"{model_dir} (its config.json and records would be replaced)")
    out_dir.mkdir(parents=True, exist_ok=True)
    return out_dir, graph


def _write_beside(model_dir: Path, out_dir: Path, graph: Path, task: str, record, tokenizer,
                  notes: list[str]) -> list[Path]:
    """config.json, the tokenizer and inference.json next to the graph: what a deployment loads. Without a
    tokenizer (graph_only) there is no inference.json: the folder is a graph, not a servable model."""
    (out_dir / CONFIG_NAME).write_bytes((model_dir / CONFIG_NAME).read_bytes())
    files = [out_dir / CONFIG_NAME]
    if tokenizer is None:
        notes.append("graph only: no tokenizer and no inference.json, so `serve` and litebert.pipeline do not take "
                     "this folder")
        return files
    tokenizer.save_pretrained(out_dir)
    files += sorted(p for p in out_dir.iterdir() if p.name.startswith(("spiece", "vocab", "tokenizer",
                                                                         "special_tokens")))
    family = TASKS[task]
    if family.code is not None:  # the pretraining graph (two heads) has no pipeline of its own
        pipeline_task = family.pipeline_task
        head = record.head if pipeline_task == record.task else family.name
        own = dataclasses.replace(record, task=pipeline_task, architecture=family.model_class, head=head,
                                  onnx_file=graph.name)
        (out_dir / INFERENCE_RECORD).write_text(json.dumps(own.to_dict(), indent=2) + "\n")
        files.append(out_dir / INFERENCE_RECORD)
    return files


def _quantize_int8(fp32: Path, out: Path, wrapper, spec: heads.HeadFamily, result: ExportResult, gen) -> None:
    """onnxruntime's dynamic quantization: MatMul/Gather weights stored as int8 with per-tensor scales,
    activations quantized on the fly. The fp32 graph is removed afterwards."""
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError:
        raise ConversionError("quantize='int8' needs onnxruntime (pip install litebert[onnx])") from None
    quantize_dynamic(str(fp32), str(out), weight_type=QuantType.QInt8)
    result.notes.append(f"int8 dynamic quantization: {fp32.stat().st_size / 1e6:.2f} MB -> "
                        f"{out.stat().st_size / 1e6:.2f} MB")
    fp32.unlink()
    diffs, shape = _compare(wrapper, out, spec, result, gen)
    result.notes.append(f"int8 graph vs PyTorch at shape {list(shape)}: max |diff| {max(diffs.values()):.2e} "
                        "(quantization error; measure the task metric before deploying)")
    result.quantized = True


def _dynamic_axes(in_axes, outputs) -> dict[str, dict[int, str]]:
    axes = {n: dict(enumerate(in_axes)) for n in INPUT_NAMES}
    axes.update({n: {i: a for i, a in enumerate(dims) if a} for n, dims in outputs.items()})
    return axes


def _export_torchscript(wrapper, args, out, in_axes, outputs, opset) -> None:
    with warnings.catch_warnings():
        # Unpacking q, k, v from a dim that is always 3 is what TracerWarning is about: safe here.
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", message=".*legacy TorchScript-based ONNX export.*")
        warnings.filterwarnings("ignore", message="The feature will be removed", category=DeprecationWarning)
        torch.onnx.export(wrapper, args, str(out), input_names=list(INPUT_NAMES), output_names=list(outputs),
                          dynamic_axes=_dynamic_axes(in_axes, outputs), opset_version=opset, dynamo=False,
                          do_constant_folding=True)


def _export_dynamo(wrapper, args, out, in_axes, outputs, opset, max_positions) -> None:
    try:
        import onnxscript  # noqa: F401
    except ImportError:
        raise ConversionError("the dynamo exporter needs the onnxscript package (pip install onnxscript); "
                              "the default exporter='torchscript' does not") from None
    dims = {a: Dim(a, max=max_positions) if a == "sequence" else Dim(a) for a in in_axes}
    shapes = {n: {i: dims[a] for i, a in enumerate(in_axes)} for n in INPUT_NAMES}
    size = sum(p.numel() * p.element_size() for p in wrapper.parameters())
    torch.onnx.export(wrapper, args, str(out), input_names=list(INPUT_NAMES), output_names=list(outputs),
                      dynamic_shapes=shapes, opset_version=opset, dynamo=True, verbose=False,
                      external_data=size > (1 << 31) - (1 << 26))  # one file below protobuf's 2 GiB limit


def _verify(wrapper, out: Path, spec: heads.HeadFamily, result: ExportResult, atol: float, gen) -> None:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        result.notes.append("onnxruntime is not installed: the graph was not run (pip install litebert[onnx])")
        return
    try:
        import onnx

        onnx.checker.check_model(str(out))
    except ImportError:
        pass
    diffs, shape = _compare(wrapper, out, spec, result, gen)
    result.max_abs_diff = max(diffs.values())
    result.checked_shape = shape
    if result.max_abs_diff > atol:
        worst = max(diffs, key=diffs.get)
        raise ConversionError(f"{out}: onnxruntime and PyTorch differ by {result.max_abs_diff:.2e} on {worst} "
                              f"(atol {atol}); the export is wrong, please report it")


def _compare(wrapper, out: Path, spec: heads.HeadFamily, result: ExportResult, gen) -> tuple[dict[str, float], tuple]:
    """Per output, max |onnxruntime - PyTorch| on fresh padded inputs of another shape than the traced one."""
    import onnxruntime as ort  # the [onnx] extra; _verify only calls this when it is installed

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(out), options, providers=["CPUExecutionProvider"])
    config = wrapper.model.config
    inputs = example_inputs(config, 3, min(13, config.max_position_embeddings), 3 if spec.choice_axis else None, gen)
    got = session.run(list(result.outputs), {n: t.numpy() for n, t in inputs.items()})
    with torch.no_grad():
        want = wrapper(*(inputs[n] for n in INPUT_NAMES))
    diffs = {}
    for name, g, w in zip(result.outputs, got, want):
        if tuple(g.shape) != tuple(w.shape):
            raise ConversionError(f"{out}: output {name} has shape {list(g.shape)} in onnxruntime, "
                                  f"{list(w.shape)} in PyTorch")
        diff = float((torch.from_numpy(g) - w).abs().max())  # QA padding logits are finfo.min in both: 0
        diffs[name] = diff if diff == diff else float("inf")  # a NaN must fail, not slip past `> atol`
    return diffs, tuple(inputs["input_ids"].shape)
