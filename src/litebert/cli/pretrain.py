"""`litebert pretrain` and `litebert plot`."""

from litebert.cli._common import add_dataclass_args, dataclass_from_args


def register(sub) -> None:
    from litebert.pretrain import PretrainConfig

    p = sub.add_parser("pretrain", help="pretrain ALBERT (MLM + SOP, LAMB) on a token store; torchrun-ready")
    add_dataclass_args(p, PretrainConfig, required=("data",), help={
        "model": "preset name, config JSON or model directory (default: albert-tiny)",
        "data": "token store from `litebert data build`",
        "phases": "sequence-length schedule, e.g. 0.9:128,0.1:512",
        "precision": "auto (bf16 where the CPU/GPU has fast bf16) | fp32 | bf16 | fp16 (CUDA)",
        "resume": "auto (newest complete checkpoint in --out) | none | a checkpoint dir",
    })
    p.set_defaults(func=run_pretrain)

    q = sub.add_parser("plot", help="plot the curves of a run dir's metrics.jsonl into a PNG")
    q.add_argument("run_dir")
    q.add_argument("--out", help="PNG path (default: RUN_DIR/curves.png)")
    q.set_defaults(func=run_plot)


def run_pretrain(args) -> int:
    from litebert.pretrain import PretrainConfig, pretrain

    pretrain(dataclass_from_args(PretrainConfig, args))
    return 0


def run_plot(args) -> int:
    from litebert.plot import plot_run

    print(plot_run(args.run_dir, args.out))
    return 0
