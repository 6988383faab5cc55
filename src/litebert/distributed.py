"""Data parallelism for the training loop: `Dist` (this process's rank, the world size, and the few collectives the
loop uses, which are no-ops in one process), `init_distributed` (from torchrun's environment), and starting a
multi-process (and multi-node) run safely: a fresh key-value store for every attempt, and checks, made together by
all ranks at start, that every rank sees the same run directory and the same token store.

Why a fresh store: torchrun hands its workers one TCP store that outlives restarts, and a restarted attempt that
reads a key of a dead one connects to a dead peer (pytorch/pytorch#135712). A prefix per
TORCHELASTIC_RESTART_COUNT is not enough across nodes: the agent of a node whose worker was merely stopped for the
new rendezvous round (its peer died) does not count a restart, the agent of the node whose worker died does, so the
two nodes' workers use different prefixes and wait for each other for ever. Here rank 0 of each attempt opens a
TCP store of its own (its process dies with the attempt, so its keys do too) and publishes its address and a nonce
through torchrun's store; another rank takes the address only once the store there answers with that nonce, so an
address left by an earlier attempt is skipped however the attempts were counted.

Why the checks: checkpoints are written by the global rank 0 only and read by every rank on resume, so the run
directory must be one directory for all ranks (shared storage); the token store may be a copy per node but must be
the same store. A rank that sees something else stops every rank with an error at start, naming the rank and its
host, where it would otherwise hang at the first collective or train on other data.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from collections.abc import Callable

import torch
import torch.distributed as dist

from litebert.device import pick_device
from litebert.errors import LitebertError, TrainingError

_ADDRESS_KEY = "litebert/attempt_store"  # in torchrun's store: "host port nonce" of this attempt's own store
_NONCE_KEY = "litebert/nonce"  # in the attempt's own store


@dataclass
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0

    def all_reduce(self, t: torch.Tensor, op=None) -> torch.Tensor:
        if self.world > 1:
            dist.all_reduce(t, op=op or dist.ReduceOp.SUM)
        return t

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's `obj` on every rank (picklable objects)."""
        if self.world == 1:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]


