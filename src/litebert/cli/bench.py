"""`litebert bench`: a quick speed check of this machine, ours vs transformers (when installed), side by side."""


def register(sub) -> None:
    import argparse

    from litebert.cli._common import add_command

    p = add_command(sub, "bench", "quick speed check: a pretraining step and batch-1 inference, ours vs "
                                  "transformers (when installed), interleaved", "litebert bench --threads 4")
    p.add_argument("--model", default="albert-base", help="preset name or config JSON (default: albert-base)")
    p.add_argument("--batch", type=int, default=8, help="pretraining batch (default: 8)")
    p.add_argument("--seq", type=int, default=128, help="sequence length (default: 128)")
    p.add_argument("--repeats", type=int, default=2, help="interleaved turns per side (default: 2)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    p.add_argument("--precision", default="auto", choices=("auto", "bf16", "fp32", "fp16"),
                   help="auto: bf16 where the hardware has fast bf16, else fp32 (default: auto)")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=False,
                   help="torch.compile our training step (adds about a minute of compilation; default: off)")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when present, else cpu)")
    p.add_argument("--no-reference", dest="reference", action="store_false",
                   help="skip transformers even when it is installed (default: run it when installed)")
    p.set_defaults(func=run)


def run(args) -> int:
    import sys

    import torch

    from litebert.lab.bench import quick_bench
    from litebert.config import AlbertConfig
    from litebert.device import pick_device
    from litebert.errors import ConfigError

    if min(args.batch, args.seq, args.repeats) < 1 or (args.threads is not None and args.threads < 1):
        raise ConfigError("--batch, --seq, --repeats and --threads must be >= 1")
    if args.seq < 8:
        raise ConfigError(f"--seq {args.seq}: must be >= 8")
    if args.threads:
        torch.set_num_threads(args.threads)
    config = AlbertConfig.load(args.model)
    if args.seq > config.max_position_embeddings:
        raise ConfigError(f"--seq {args.seq} exceeds the model's max_position_embeddings "
                          f"{config.max_position_embeddings}")
    print(quick_bench(config, name=args.model, batch=args.batch, seq_len=args.seq, repeats=args.repeats,
                      precision=args.precision, compile=args.compile, device=pick_device(args.device),
                      reference=args.reference, log=lambda m: print(m, file=sys.stderr, flush=True)))
    return 0
