"""Benchmark engine: side-by-side timing with interleaved repeats, peak memory, MFU, and the standard workloads.

Used by `litebert bench` (a quick check of your own machine) and by the scripts in benchmarks/ (the full comparison
with Hugging Face transformers that writes docs/benchmarks.md).

Method. Every side (ours, each reference, the calibration GEMM) runs its first call alone (timed: that is where
compilation and lazy initialisation happen), then the sides take turns, A B C A B C ..., each timing a few steps
per turn, so a burst of load from other processes hits all sides alike. A ratio is the median over turns of the
per-turn ratio. Peak memory is sampled from /proc while a side runs (the process RSS: both sides' weights are
resident all the time, so compare the differences).
"""

from __future__ import annotations

import ctypes
import os
import platform
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Callable

import torch
import torch.nn.functional as F

from litebert.config import AlbertConfig
from litebert.device import DTYPES, autocast, cpu_bf16_speedup, cpu_flags, resolve_precision, synchronize

# ------------------------------------------------------------------------------------------------ timing engine


@dataclass
class Side:
    """One contender: `step()` does one unit of work (a training step, a forward pass, a batch of GEMMs)."""

    name: str
    step: Callable[[], Any]
    units_per_step: float  # tokens, examples or FLOPs per step: throughput = units / seconds
    flops_per_step: float = 0.0  # model FLOPs per step, for MFU
    note: str = ""
    in_process: bool = True  # False when the work runs in other processes (DDP ranks): no CPU-time reading


@dataclass
class Measured:
    name: str
    note: str
    units_per_step: float
    flops_per_step: float
    seconds: list[float] = field(default_factory=list)  # wall seconds per step, one entry per turn
    cpu_seconds: list[float] = field(default_factory=list)  # this process's CPU seconds per step, per turn
    first_step_s: float = float("nan")  # the first call alone: includes compilation / lazy init
    peak_rss_mb: float = 0.0  # the highest RSS sampled during any of its turns
    rss_growth_mb: float = 0.0  # peak minus the RSS at the start of the turn: this side's transient memory
    peak_device_mb: float | None = None
    error: str | None = None

    @property
    def step_s(self) -> float:
        return statistics.median(self.seconds) if self.seconds else float("nan")

    @property
    def throughput(self) -> float:
        return self.units_per_step / self.step_s

    def mfu(self, peak_flops: float) -> float:
        return self.flops_per_step / self.step_s / peak_flops if self.flops_per_step else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "note": self.note, "units_per_step": self.units_per_step,
                "flops_per_step": self.flops_per_step, "seconds": self.seconds, "cpu_seconds": self.cpu_seconds,
                "step_s": self.step_s,
                "throughput": self.throughput, "first_step_s": self.first_step_s, "peak_rss_mb": self.peak_rss_mb,
                "rss_growth_mb": self.rss_growth_mb,
                "peak_device_mb": self.peak_device_mb, "error": self.error}


def trim_memory() -> None:
    """Hand freed heap pages back to the OS (glibc), so one side's peak RSS does not include another's garbage."""
    import gc

    gc.collect()
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except OSError:
            pass


def current_rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError):  # not Linux: the lifetime peak is the best we have
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


class PeakRSS:
    """Peak resident set size of this process while the `with` block runs, sampled every `interval` seconds."""

    def __init__(self, interval: float = 0.005):
        self.interval, self.peak_mb = interval, 0.0
        self._stop = threading.Event()

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak_mb = max(self.peak_mb, current_rss_mb())
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakRSS:
        self.start_mb = self.peak_mb = current_rss_mb()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_mb = max(self.peak_mb, current_rss_mb())


