"""`litebert params`: the paper's parameter tables from our own configs."""


def register(sub) -> None:
    p = sub.add_parser("params", help="print parameter counts of the released configs and the paper's ablations")
    p.add_argument("--model", help="a preset name or config JSON: print just its count")
    p.set_defaults(func=run)


def run(args) -> int:
    from litebert.params import count_parameters, format_tables

    if args.model:
        from litebert.cli._common import load_config

        config = load_config(args.model)
        print(f"{args.model}: {count_parameters(config):,} parameters (encoder + pooler)")
        return 0
    print(format_tables())
    return 0
