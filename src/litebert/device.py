"""Where and how fast we run: device choice, precision detection, and a measured peak for MFU.

bf16 is chosen at run time, never hard-coded: on CUDA when the GPU supports it; on CPU when the processor has
bf16 instructions (AMX or AVX512-BF16) AND a short start-up probe measures its bf16 matmul faster than fp32. The
flags alone are not enough: with AMX a bf16 matmul runs 4-6x faster than fp32, but on a host with AVX512-BF16 and
no AMX oneDNN's bf16 matmul measured 0.7x fp32 (docs/benchmarks.md), so "auto" picking bf16 there made every run
slower.
"""

from __future__ import annotations

import contextlib
import functools
import time
from pathlib import Path

import torch

from litebert.errors import ConfigError, TrainingError

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
AUTO_PRECISION_HELP = ("auto: bf16 on a bf16 GPU, or on a CPU where a start-up probe measures bf16 matmuls faster "
                       "than fp32; fp16 on older GPUs; else fp32")


def is_out_of_memory(exc: BaseException) -> bool:
    """A failed allocation: torch.OutOfMemoryError (CUDA), MemoryError, or the CPU allocator's RuntimeError."""
    return (isinstance(exc, (torch.OutOfMemoryError, MemoryError))
            or "can't allocate memory" in str(exc) or "out of memory" in str(exc).lower())


def first_line(exc: BaseException, limit: int = 200) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:limit]


def check_device(name: str) -> torch.device:
    """torch.device(name), refused (ConfigError naming --device) when this torch build or machine cannot use it."""
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"--device {name!r}: not a device torch knows (e.g. cpu, cuda, cuda:1, mps)") from None
    if device.type == "cuda":
        if torch.version.cuda is None:
            raise ConfigError(f"--device {name}: this torch build ({torch.__version__}) has no CUDA support; "
                              "use --device cpu or install a CUDA build of torch")
        if not torch.cuda.is_available() or (device.index or 0) >= torch.cuda.device_count():
            raise ConfigError(f"--device {name}: no such CUDA GPU is visible ({torch.cuda.device_count()} found)")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"--device {name}: MPS is not available on this machine")
    return device


def pick_device(name: str | None = None) -> torch.device:
    if name:
        return check_device(name)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


# bf16 must beat fp32 by this much on the probe: a margin over the probe's noise, so a host where the two are
# equal keeps fp32 (exact, and no casts).
BF16_MIN_SPEEDUP = 1.15


def matmul_seconds(a: torch.Tensor, b: torch.Tensor) -> float:
    """Seconds of one a @ b."""
    start = time.perf_counter()
    a @ b
    return time.perf_counter() - start


@functools.lru_cache(maxsize=1)
def cpu_bf16_speedup(size: int = 384, rounds: int = 12) -> float:
    """fp32 time / bf16 time of the same [size, size] CPU matmul on one core (> 1: bf16 is faster), measured once
    per process in ~0.05-0.15 s. One thread, because the per-core kernel is what differs between the dtypes, and
    because several threads on a busy machine wait for each other long enough to drown the difference. The two
    dtypes take turns, one matmul at a time, and each keeps its fastest one: other processes on the
    machine only ever make a timing slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        operands = {dtype: (torch.full((size, size), 0.5, dtype=dtype), torch.full((size, size), 0.25, dtype=dtype))
                    for dtype in (torch.float32, torch.bfloat16)}
        for a, b in operands.values():
            a @ b  # oneDNN builds its kernel on the first call: not part of the timing
        best = {dtype: float("inf") for dtype in operands}
        for _ in range(rounds):
            for dtype, (a, b) in operands.items():
                best[dtype] = min(best[dtype], matmul_seconds(a, b))
    finally:
        torch.set_num_threads(threads)
    return best[torch.float32] / best[torch.bfloat16]


def cpu_has_fast_bf16() -> bool:
    """bf16 instructions present and measured faster than fp32 on this machine."""
    return bool({"amx_bf16", "avx512_bf16"} & cpu_flags()) and cpu_bf16_speedup() >= BF16_MIN_SPEEDUP


def resolve_precision(precision: str, device: torch.device) -> str:
    if precision not in PRECISIONS:
        raise TrainingError(f"--precision {precision!r}: expected one of {PRECISIONS}")
    if precision == "auto":
        if device.type == "cuda":
            return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
        return "bf16" if cpu_has_fast_bf16() else "fp32"
    if precision == "fp16" and device.type != "cuda":
        raise TrainingError("--precision fp16 needs a CUDA device (use bf16 or fp32 on CPU)")
    return precision


DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}  # a resolved precision's dtype


def autocast(precision: str, device: torch.device):
    """Autocast context for a resolved precision (fp32: none)."""
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=DTYPES[precision])



def for_inference(model: torch.nn.Module, precision: str, device: torch.device | None = None) -> torch.nn.Module:
    """A saved model about to answer requests, with its weights in the resolved precision (no autocast).

    Every door that runs a saved model (predict, evaluate, the pipeline, serve) goes through here, so one model
    at one precision gives the same numbers whichever door is asked; training keeps fp32 weights under autocast.
    """
    model = model.to(device=device, dtype=DTYPES[precision]).eval()
    for module in model.modules():  # padded batches: the matmuls run on the real tokens alone (Encoder.unpad)
        if hasattr(module, "unpad"):
            module.unpad = True
    return model


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure_peak_flops(device: torch.device, precision: str, m: int, k: int, n: int, seconds: float = 0.5) -> float:
    """FLOP/s of one [m, k] x [k, n] matmul in the run's precision: the model's own FFN shape, so MFU says how
    close the whole training step gets to what this machine does on its biggest GEMM."""
    dtype = DTYPES[precision]
    # Constant operands: the timing needs no randomness, and the global RNG (dropout's) stays untouched.
    a = torch.full((m, k), 0.5, device=device, dtype=dtype)
    b = torch.full((k, n), 0.25, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    synchronize(device)
    runs, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds or runs < 3:
        a @ b
        runs += 1
    synchronize(device)
    return 2.0 * m * k * n * runs / (time.perf_counter() - start)