def init_distributed(device_name: str | None) -> tuple[Dist, torch.device]:
    """This process's place in the run (torchrun's RANK, WORLD_SIZE, LOCAL_RANK; one process without them) and its
    device; under torchrun the process group is opened on a store of this attempt's own (attempt_store)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    device = pick_device(device_name)
    if device.type == "cuda":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    if world > 1 and not dist.is_initialized():
        # torchrun's store outlives restarts and holds the keys of dead attempts: each attempt opens its own.
        store, rank, world = next(dist.rendezvous("env://"))
        store = attempt_store(store, rank, world)
        # On GPUs NCCL carries the CUDA tensors (DDP's gradients) and gloo the loop's small host tensors (the global
        # counts, the step's figures, the stop flags): NCCL alone refuses a CPU tensor.
        dist.init_process_group("cpu:gloo,cuda:nccl" if device.type == "cuda" else "gloo", store=store, rank=rank,
                                world_size=world)
    return Dist(rank, world, local_rank), device


def reachable_address(peer_host: str, peer_port: int) -> str:
    """This machine's address as seen from the route to peer_host (127.0.0.1 on loopback, the NIC's on a cluster)."""
    family = socket.getaddrinfo(peer_host, peer_port, type=socket.SOCK_DGRAM)[0][0]
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.connect((peer_host, peer_port))  # UDP: picks the route and the local address, sends nothing
        return s.getsockname()[0]


def attempt_store(base: dist.Store, rank: int, world: int, timeout: timedelta = timedelta(minutes=10)) -> dist.Store:
    """A store that only the processes of this attempt use (see the module docstring). `base` is the store of
    `dist.rendezvous("env://")`; rank 0 hosts the new one, the others wait for it up to `timeout`."""
    if rank == 0:
        host = reachable_address(os.environ.get("MASTER_ADDR", "127.0.0.1"), int(os.environ.get("MASTER_PORT", "0")))
        store = dist.TCPStore(host, 0, world, is_master=True, timeout=timeout, wait_for_workers=False)
        nonce = secrets.token_hex(16)
        store.set(_NONCE_KEY, nonce)
        base.set(_ADDRESS_KEY, f"{host} {store.port} {nonce}")
        return store
    deadline = time.monotonic() + timeout.total_seconds()
    while True:
        host, port, nonce = base.get(_ADDRESS_KEY).decode().split()
        try:
            # A plain connect first: a gone attempt's port refuses at once, where TCPStore would retry (and log)
            # for its whole timeout.
            socket.create_connection((host, int(port)), timeout=2).close()
            store = dist.TCPStore(host, int(port), world, is_master=False, timeout=timedelta(seconds=5))
            if store.get(_NONCE_KEY).decode() == nonce:
                return store
        except (RuntimeError, OSError):  # refused, silent, or another store: the address of a gone attempt
            pass
        if time.monotonic() > deadline:
            raise TrainingError(f"rank {rank}: rank 0 of this attempt never opened its store (last address seen "
                                f"{host}:{port}) within {timeout}; is rank 0 running?")
        time.sleep(0.2)


# ------------------------------------------------------------------------------------------- checks at start


def where() -> str:
    """'rank R on HOST' for messages."""
    return f"rank {os.environ.get('RANK', '0')} on {socket.gethostname()}"


def on_all_ranks(d: Dist, what: Callable[[], Any]) -> Any:
    """Run `what` on every rank and return this rank's result. If it raised a LitebertError on any rank, raise on
    every rank an error that quotes each failing rank's message, so no rank is left waiting for another at a
    collective (the hang a one-sided error would be). One process: `what()` as it is."""
    if d.world == 1:
        return what()
    result, error = None, None
    try:
        result = what()
    except LitebertError as e:
        error = f"{where()}: {e}"
    errors: list[Any] = [None] * d.world
    dist.all_gather_object(errors, error)
    failed = [e for e in errors if e]
    if failed:
        raise TrainingError("; ".join(failed))
    return result


def check_same_run_dir(d: Dist, run_dir: Path) -> None:
    """Every rank must see rank 0's run directory: rank 0 writes a token with a random nonce there, the others
    read it back. Call on all ranks after rank 0 has made the directory."""
    token = run_dir / ".shared-check"
    nonce = secrets.token_hex(16)
    if d.main:
        token.write_text(nonce)
    gathered: list[Any] = [nonce]
    if d.world > 1:
        dist.broadcast_object_list(gathered, src=0)

    def read_back() -> None:
        try:
            seen = token.read_text()
        except OSError as e:
            seen = f"nothing ({e.strerror or e})"
        if seen != gathered[0]:
            raise TrainingError(f"--out {run_dir} is not the run directory rank 0 writes to (the token rank 0 "
                                f"wrote there reads {seen!r} here): the run directory must be on storage shared "
                                "by all nodes, at the same path")

    try:
        on_all_ranks(d, read_back)
    finally:
        d.barrier()
        if d.main:
            token.unlink(missing_ok=True)


def check_same_store(d: Dist, store_path: Path, fingerprint: str) -> None:
    """Every rank must read the same tokens: their stores' content fingerprints (TokenStore.content_fingerprint:
    the shards' checksums and counts, and the tokenizer) must match rank 0's. A copy per node is fine, and so is a
    store each node built from the same text with the same settings."""
    if d.world == 1:
        return
    prints: list[Any] = [None] * d.world
    dist.all_gather_object(prints, fingerprint)
    odd = [r for r, p in enumerate(prints) if p != prints[0]]
    if odd:
        raise TrainingError(f"--data {store_path}: rank(s) {', '.join(map(str, odd))} read another token store "
                            "than rank 0 (its shards differ): every node must see the same store, shared, copied, "
                            "or built from the same text with the same settings")
