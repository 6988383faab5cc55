"""Helpers of the reliability suite: the tiny setup, running `litebert pretrain` in a subprocess (plain or under
torchrun), and reading what a run left behind. Fixtures built on these live in conftest.py.

Every run is CPU-only and tiny (2 layers of width 32, sequences of 32-64 tokens, 8-14 steps): what costs time
is starting Python and torch, so runs several tests compare against are made once (conftest.reference_runs).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

TINY_MODEL = {"format": "litebert", "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
              "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 128}
STORE_DOCUMENTS = 100  # ~237 examples at length 32 (14 steps of 16 in epoch 0), ~168 at length 64 (10.5 steps)
SUBPROCESS_TIMEOUT = 300  # seconds; a run that takes longer has hung
# The run that crosses an epoch boundary, with DataLoader workers (exact resume and crash tests).
EPOCH_RUN = dict(max_seq_length=64, steps=14, save_every=3, num_workers=2)


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


def tiny_setup(root: Path, vocab_size: int = 500, documents: int = STORE_DOCUMENTS) -> tuple[Path, Path, Path]:
    """(store, tokenizer, model config) in `root`: a SentencePiece vocab and a token store of `documents` pydoc
    documents, and the tiny model sized to that vocab: the `tiny` argument of config_args."""
    from litebert.data.store_build import build_store
    from litebert.tokenizer_train import train_sentencepiece

    root.mkdir(parents=True, exist_ok=True)
    write_pydoc_corpus(root / "corpus.txt", documents)
    train_sentencepiece([root / "corpus.txt"], root / "tokenizer", vocab_size=vocab_size)
    store = build_store([root / "corpus.txt"], root / "tokenizer", root / "store", validation_fraction=0.05)
    (root / "model.json").write_text(json.dumps({**TINY_MODEL, "vocab_size": store.vocab_size}))
    return root / "store", root / "tokenizer", root / "model.json"


def config_args(tiny, out: Path, **overrides) -> dict:
    """PretrainConfig fields of the tiny setup; `tiny` is the tiny_data fixture (store, tokenizer, model)."""
    store, tokenizer, model = tiny
    opts = dict(model=str(model), data=str(store), tokenizer=str(tokenizer), out=str(out), max_seq_length=32,
                max_predictions_per_seq=5, batch_size=16, micro_batch_size=8, steps=8, warmup_steps=1, lr=2e-3,
                save_every=2, keep=50, log_every=1, eval_batches=1, precision="fp32", threads=1, seed=0)
    opts.update(overrides)
    return opts


def pretrain_args(tiny, out: Path, **overrides) -> list[str]:
    """`litebert pretrain` arguments for the tiny setup; overrides use the config field names."""
    return ["pretrain"] + [x for k, v in config_args(tiny, out, **overrides).items()
                           for x in (f"--{k.replace('_', '-')}", str(v))]


def command(args: list[str], nproc: int = 1, max_restarts: int = 0, program: tuple[str, ...] = ("-m", "litebert"),
            node: tuple[int, int, str] | None = None) -> list[str]:
    """`python -m litebert ARGS`, or the same under torchrun with `nproc` CPU processes (gloo). `program` may
    name a script instead of the litebert module. `node` = (node rank, node count, host:port): this torchrun is
    one agent of a multi-node job, meeting the others at a c10d rendezvous on host:port (node 0 hosts it)."""
    if nproc == 1 and node is None:
        return [sys.executable, *program, *args]
    where = ["--standalone"]
    if node is not None:
        node_rank, nnodes, endpoint = node
        # join_timeout: an agent whose peer never comes gives up within the test's time limit (default 600 s).
        where = [f"--nnodes={nnodes}", f"--node-rank={node_rank}", "--rdzv-backend=c10d",
                 f"--rdzv-endpoint={endpoint}", "--rdzv-id=litebert-test",
                 f"--rdzv-conf=is_host={int(node_rank == 0)},join_timeout=120"]
    # --tee=2: each worker's stderr line comes prefixed with "[default<local rank>]:", so tests can tell ranks apart.
    return [sys.executable, "-m", "torch.distributed.run", *where, f"--nproc-per-node={nproc}",
            f"--max-restarts={max_restarts}", "--monitor-interval=0.2", "--tee=2", *program, *args]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the OS picks it)."""
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def subprocess_env(fault: str | None = None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITEBERT_FAULT")}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    if fault:
        env["LITEBERT_FAULT"] = fault
    env.update(extra)
    return env


def start(args: list[str], nproc: int = 1, max_restarts: int = 0, fault: str | None = None,
          program: tuple[str, ...] = ("-m", "litebert"), node: tuple[int, int, str] | None = None,
          **env: str) -> subprocess.Popen:
    tag = uuid.uuid4().hex  # marks this process and every worker it starts, to clean up after a hang
    proc = subprocess.Popen(command(args, nproc, max_restarts, program, node),
                            env=subprocess_env(fault, LITEBERT_TEST_TAG=tag, **env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.tag = tag
    return proc


def finish(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    try:
        out, err = proc.communicate(timeout=SUBPROCESS_TIMEOUT)
    except subprocess.TimeoutExpired:
        kill_tagged(proc.tag)  # torchrun workers live in sessions of their own: the agent's death leaves them
        out, err = proc.communicate()
        raise AssertionError(f"{proc.args} hung (> {SUBPROCESS_TIMEOUT}s):\n{err[-3000:]}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def kill_tagged(tag: str) -> None:
    """SIGKILL the processes this suite started with LITEBERT_TEST_TAG=tag (found by their environment)."""
    needle = f"LITEBERT_TEST_TAG={tag}".encode()
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                os.kill(int(entry.name), signal.SIGKILL)
        except (OSError, ValueError):
            continue


def run_litebert(args: list[str], nproc: int = 1, max_restarts: int = 0, fault: str | None = None,
                 **env: str) -> subprocess.CompletedProcess:
    return finish(start(args, nproc, max_restarts, fault, **env))


def read_metrics(run_dir: Path) -> dict[int, dict]:
    """Training rows of metrics.jsonl by step (eval rows left out); a step logged twice is an error."""
    rows = {}
    for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if "loss" in rec:
            assert rec["step"] not in rows, f"step {rec['step']} logged twice in {run_dir}"
            rows[rec["step"]] = rec
    return rows


def losses(run_dir: Path, key: str = "loss") -> list[float]:
    """Per-step values of `key`, checking that steps 1..N are all there."""
    rows = read_metrics(run_dir)
    assert sorted(rows) == list(range(1, len(rows) + 1)), f"{run_dir}: steps {sorted(rows)}"
    return [rows[s][key] for s in sorted(rows)]


def read_weights(ckpt: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(Path(ckpt) / "model.safetensors"))


def assert_same_weights(a: Path, b: Path, atol: float = 0.0) -> None:
    """Every tensor of a's model.safetensors equals b's: bit for bit, or within `atol`."""
    import torch

    wa, wb = read_weights(a), read_weights(b)
    assert wa.keys() == wb.keys()
    if atol == 0.0:
        different = [k for k in wa if not torch.equal(wa[k], wb[k])]
    else:
        different = [k for k in wa if not torch.allclose(wa[k], wb[k], rtol=0.0, atol=atol)]
    assert not different, f"{a} and {b} differ in {different}"


def checkpoint_steps(run_dir: Path) -> list[int]:
    return sorted(int(p.name.split("-")[1]) for p in Path(run_dir).glob("checkpoint-*"))


def leftovers(run_dir: Path) -> list[Path]:
    """Temp dirs of interrupted saves (.tmp-, .old-, .trash-checkpoint-*)."""
    return sorted(p for p in Path(run_dir).iterdir() if p.name.startswith((".tmp-", ".old-", ".trash-")))


# ------------------------------------------------------------------------------------------ real faults


class SmallDisk:
    """A tmpfs of its own, for real faults: fill it (ENOSPC from the real writers), remount it read-only (EROFS).
    Mounting needs root (CI runs as root); `mount` skips the test, with the reason, where it is not allowed."""

    def __init__(self, root: Path):
        self.root, self.mounts = root, []

    def mount(self, size: int = 64 << 20, name: str = "disk") -> Path:
        import pytest

        point = self.root / name
        point.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)],
                              capture_output=True, text=True)
        if done.returncode:
            pytest.skip(f"cannot mount a tmpfs for a real full or read-only disk ({done.stderr.strip()}); these "
                        "tests need root (CI runs as root)")
        self.mounts.append(point)
        return point

    @staticmethod
    def remount(point: Path, option: str) -> None:
        subprocess.run(["mount", "-o", f"remount,{option}", str(point)], check=True)

    @staticmethod
    def free(point: Path) -> int:
        st = os.statvfs(point)
        return st.f_bavail * st.f_frsize

    @staticmethod
    def fill(point: Path, leave: int) -> Path:
        """Write a filler file so that about `leave` bytes (rounded down to pages) stay free."""
        filler = point / "filler"
        size = SmallDisk.free(point) - leave
        with open(filler, "wb") as f:
            while size > 0:
                size -= f.write(b"\0" * min(size, 1 << 20))
        return filler

    def unmount_all(self) -> None:
        for point in reversed(self.mounts):
            subprocess.run(["umount", "-l", str(point)], capture_output=True)


def pages(*sizes: int, page: int = 4096) -> int:
    """Bytes a tmpfs charges for files of these sizes (whole pages)."""
    return sum(-(-size // page) * page for size in sizes)


def wait_stopped(proc: subprocess.Popen, timeout: float = SUBPROCESS_TIMEOUT) -> None:
    """Wait until `proc` has stopped itself (LITEBERT_FAULT=stop:STEP sends it SIGSTOP)."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = proc.stderr.read()[-3000:]
            raise AssertionError(f"{proc.args} exited ({proc.returncode}) before stopping:\n{tail}")
        state = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state == "T":
            return
        time.sleep(0.05)
    kill_tagged(proc.tag)
    raise AssertionError(f"{proc.args} never stopped")


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
