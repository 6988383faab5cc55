"""What checking a checkpoint's sha256 costs when pretraining resumes (docs/reliability.md, promise 1).

Saves a pretraining checkpoint of a randomly initialised model (default albert-base) with LAMB state (two moments
per weight, as after any step) into a temporary run dir, then times, alternating, with the files in the page cache:

    unchecked   read the training state and the weights (torch.load of the file, safetensors load_file), as
                resume did before it checked hashes
    checked     `litebert.runlife.read_checkpoint`: every file read once and hashed, the state and the weights
                loaded from the checked bytes (what resume does now)

    python benchmarks/bench_resume_verify.py --model albert-base --repeats 5
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

from litebert.checkpoint import load_state, save_checkpoint, save_state
from litebert.config import AlbertConfig
from litebert.lab.bench import host_line
from litebert.model import AlbertForPreTraining
from litebert.optim import build_optimizer
from litebert.pretrained import model_files, read_model_state
from litebert.runlife import read_checkpoint


def make_checkpoint(run_dir: Path, preset: str) -> Path:
    torch.manual_seed(0)
    model = AlbertForPreTraining(AlbertConfig.from_preset(preset))
    optimizer = build_optimizer(model, "lamb", lr=1e-3, weight_decay=0.01)
    for p in model.parameters():  # one step with random gradients: the moments exist and are not zero
        p.grad = torch.randn_like(p) * 1e-3
    optimizer.step()
    state = {"step": 1, "optimizer": optimizer.state_dict()}
    writers = dict(model_files(model))
    writers["trainer_state.pt"] = lambda p: save_state(p, state)
    return save_checkpoint(run_dir, 1, writers)


def unchecked(ckpt: Path) -> None:
    load_state(ckpt / "trainer_state.pt")
    read_model_state(ckpt)


def checked(ckpt: Path) -> None:
    read_checkpoint(ckpt)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="albert-base")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="litebert-bench-") as tmp:
        ckpt = make_checkpoint(Path(tmp), args.model)
        size = sum(f.stat().st_size for f in ckpt.iterdir())
        times: dict[str, list[float]] = {"unchecked": [], "checked": []}
        cpu: dict[str, list[float]] = {"unchecked": [], "checked": []}
        unchecked(ckpt)  # warm the page cache and the imports
        for _ in range(args.repeats):
            for name, fn in (("unchecked", unchecked), ("checked", checked)):
                t0, c0 = time.perf_counter(), time.process_time()
                fn(ckpt)
                times[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
    print(f"host: {host_line()}")
    print(f"{args.model} checkpoint: {size / 1e6:.1f} MB, {args.repeats} turns each, medians, {args.threads} thread(s)")
    # CPU time too: on a shared machine the wall clock also counts the time other processes had the cores
    for label, table in (("wall clock", times), ("CPU time", cpu)):
        base, with_hash = (statistics.median(table[k]) for k in ("unchecked", "checked"))
        print(f"  {label}: load without hash check {base:.3f} s, with it {with_hash:.3f} s: the check costs "
              f"{with_hash - base:+.3f} s ({(with_hash - base) / base:+.0%} of the load)")


if __name__ == "__main__":
    main()
