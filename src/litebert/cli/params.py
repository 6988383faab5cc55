"""`litebert params`: the paper's parameter tables from our own configs."""


from litebert.cli._common import add_command


def register(sub) -> None:
    p = add_command(sub, "params", "print parameter counts of the released configs and the paper's ablations",
                    "litebert params\nlitebert params --model albert-base-v2")
    p.add_argument("--model", help="a preset name or config JSON: print just its count (default: all tables)")
    p.set_defaults(func=run)


def run(args) -> int:
    from litebert.params import count_parameters, format_tables

    if args.model:
        from litebert.config import AlbertConfig

        config = AlbertConfig.load(args.model)
        print(f"{args.model}: {count_parameters(config):,} parameters (encoder + pooler)")
        return 0
    print(format_tables())
    return 0
