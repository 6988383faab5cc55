"""Digests of every pretraining batch of whole epochs, to prove a data-pipeline change leaves the batches unchanged.

    python benchmarks/data_digest.py --store STORE [--store STORE2 ...] --epochs 3 --out digests.json
    diff <(PYTHONPATH=OLD/src python benchmarks/data_digest.py ...) <(PYTHONPATH=NEW/src python ...)

For each store and each dataset setting below, for epochs 0..E-1: the epoch's order from ResumableSampler (as
`pretrain`'s BatchStream makes it: shuffled, drop_last, rank r of --world), micro-batches of 32 through a DataLoader,
collated and padded to max_seq_length; one sha256 over all tensors of all batches of the epoch, plus the number of
examples. Two runs agree on a setting only if every token, mask, label and the order are bit-identical.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from functools import partial
from pathlib import Path

SETTINGS = {  # name -> PretrainingDataset keyword arguments (the rest default)
    "sop": {},
    "sop-seq64-seed7": {"max_seq_length": 64, "seed": 7},
    "sop-split": {"single_sentence": "split"},
    "sop-skip": {"single_sentence": "skip"},
    "nsp-document-draw": {"objective": "nsp", "short_seq_draw": "document"},
    "none-token-units": {"objective": "none", "mask_unit": "token", "short_seq_prob": 0.3},
}


def epoch_digest(dataset, epoch: int, rank: int, world: int, micro_batch: int) -> tuple[str, int]:
    import torch

    from litebert.data.pretraining import ResumableSampler, collate_pretraining

    dataset.set_epoch(epoch)
    sampler = ResumableSampler(len(dataset), rank=rank, world_size=world, seed=dataset.seed, shuffle=True,
                               drop_last=True, epoch=epoch)
    loader = torch.utils.data.DataLoader(dataset, batch_size=micro_batch, sampler=sampler, drop_last=True,
                                         collate_fn=partial(collate_pretraining, pad_to=dataset.max_seq_length,
                                                            pad_id=dataset.pad_id))
    h, examples = hashlib.sha256(), 0
    for batch in loader:
        for key in sorted(batch):
            h.update(key.encode())
            h.update(batch[key].numpy().tobytes())
        examples += len(batch["sop_labels"])
    return h.hexdigest(), examples


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--store", type=Path, action="append", required=True, help="a token store (repeatable)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--settings", default=",".join(SETTINGS), help="comma-separated names of SETTINGS")
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--world", type=int, default=1)
    p.add_argument("--micro-batch-size", type=int, default=32)
    p.add_argument("--out", type=Path, default=None, help="write the JSON here too (default: stdout only)")
    p.add_argument("--chunk-block", type=int, default=None,
                   help="sentences per block of the epoch's chunk index (code that builds it in blocks; small "
                        "values make many blocks on a small store)")
    args = p.parse_args(argv)

    import torch

    from litebert.data import pretraining
    from litebert.data.pretraining import PretrainingDataset

    if args.chunk_block is not None:
        if not hasattr(pretraining, "CHUNK_BLOCK_SENTENCES"):
            raise SystemExit("--chunk-block: this code builds the chunk index in one piece")
        pretraining.CHUNK_BLOCK_SENTENCES = args.chunk_block

    torch.set_num_threads(1)
    result = {}
    for store in args.store:
        for name in args.settings.split(","):
            ds = PretrainingDataset(store, **SETTINGS[name])
            for epoch in range(args.epochs):
                digest, examples = epoch_digest(ds, epoch, args.rank, args.world, args.micro_batch_size)
                result[f"{store.name}/{name}/epoch{epoch}"] = {"examples": examples, "sha256": digest}
                print(f"{store.name}/{name}/epoch{epoch}: {examples} examples {digest[:16]}", file=sys.stderr)
    text = json.dumps(result, indent=1, sort_keys=True)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
