"""`litebert ablate SUITE --corpus PATHS --out DIR`: the paper's design comparisons at small scale."""


from litebert.cli._common import add_command


def register(sub) -> None:
    p = add_command(sub, "ablate", "reproduce the paper's ablations (embedding, sharing, objective, dropout, scale)",
                    "litebert ablate objective --corpus corpus/ --out runs/study --budget-minutes 10")
    p.add_argument("suite", choices=("embedding", "sharing", "objective", "dropout", "scale"),
                   help="which comparison")
    p.add_argument("--corpus", nargs="+", default=[],
                   help="text files/folders/globs to pretrain on (default: none; every suite but scale needs it)")
    p.add_argument("--out", required=True, help="study directory (finished runs in it are reused)")
    p.add_argument("--budget-minutes", type=float, default=4.0, help="pretraining minutes for the base variant; "
                   "every variant then runs the same number of steps (default: 4)")
    p.add_argument("--steps", type=int, help="steps per variant (default: from --budget-minutes)")
    p.add_argument("--seeds", type=int, default=3, help="downstream fine-tuning seeds (default: 3)")
    p.add_argument("--vocab-size", type=int, default=8000, help="SentencePiece vocabulary size (default: 8000)")
    p.add_argument("--max-seq-length", type=int, default=128, help="pretraining tokens per example (default: 128)")
    p.add_argument("--batch-size", type=int, default=32, help="pretraining batch per step (default: 32)")
    p.add_argument("--lr", type=float, default=2e-3, help="pretraining peak learning rate (default: 0.002)")
    p.add_argument("--glue", help="GLUE folder holding SST-2 (default: the shared data)")
    p.add_argument("--finetune-train-examples", type=int, default=2000,
                   help="SST-2 training sentences per downstream run (default: 2000)")
    p.add_argument("--finetune-steps", type=int, default=300, help="steps per downstream run (default: 300)")
    p.add_argument("--finetune-lr", type=float, default=2e-4, help="downstream learning rate (default: 0.0002)")
    p.add_argument("--precision", default="auto", choices=("auto", "fp32", "bf16", "fp16"),
                   help="auto: bf16 where the hardware has fast bf16, else fp32 (default: auto)")
    p.add_argument("--hidden-size", type=int, default=256,
                   help="H of the base model (heads of 64, FFN 4H; default: 256)")
    p.add_argument("--layers", type=int, default=6, help="layers of the base model (default: 6)")
    p.add_argument("--threads", type=int, help="torch threads per run (default: torch's choice)")
    p.add_argument("--pretrain-seed", type=int, default=0, help="pretraining seed of every variant; a second "
                   "seed in the same DIR writes DIR/SUITE-seedS, the seed-to-seed spread")
    p.set_defaults(func=run)


def run(args) -> int:
    from litebert.lab.ablate import AblateConfig, ablate
    from litebert.errors import ConfigError

    if args.suite != "scale" and not args.corpus:
        raise ConfigError(f"suite {args.suite} pretrains: give --corpus PATHS")
    cfg = AblateConfig(suite=args.suite, corpus=args.corpus, out=args.out, steps=args.steps,
                       budget_minutes=args.budget_minutes, seeds=args.seeds, vocab_size=args.vocab_size,
                       max_seq_length=args.max_seq_length, batch_size=args.batch_size, lr=args.lr, glue=args.glue,
                       finetune_train_examples=args.finetune_train_examples, finetune_steps=args.finetune_steps,
                       finetune_lr=args.finetune_lr,
                       precision=args.precision, hidden_size=args.hidden_size, num_layers=args.layers,
                       threads=args.threads, pretrain_seed=args.pretrain_seed)
    print(ablate(cfg))
    return 0
