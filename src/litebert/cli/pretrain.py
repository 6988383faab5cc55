"""`litebert pretrain` and `litebert plot`."""

from litebert.cli._common import (add_alias, add_command, add_config_option, add_dataclass_args, dataclass_from_args,
                                  print_config)


def register(sub) -> None:
    from litebert.pretrain import PretrainConfig

    p = add_command(sub, "pretrain", "pretrain ALBERT (MLM + SOP, LAMB) on a token store; torchrun-ready", """
litebert pretrain --model albert-base-v2 --data store/ --out runs/base --batch-size 4096 \\
    --micro-batch-size 64 --steps 125000 --max-time 12h
litebert pretrain --config runs/base/run.json --steps 150000     # the same run, longer""")
    add_config_option(p)
    add_dataclass_args(p, PretrainConfig, required=("data",), flags={"num_workers": "--workers"})
    p.add_argument("--warmup-ratio", type=float, metavar="R",
                   help="warmup as a share of --steps, instead of --warmup-steps (default: 0.025)")
    add_alias(p, "--num-workers", "num_workers", type=int)
    p.config_ignore = ()
    p.set_defaults(func=run_pretrain)

    q = add_command(sub, "plot", "plot the curves of a run dir's metrics.jsonl into a PNG",
                    "litebert plot runs/base            # writes runs/base/curves.png")
    q.add_argument("run_dir", metavar="RUN_DIR", help="a pretraining or fine-tuning run directory")
    q.add_argument("--out", help="PNG path (default: RUN_DIR/curves.png)")
    q.set_defaults(func=run_plot)


def run_pretrain(args) -> int:
    from litebert.errors import ConfigError
    from litebert.pretrain import PretrainConfig, pretrain

    if args.warmup_ratio is not None:
        if args.warmup_steps is not None:
            raise ConfigError("give --warmup-steps or --warmup-ratio, not both")
        args.warmup_steps = round(args.warmup_ratio * args.steps)
    cfg = dataclass_from_args(PretrainConfig, args)
    if args.print_config:
        print_config(cfg)
        return 0
    pretrain(cfg)
    return 0


def run_plot(args) -> int:
    from litebert.plot import plot_run

    print(plot_run(args.run_dir, args.out))
    return 0