def run_interleaved(sides: list[Side], *, repeats: int, steps: int, device: torch.device | None = None,
                    warmup: int = 1, log: Callable[[str], None] | None = None) -> list[Measured]:
    """Warm each side up (its first call timed on its own), then take `repeats` turns of `steps` steps each,
    the sides alternating. A side whose step raises is reported with its error instead of stopping the others."""
    device = device or torch.device("cpu")
    results = [Measured(s.name, s.note, s.units_per_step, s.flops_per_step) for s in sides]
    for side, res in zip(sides, results):
        try:
            t0 = time.perf_counter()
            side.step()
            synchronize(device)
            res.first_step_s = time.perf_counter() - t0
            for _ in range(warmup - 1):
                side.step()
            synchronize(device)
        except Exception as exc:  # noqa: BLE001 - a failed contender is a result, not a crash
            res.error = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
        if log:
            log(f"  warm-up {side.name}: {res.first_step_s:.2f}s" + (f" FAILED {res.error}" if res.error else ""))
    for turn in range(repeats):
        for side, res in zip(sides, results):
            if res.error:
                continue
            trim_memory()
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            with PeakRSS() as rss:
                t0, c0 = time.perf_counter(), time.process_time()
                for _ in range(steps):
                    side.step()
                synchronize(device)
                elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
            res.seconds.append(elapsed / steps)
            if side.in_process and device.type == "cpu":
                res.cpu_seconds.append(cpu / steps)
            res.peak_rss_mb = max(res.peak_rss_mb, rss.peak_mb)
            res.rss_growth_mb = max(res.rss_growth_mb, rss.peak_mb - rss.start_mb)
            if device.type == "cuda":
                res.peak_device_mb = torch.cuda.max_memory_allocated(device) / 2**20
            if log:
                log(f"  turn {turn + 1}/{repeats} {side.name}: {elapsed / steps:.3f}s/step")
    return results


def ratio(ours: Measured, ref: Measured, clock: str = "wall") -> tuple[float, float, float]:
    """(median, min, max) over turns of ours' throughput / the reference's, turn by turn.

    clock "cpu" uses CPU seconds instead of wall seconds: with 1 thread per side that is the time the side really
    ran, which other tenants of the machine barely disturb (with more threads it also counts spin-waiting)."""
    a, b = (ours.seconds, ref.seconds) if clock == "wall" else (ours.cpu_seconds, ref.cpu_seconds)
    per_turn = [(r / ref.units_per_step) / (o / ours.units_per_step) for o, r in zip(a, b)]
    if not per_turn:
        return float("nan"), float("nan"), float("nan")
    return statistics.median(per_turn), min(per_turn), max(per_turn)


# ------------------------------------------------------------------------------------------------ peaks and MFU

# Dense bf16 tensor-core peaks from the vendors' spec sheets (TFLOP/s), for MFU on GPUs.
GPU_PEAK_BF16_TFLOPS = {"H200": 989.0, "H100 SXM": 989.0, "H100 PCIe": 756.0, "H100": 989.0, "A100": 312.0,
                        "L40S": 362.0, "L4": 121.0, "A10G": 125.0, "A10": 125.0, "RTX 4090": 165.0,
                        "RTX 3090": 71.0}


