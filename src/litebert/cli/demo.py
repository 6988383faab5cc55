"""`litebert demo`: the end-to-end pipeline on text shipped with Python, offline, in a few minutes."""


from litebert.cli._common import add_command


def register(sub) -> None:
    p = add_command(sub, "demo", "train a tokenizer, build a store, pretrain albert-tiny, evaluate, fill-mask",
                    "litebert demo --out runs/demo --minutes 5")
    p.add_argument("--out", default="runs/demo", help="run directory (default: runs/demo)")
    p.add_argument("--minutes", type=float, default=5.0,
                   help="pretraining wall-clock budget: the learning-rate schedule follows it and the run stops there, "
                        "annealed, however busy the machine (default: 5)")
    p.add_argument("--steps", type=int, help="pretraining steps (default: as many as --minutes allows)")
    p.add_argument("--vocab-size", type=int, default=8000, help="SentencePiece vocabulary size (default: 8000)")
    p.add_argument("--seed", type=int, default=0, help="seed of everything (default: 0)")
    p.add_argument("--threads", type=int, help="torch threads (default: whichever of torch's choice, one per core, "
                                                "and 1 trains faster in a pace probe at the start; on a busy machine 1 "
                                                "can be several times faster than threads that wait for each other)")
    p.set_defaults(func=run)


def run(args) -> int:
    from litebert.demo import run_demo

    run_demo(args.out, minutes=args.minutes, steps=args.steps, vocab_size=args.vocab_size, seed=args.seed,
             threads=args.threads)
    return 0
