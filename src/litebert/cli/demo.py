"""`litebert demo`: the end-to-end pipeline on text shipped with Python, offline, in a few minutes."""


def register(sub) -> None:
    p = sub.add_parser("demo", help="train a tokenizer, build a store, pretrain albert-tiny, evaluate, fill-mask")
    p.add_argument("--out", default="runs/demo")
    p.add_argument("--minutes", type=float, default=5.0, help="pretraining wall-clock budget (sets the steps)")
    p.add_argument("--steps", type=int, help="pretraining steps (overrides --minutes)")
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=run)


def run(args) -> int:
    from litebert.demo import run_demo

    run_demo(args.out, minutes=args.minutes, steps=args.steps, vocab_size=args.vocab_size, seed=args.seed)
    return 0