def device_peak_flops(device: torch.device) -> tuple[float, str] | None:
    """(bf16 peak FLOP/s, where it comes from) for a known GPU; None on CPU or an unknown GPU."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    for key, tflops in GPU_PEAK_BF16_TFLOPS.items():
        if key in name:
            return tflops * 1e12, f"{name}: {tflops:g} TFLOP/s dense bf16 (spec sheet)"
    return None


def calibration_side(device: torch.device, precision: str, m: int, k: int, n: int, calls: int = 10) -> Side:
    """`calls` [m, k] x [k, n] matmuls per step in the run's precision: the model's own FFN shape. Its throughput
    (FLOP/s) is the in-process peak that MFU is measured against; it runs interleaved with the model sides."""
    dtype = DTYPES[precision]
    g = torch.Generator(device="cpu").manual_seed(0)
    a = torch.randn(m, k, generator=g).to(device, dtype)
    b = torch.randn(k, n, generator=g).to(device, dtype)

    def step():
        for _ in range(calls):
            a @ b

    flops = 2.0 * m * k * n * calls
    return Side(f"calibration GEMM [{m}x{k}]x[{k}x{n}] {precision}", step, units_per_step=flops,
                flops_per_step=flops, note="the MFU denominator")


def host_kind() -> str:
    """The host's kind of arithmetic, which decides what a CPU figure means: the bf16 instructions it has, and
    whether the start-up probe found bf16 matmuls faster than fp32 there (precision "auto"'s choice). The flags
    alone do not say it: with AMX bf16 runs several times faster than fp32; with AVX512-BF16 and no AMX it ran at
    ~0.5-0.7x fp32 on one Intel host and ~2x on an AMD EPYC one. Figures from hosts of different kinds are never
    compared as if they were one (docs/benchmarks.md keeps one table per kind)."""
    flags = cpu_flags()
    isa = ("AMX" if "amx_bf16" in flags else "AVX512-BF16 no AMX" if "avx512_bf16" in flags
           else "no bf16 instructions")
    return f"{isa}, auto {resolve_precision('auto', torch.device('cpu'))}"


def host_arithmetic() -> dict[str, Any]:
    """The host kind and the start-up probe's bf16 speed-up (fp32 time / bf16 time of the same one-core matmul,
    `litebert.device.cpu_bf16_speedup`, measured once per process)."""
    return {"host_kind": host_kind(), "bf16_speedup": round(cpu_bf16_speedup(), 2)}


def host_line() -> str:
    """One line naming the machine and its arithmetic, for every benchmark's output: CPU model, its vector and bf16
    flags, the torch threads in use, the host kind with the precision "auto" picks, torch, the load."""
    info = machine_info()
    return (f"{info['cpu']}, {info['logical_cpus']} logical CPUs, flags {info['cpu_features']}, "
            f"{info['torch_threads']} torch threads; host kind: {info['host_kind']} (bf16 matmul "
            f"{info['bf16_speedup']:.2f}x fp32 by the probe); torch {info['torch']}; load average "
            f"{info.get('load_average', '?')}")


def machine_info(device: torch.device | None = None) -> dict[str, Any]:
    """What the numbers were measured on, the host's arithmetic included (`host_arithmetic`)."""
    cpu = platform.processor() or "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    flags = cpu_flags()
    info = {"cpu": cpu, "logical_cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "cpu_features": " ".join(f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_int8")
                                     if f in flags) or "unknown",
            **host_arithmetic(), "python": platform.python_version(), "torch": torch.__version__,
            "platform": platform.platform()}
    try:
        import transformers

        info["transformers"] = transformers.__version__
    except ImportError:
        info["transformers"] = "not installed"
    if device is not None and device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    try:
        info["load_average"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        pass
    return info


# ------------------------------------------------------------------------------------------------ workloads


def synthetic_pretraining_batch(config: AlbertConfig, batch_size: int, seq_len: int, predictions: int,
                                seed: int = 0) -> dict[str, torch.Tensor]:
    """A full-length MLM+SOP batch in both formats: ours (masked_positions/ids/weights [B, P], a fixed P) and
    Hugging Face's (`labels` [B, L], -100 where not masked). [CLS] A [SEP] B [SEP] with B starting mid-way;
    token ids avoid the first 5 (specials). Speed does not depend on the ids, only on the shapes."""
    g = torch.Generator().manual_seed(seed)
    B, L, P = batch_size, seq_len, predictions
    ids = torch.randint(5, config.vocab_size, (B, L), generator=g)
    half = L // 2
    ids[:, 0], ids[:, half - 1], ids[:, -1] = 2, 3, 3  # [CLS] ... [SEP] ... [SEP]
    token_type_ids = torch.zeros(B, L, dtype=torch.long)
    token_type_ids[:, half:] = 1
    maskable = torch.tensor([i not in (0, half - 1, L - 1) for i in range(L)])
    candidates = maskable.nonzero().squeeze(1)
    positions = torch.stack([candidates[torch.randperm(len(candidates), generator=g)[:P]] for _ in range(B)])
    positions = positions.sort(-1).values  # [B, P]
    masked_ids = torch.gather(ids, 1, positions)  # the original tokens are the targets
    ids.scatter_(1, positions, 4)  # [MASK]
    labels = torch.full((B, L), -100, dtype=torch.long)
    labels.scatter_(1, positions, masked_ids)
    return {"input_ids": ids, "token_type_ids": token_type_ids, "attention_mask": torch.ones(B, L, dtype=torch.long),
            "masked_positions": positions, "masked_ids": masked_ids, "masked_weights": torch.ones(B, P),
            "sop_labels": torch.randint(0, 2, (B,), generator=g), "labels": labels}


def set_attention_impl(model: torch.nn.Module, impl: str) -> None:
    """"auto" | "sdpa" | "math" on every attention layer (see `litebert.model.attend`)."""
    from litebert.model import Attention

    for m in model.modules():
        if isinstance(m, Attention):
            m.impl = impl


def maybe_compile(model: torch.nn.Module, enabled: bool, **kwargs: Any) -> torch.nn.Module:
    return torch.compile(model, **kwargs) if enabled else model


def bench_run(config: AlbertConfig, batch_size: int, seq_len: int, predictions: int, device: torch.device,
              precision: str, compile: bool = False, lr: float = 1e-4, gradient_checkpointing: bool = False,
              accum: int = 1, init_scale: float = 2.0**16):
    """A `litebert.pretrain_setup.Run` for calling `train_step` directly (no store, no run directory): seeded weights on
    `device`, LAMB, the step schedule, and a GradScaler (starting at `init_scale`) when precision is fp16."""
    from litebert.model import AlbertForPreTraining
    from litebert.optim import build_optimizer, make_scheduler
    from litebert.distributed import Dist
    from litebert.pretrain import PretrainConfig
    from litebert.pretrain_setup import Run

    cfg = PretrainConfig(batch_size=batch_size * accum, micro_batch_size=batch_size, steps=10**6,
                         precision=precision, compile=compile, lr=lr, max_seq_length=max(8, seq_len),
                         max_predictions_per_seq=predictions)
    torch.manual_seed(0)
    raw = AlbertForPreTraining(config).to(device)
    raw.set_gradient_checkpointing(gradient_checkpointing)
    optimizer = build_optimizer(raw, "lamb", lr=lr)
    scheduler = make_scheduler(optimizer, 0, cfg.steps)
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16", init_scale=init_scale)
    return Run(cfg, Dist(), device, precision, config, maybe_compile(raw, compile), raw, optimizer, scheduler,
               scaler, stream=None, store=None, tokenizer_dir=None, accum=accum)


def ours_train_step(config: AlbertConfig, batch: dict[str, torch.Tensor], device: torch.device, precision: str,
                    compile: bool = False, lr: float = 1e-4, gradient_checkpointing: bool = False
                    ) -> Callable[[], Any]:
    """One step of `litebert pretrain` exactly: `litebert.pretrain.train_step` (sparse MLM head over the fixed P
    masked positions, MLM sum / global masked count + SOP mean, LAMB, global grad clip 1.0), one micro-batch."""
    from litebert.pretrain import train_step

    B, L = batch["input_ids"].shape
    run = bench_run(config, B, L, batch["masked_positions"].shape[1], device, precision, compile, lr,
                    gradient_checkpointing)
    micro = [{k: v for k, v in batch.items() if k != "labels"}]

    def step():
        train_step(run, micro)
        run.step += 1

    return step


def ours_pretrain_step(config: AlbertConfig, batch: dict[str, torch.Tensor], device: torch.device, precision: str,
                       *, sparse: bool = True, attention: str = "auto", pass_mask: bool = True,
                       compile: bool = False, lr: float = 1e-4,
                       gradient_checkpointing: bool = False) -> Callable[[], Any]:
    """Our model with one lever at a time, same loss semantics as `train_step` (for the lever ablation).
    `sparse=False` computes MLM logits at every position (as Hugging Face does) and scores the masked ones."""
    from litebert.model import AlbertForPreTraining, gather_positions, masked_lm_loss
    from litebert.optim import build_optimizer

    torch.manual_seed(0)
    raw = AlbertForPreTraining(config).to(device).train()
    raw.set_gradient_checkpointing(gradient_checkpointing)
    set_attention_impl(raw, attention)
    model = maybe_compile(raw, compile)
    optimizer = build_optimizer(raw, "lamb", lr=lr)
    b = {k: v.to(device) for k, v in batch.items()}
    mask = b["attention_mask"] if pass_mask else None
    n_masked, n_pairs = b["masked_weights"].sum(), b["sop_labels"].numel()

    def step():
        with autocast(precision, device):
            out = model(b["input_ids"], mask, b["token_type_ids"],
                        masked_positions=b["masked_positions"] if sparse else None)
        logits = out.mlm_logits if sparse else gather_positions(out.mlm_logits, b["masked_positions"])
        mlm = masked_lm_loss(logits, b["masked_ids"], b["masked_weights"], denominator=n_masked)
        sop = F.cross_entropy(out.sop_logits.float(), b["sop_labels"], reduction="sum") / n_pairs
        (mlm + sop).backward()
        torch.nn.utils.clip_grad_norm_(raw.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def hf_config(config: AlbertConfig):
    import transformers

    return transformers.AlbertConfig(**config.to_hf_dict())


def hf_pretrain_step(config: AlbertConfig, batch: dict[str, torch.Tensor], device: torch.device, precision: str,
                     attn_implementation: str = "sdpa", lr: float = 1e-4) -> Callable[[], Any]:
    """The reference: transformers.AlbertForPreTraining with labels in its own format (dense MLM head over all
    positions, CE mean over the masked ones + SOP CE mean), the same LAMB from litebert.optim, grad clip 1.0."""
    import transformers

    from litebert.optim import build_optimizer

    torch.manual_seed(0)
    model = transformers.AlbertForPreTraining._from_config(hf_config(config),
                                                           attn_implementation=attn_implementation)
    model = model.to(device).train()
    optimizer = build_optimizer(model, "lamb", lr=lr)
    b = {k: v.to(device) for k, v in batch.items()}

    def step():
        with autocast(precision, device):
            out = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"],
                        token_type_ids=b["token_type_ids"], labels=b["labels"], sentence_order_label=b["sop_labels"])
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def synthetic_inputs(config: AlbertConfig, batch_size: int, seq_len: int, seed: int = 0,
                     padded: bool = False) -> dict[str, torch.Tensor]:
    """Full-length rows; `padded`: row lengths drawn uniformly from [seq_len / 4, seq_len] (the longest row full), the
    rest padding, as a batch of real sentences is."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, config.vocab_size, (batch_size, seq_len), generator=g)
    types = torch.zeros_like(ids)
    types[:, seq_len // 2:] = 1
    mask = torch.ones_like(ids)
    if padded:
        lengths = torch.randint(seq_len // 4, seq_len + 1, (batch_size,), generator=g)
        lengths[0] = seq_len
        mask = (torch.arange(seq_len)[None, :] < lengths[:, None]).long()  # [B, L]
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def inference_mode(device: torch.device) -> str:
    """How "ours" runs inference here: the library's default precision, i.e. precision "auto" as
    `litebert.device.resolve_precision` resolves it on this machine. "bf16": weights stored in bf16 (the pipeline's
    "bf16" backend); anything else (fp32, and fp16 on GPUs without bf16): "fp32". int8 dynamic quantization is an
    opt-in lever, never this default (a benchmark shows it as its own row)."""
    from litebert import device as dev

    return "bf16" if dev.resolve_precision("auto", device) == "bf16" else "fp32"


def ours_encoder_forward(config: AlbertConfig, inputs: dict[str, torch.Tensor], device: torch.device, mode: str,
                         compile: bool = False, freeze: bool = False, unpad: bool = False) -> Callable[[], Any]:
    """Our AlbertModel (encoder + pooler) forward under no_grad. mode: "fp32"; "bf16-autocast" (fp32 weights);
    "bf16" (weights stored in bf16, no autocast casts); "int8" (torch.ao dynamic quantization of the Linear
    layers, fp32 activations: the lever for CPUs without fast bf16). `freeze` (with `compile`) turns on inductor's
    freezing: the weights become constants of the compiled graph, folded and prepacked into oneDNN's blocked layout
    once instead of on every call (inference only; the model must not be trained afterwards). `unpad`: the matmuls
    skip the padding (`Encoder.unpad`, as the library's inference doors run it)."""
    from litebert.model import AlbertModel

    torch.manual_seed(0)
    model = AlbertModel(config).eval()
    model.encoder.unpad = unpad
    if mode == "bf16":
        model = model.to(torch.bfloat16)
    elif mode == "int8":
        model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    model = maybe_compile(model.to(device), compile, **({"options": {"freezing": True}} if freeze else {}))
    precision = "bf16" if mode == "bf16-autocast" else "fp32"
    x = {k: v.to(device) for k, v in inputs.items()}

    @torch.inference_mode()
    def step():
        with autocast(precision, device):
            return model(**x).pooled_output

    return step


def hf_encoder_forward(config: AlbertConfig, inputs: dict[str, torch.Tensor], device: torch.device, mode: str,
                       attn_implementation: str = "sdpa") -> Callable[[], Any]:
    """transformers.AlbertModel (encoder + pooler), no_grad; modes as in `ours_encoder_forward`."""
    import transformers

    torch.manual_seed(0)
    model = transformers.AlbertModel._from_config(hf_config(config), attn_implementation=attn_implementation)
    model = model.eval()
    if mode == "bf16":
        model = model.to(torch.bfloat16)
    model = model.to(device)
    precision = "bf16" if mode == "bf16-autocast" else "fp32"
    x = {k: v.to(device) for k, v in inputs.items()}

    @torch.inference_mode()
    def step():
        with autocast(precision, device):
            return model(**x).pooler_output

    return step


def encoder_flops_per_token(config: AlbertConfig, seq_len: int) -> float:
    """Forward matmul FLOPs per token of the encoder (no MLM head): a third of the training count."""
    from litebert.model import model_flops_per_token

    return model_flops_per_token(config, seq_len, masked_fraction=0.0) / 3.0


# ------------------------------------------------------------------------------------------------ tables


def format_table(headers: list[str], rows: list[list[Any]]) -> str:
    """A Markdown table (readable as plain text too)."""
    def cell(x: Any) -> str:
        if isinstance(x, float):
            if x != x:  # NaN
                return "-"
            return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"
        return str(x)

    body = [[cell(x) for x in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(headers)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, body)])


# ------------------------------------------------------------------------------------------------ `litebert bench`


def quick_bench(config: AlbertConfig, *, name: str = "model", batch: int = 8, seq_len: int = 128,
                predictions: int = 20, repeats: int = 2, precision: str = "auto", compile: bool = False,
                device: torch.device | None = None, reference: bool = True,
                log: Callable[[str], None] | None = None) -> str:
    """A small version of benchmarks/: one pretraining step and batch-1 inference, ours vs transformers (when
    installed), interleaved. Returns the report as text."""
    from litebert.device import pick_device, resolve_precision
    from litebert.model import model_flops_per_token

    device = device or pick_device()
    precision = resolve_precision(precision, device)
    if reference:
        try:
            import transformers  # noqa: F401
        except ImportError:
            reference = False
    tokens = batch * seq_len
    predictions = min(predictions, seq_len - 3)
    data = synthetic_pretraining_batch(config, batch, seq_len, predictions)
    train = [Side("ours", ours_train_step(config, data, device, precision, compile=compile), tokens,
                  model_flops_per_token(config, seq_len, predictions / seq_len) * tokens,
                  f"litebert train_step, {precision}, sparse MLM head" + (", compiled" if compile else ""))]
    if reference:
        dense = model_flops_per_token(config, seq_len, None) * tokens
        for ref in dict.fromkeys(["fp32", precision]):
            train.append(Side(f"HF {ref}", hf_pretrain_step(config, data, device, ref), tokens, dense,
                              f"transformers AlbertForPreTraining, {ref}, dense MLM head"))
    calib = calibration_side(device, precision, tokens, config.hidden_size, config.intermediate_size)
    trained = run_interleaved(train + [calib], repeats=repeats, steps=1, device=device, log=log)
    peak = trained[-1].throughput

    mode = inference_mode(device)
    fast = mode == "bf16"
    inputs = synthetic_inputs(config, 1, seq_len)
    infer = [Side("ours", _times(ours_encoder_forward(config, inputs, device, mode), 5), 5, 0.0,
                  f"AlbertModel, {mode} weights, eager")]
    if reference:
        infer.append(Side("HF bf16 autocast" if fast else "HF fp32",
                          _times(hf_encoder_forward(config, inputs, device, "bf16-autocast" if fast else "fp32"), 5),
                          5, 0.0, "transformers AlbertModel"))
    inferred = run_interleaved(infer, repeats=repeats + 1, steps=1, device=device, log=log)

    out = [f"litebert bench: {name}, {torch.get_num_threads()} threads, {device.type}, precision {precision}",
           "machine: " + ", ".join(f"{k} {v}" for k, v in machine_info(device).items()), "",
           f"pretraining step, batch {batch}, seq {seq_len} (MFU vs calibration GEMM {peak / 1e12:.2f} TFLOP/s):"]
    rows = []
    for r in trained[:-1]:
        if r.error:
            rows.append([r.name, r.note, "failed: " + r.error, "", ""])
            continue
        vs = f"{ratio(trained[0], r)[0]:.2f}x" if r is not trained[0] and not trained[0].error else ""
        rows.append([r.name, r.note, r.throughput, f"{100 * r.mfu(peak):.0f}%", vs])
    out += [format_table(["side", "what", "tokens/s", "MFU", "ours vs this"], rows), "",
            f"inference, encoder + pooler, batch 1, seq {seq_len}:"]
    rows = []
    for r in inferred:
        if r.error:
            rows.append([r.name, r.note, "failed: " + r.error, ""])
            continue
        vs = f"{1 / ratio(inferred[0], r)[0]:.2f}x" if r is not inferred[0] and not inferred[0].error else ""
        rows.append([r.name, r.note, f"{1e3 * r.step_s / 5:.1f}", vs])
    out += [format_table(["side", "what", "latency ms", "ours / this"], rows), "",
            "The full comparison: python benchmarks/run_all.py (see docs/benchmarks.md)."]
    return "\n".join(out)


def _times(step: Callable[[], Any], n: int) -> Callable[[], Any]:
    def run():
        for _ in range(n):
            step()
    return run


# ------------------------------------------------------------------------------------------------ DDP lever


def _ddp_worker(rank: int, world: int, port: int, config: AlbertConfig, batch: dict[str, torch.Tensor],
                precision: str, compile: bool, gradient_checkpointing: bool, commands, done) -> None:
    """One rank of `ddp_train_side`: 1 thread, its slice of the batch, `train_step` under DDP (gloo)."""
    import torch.distributed as dist

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    from litebert.model import AlbertForPreTraining
    from litebert.optim import build_optimizer, make_scheduler
    from litebert.distributed import Dist
    from litebert.pretrain import PretrainConfig, train_step
    from litebert.pretrain_setup import Run

    per = batch["input_ids"].shape[0] // world
    micro = [{k: v[rank * per:(rank + 1) * per] for k, v in batch.items() if k != "labels"}]
    cfg = PretrainConfig(batch_size=per * world, micro_batch_size=per, steps=10**6, precision=precision,
                         lr=1e-4, max_predictions_per_seq=batch["masked_positions"].shape[1])
    torch.manual_seed(0)
    raw = AlbertForPreTraining(config)
    raw.set_gradient_checkpointing(gradient_checkpointing)
    model = maybe_compile(torch.nn.parallel.DistributedDataParallel(raw), compile)
    optimizer = build_optimizer(raw, "lamb", lr=cfg.lr)
    run = Run(cfg, Dist(rank, world), torch.device("cpu"), precision, config, model, raw, optimizer,
              make_scheduler(optimizer, 0, cfg.steps), torch.amp.GradScaler("cpu", enabled=False), stream=None,
              store=None, tokenizer_dir=None, accum=1)
    while commands.get() != "stop":
        try:
            train_step(run, micro)
            run.step += 1
            done.put("ok")
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which fails the side
            done.put(f"{type(exc).__name__}: {exc}")
    dist.destroy_process_group()


class DDPSide:
    """`world` CPU processes x 1 thread running `train_step` under DDP on slices of one global batch (the lever
    "2 DDP ranks x 1 thread" vs "1 process x 2 threads"). `side.step()` runs one global step on all ranks while
    the parent waits (idle), so it interleaves with in-process sides. Call `close()` when done."""

    def __init__(self, config: AlbertConfig, batch: dict[str, torch.Tensor], precision: str, world: int = 2,
                 compile: bool = False, gradient_checkpointing: bool = False):
        import socket

        import torch.multiprocessing as mp

        ctx = mp.get_context("spawn")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.commands = [ctx.Queue() for _ in range(world)]
        self.done = [ctx.Queue() for _ in range(world)]
        self.procs = [ctx.Process(target=_ddp_worker, daemon=True,
                                  args=(r, world, port, config, batch, precision, compile,
                                        gradient_checkpointing, self.commands[r], self.done[r]))
                      for r in range(world)]
        for p in self.procs:
            p.start()

    def step(self) -> None:
        for q in self.commands:
            q.put("step")
        replies = [q.get(timeout=3600) for q in self.done]
        bad = [r for r in replies if r != "ok"]
        if bad:
            raise RuntimeError(f"DDP rank failed: {bad[0]}")

    def close(self) -> None:
        for q in self.commands:
            q.put("stop")
        for p in self.procs:
            p.join(timeout=60)
            if p.is_alive():
                p.terminate()
