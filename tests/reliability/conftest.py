"""Shared fixtures of the reliability suite: a tiny token store, a tiny model, and helpers that run
`litebert pretrain` in a subprocess (plain or under torchrun) and read what it left behind.

Every run here is CPU-only and tiny (2 layers of width 32, sequences of 32-64 tokens, 8-14 steps): what costs
time is starting Python and torch, so runs that several tests compare against are session fixtures.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

TINY_MODEL = {"format": "litebert", "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
              "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 128}
STORE_DOCUMENTS = 100  # ~237 examples at length 32 (14 steps of 16 per epoch), ~168 at length 64
SUBPROCESS_TIMEOUT = 300  # seconds; a run that takes longer has hung

# Fuzz cases run per test, printed at the end of the session (pytest_terminal_summary below).
FUZZ_CASES: collections.Counter = collections.Counter()


def pytest_terminal_summary(terminalreporter):
    if FUZZ_CASES:
        terminalreporter.write_sep("-", "reliability fuzz cases")
        for name, n in sorted(FUZZ_CASES.items()):
            terminalreporter.write_line(f"{name}: {n}")
        terminalreporter.write_line(f"total fuzz cases: {sum(FUZZ_CASES.values())}")


@pytest.fixture(scope="session")
def fuzz_count():
    """fuzz_count(name): count one generated case of the fuzz test `name`."""
    def count(name: str) -> None:
        FUZZ_CASES[name] += 1
    return count


# --------------------------------------------------------------------------------------------- data


def write_pydoc_corpus(path: Path, max_documents: int | None = None) -> int:
    """English from the standard library's pydoc topics: one sentence per line, a blank line between documents."""
    from pydoc_data.topics import topics

    from litebert.data.corpus import split_sentences

    docs = []
    for key in sorted(topics):
        for para in topics[key].split("\n\n"):
            lines = split_sentences(" ".join(para.split()))
            if len(lines) >= 2:
                docs.append("\n".join(lines))
    docs = docs[:max_documents] if max_documents else docs
    path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    return len(docs)


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory):
    """(store dir, tokenizer dir, model config JSON): a 500-piece SentencePiece vocab trained on pydoc topics
    and a store of its first STORE_DOCUMENTS documents."""
    from litebert.data.store import build_store
    from litebert.tokenizer import train_sentencepiece

    root = tmp_path_factory.mktemp("tiny_data")
    write_pydoc_corpus(root / "all.txt")
    write_pydoc_corpus(root / "corpus.txt", STORE_DOCUMENTS)
    train_sentencepiece([root / "all.txt"], root / "tokenizer", vocab_size=500)
    store = build_store([root / "corpus.txt"], root / "tokenizer", root / "store", workers=1,
                        validation_fraction=0.05)
    model = root / "model.json"
    model.write_text(json.dumps({**TINY_MODEL, "vocab_size": store.vocab_size}))
    return root / "store", root / "tokenizer", model


# --------------------------------------------------------------------------------------------- running


def pretrain_args(data, out: Path, **overrides) -> list[str]:
    """`litebert pretrain` arguments for the tiny setup; overrides use the config field names."""
    store, tokenizer, model = data
    opts = dict(model=model, data=store, tokenizer=tokenizer, out=out, max_seq_length=32,
                max_predictions_per_seq=5, batch_size=16, micro_batch_size=8, steps=8, warmup_steps=1,
                lr=2e-3, save_every=2, keep=50, log_every=1, eval_batches=1, precision="fp32", threads=1, seed=0)
    opts.update(overrides)
    return ["pretrain"] + [x for k, v in opts.items() for x in (f"--{k.replace('_', '-')}", str(v))]


