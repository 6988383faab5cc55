"""`litebert serve`: the HTTP API (litebert.serving) over a model, run or export directory."""


def register(sub) -> None:
    from litebert.cli._common import add_command, add_dataclass_args
    from litebert.serving import ServeConfig

    p = add_command(sub, "serve", "serve a model directory over HTTP (JSON API; needs litebert[serve])",
                    "litebert serve --model runs/sst2 --port 8080 --workers 2")
    add_dataclass_args(p, ServeConfig, required=("model",))
    p.set_defaults(func=run_serve)


def run_serve(args) -> int:
    from litebert.cli._common import dataclass_from_args
    from litebert.serving import ServeConfig, serve

    serve(dataclass_from_args(ServeConfig, args))
    return 0
