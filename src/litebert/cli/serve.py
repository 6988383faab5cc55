"""`litebert serve`: the HTTP API (litebert.serving) over a model, run or export directory."""


def register(sub) -> None:
    from litebert.cli._common import add_command, add_dataclass_args
    from litebert.serving import ServeConfig

    p = add_command(sub, "serve", "serve a model directory over HTTP (JSON API; needs litebert[serve])",
                    "litebert serve --model runs/sst2 --port 8080 --workers 2")
    add_dataclass_args(p, ServeConfig, required=("model",), help={
        "model": "model directory, fine-tuning run directory, or export-onnx directory (its task is served)",
        "host": "address to listen on (default: 127.0.0.1, this machine only)",
        "port": "port to listen on (default: 8080)",
        "onnx_file": "the .onnx file for --backend onnx (default: the one in the export directory)",
        "max_items": "most texts per request (default: 64)",
        "max_text_chars": "longest text field, in characters (default: 20000)",
        "max_request_bytes": "largest request body (default: 1000000)",
        "graceful_s": "how long SIGTERM waits for in-flight requests (default: 30)",
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