def subprocess_env(fault: str | None = None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITEBERT_FAULT")}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    if fault:
        env["LITEBERT_FAULT"] = fault
    env.update(extra)
    return env


def run_litebert(args: list[str], fault: str | None = None, nproc: int = 1, max_restarts: int = 0,
                 env: dict[str, str] | None = None, check: bool = False) -> subprocess.CompletedProcess:
    """`python -m litebert ARGS` or, with nproc > 1, the same under torchrun (gloo on CPU)."""
    if nproc == 1:
        cmd = [sys.executable, "-m", "litebert", *args]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
               f"--max-restarts={max_restarts}", "--monitor-interval=0.2", "-m", "litebert", *args]
    proc = subprocess.run(cmd, env={**subprocess_env(fault), **(env or {})}, capture_output=True, text=True,
                          timeout=SUBPROCESS_TIMEOUT)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    return proc


def read_metrics(run_dir: Path) -> dict[int, dict]:
    """Training rows of metrics.jsonl by step (eval rows left out)."""
    rows = {}
    for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if "loss" in rec:
            assert rec["step"] not in rows, f"step {rec['step']} logged twice in {run_dir}"
            rows[rec["step"]] = rec
    return rows


def losses(run_dir: Path, key: str = "loss") -> list[float]:
    rows = read_metrics(run_dir)
    assert sorted(rows) == list(range(1, len(rows) + 1)), f"{run_dir}: steps {sorted(rows)}"
    return [rows[s][key] for s in sorted(rows)]


def read_weights(ckpt: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(Path(ckpt) / "model.safetensors"))


def assert_same_weights(a: Path, b: Path) -> None:
    """Bit for bit: the same tensor names, and every tensor equal (the files hold nothing else that matters)."""
    import torch

    wa, wb = read_weights(a), read_weights(b)
    assert wa.keys() == wb.keys()
    different = [k for k in wa if not torch.equal(wa[k], wb[k])]
    assert not different, f"{a} and {b} differ in {different}"


def checkpoint_steps(run_dir: Path) -> list[int]:
    return sorted(int(p.name.split("-")[1]) for p in Path(run_dir).glob("checkpoint-*"))


@pytest.fixture(scope="session")
def reference_runs(tiny_data, tmp_path_factory):
    """Uninterrupted runs that several tests compare against, made once and started side by side:
    "single": 1 process, length 32, 8 steps, a checkpoint every 2 steps (all inside epoch 0);
    "dual": the same under torchrun with 2 processes (accumulation 1 instead of 2, same global batch);
    "epochs": 1 process with 2 DataLoader workers, length 64, 14 steps (an epoch ends in step 11), save every 3.
    Returns {name: run dir}."""
    root = tmp_path_factory.mktemp("reference")
    specs = {
        "single": (pretrain_args(tiny_data, root / "single"), 1),
        "dual": (pretrain_args(tiny_data, root / "dual"), 2),
        "epochs": (pretrain_args(tiny_data, root / "epochs", **EPOCH_RUN), 1),
    }
    procs = {name: start(args, nproc) for name, (args, nproc) in specs.items()}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=SUBPROCESS_TIMEOUT)
        assert proc.returncode == 0, f"reference run {name} failed:\n{err[-4000:]}"
    return {name: root / name for name in specs}


# The run that crosses an epoch boundary (used by the exact-resume and the crash tests).
EPOCH_RUN = dict(max_seq_length=64, steps=14, save_every=3, num_workers=2)


def start(args: list[str], nproc: int = 1, fault: str | None = None) -> subprocess.Popen:
    if nproc == 1:
        cmd = [sys.executable, "-m", "litebert", *args]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
               "--max-restarts=0", "--monitor-interval=0.2", "-m", "litebert", *args]
    return subprocess.Popen(cmd, env=subprocess_env(fault), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


# --------------------------------------------------------------------------------------------- hangs


@contextlib.contextmanager
def time_limit(seconds: int):
    """Raise TimeoutError if the block runs longer than `seconds` (SIGALRM; main thread, POSIX)."""
    def on_alarm(signum, frame):
        raise TimeoutError(f"still running after {seconds}s: hung")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
