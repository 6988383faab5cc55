"""`litebert serve`: the HTTP API (litebert.serving) over a model, run or export directory."""


def register(sub) -> None:
    from litebert.cli._common import add_dataclass_args
    from litebert.serving import ServeConfig

    p = sub.add_parser("serve", help="serve a model directory over HTTP (JSON API; needs litebert[serve])")
    add_dataclass_args(p, ServeConfig, required=("model",), help={
        "model": "model directory, fine-tuning run directory, or export-onnx directory (its task is served)",
        "workers": "server processes, each with its own copy of the model (default: 1)",
        "backend": "fp32 | bf16 | onnx (default: fp32)",
        "batching": "dynamic batching of concurrent requests (default: on; --no-batching for one call each)",
        "max_batch_size": "most items per model call (default: 32)",
        "max_wait_ms": "how long a batch's first request waits for more (default: 5)",
        "timeout_s": "per-request limit, queueing included; past it the answer is a 504 (default: 30)",
        "threads": "intra-op threads for torch / onnxruntime (default: theirs)"})
    p.set_defaults(func=run_serve)


def run_serve(args) -> int:
    from litebert.cli._common import dataclass_from_args
    from litebert.serving import ServeConfig, serve

    serve(dataclass_from_args(ServeConfig, args))
    return 0
