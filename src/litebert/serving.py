"""`litebert serve`: a JSON HTTP API over a model directory (FastAPI on uvicorn; `pip install litebert[serve]`).

Why FastAPI + uvicorn: both are widely used and actively maintained; FastAPI validates request bodies with
pydantic, so a bad field comes back as a 422 that names it, and it publishes an OpenAPI schema (/openapi.json,
/docs) built from the same models; uvicorn gives the graceful shutdown we need (on SIGTERM it stops accepting,
lets in-flight requests finish, then runs our shutdown, which drains the batch queue) and multi-process
workers. LitServe (itself built on FastAPI + uvicorn) would add its own batching and process model in between;
ours is a small loop (`litebert.batching`) we can test and measure, over the same pipeline the Python API uses.

Endpoints:
    POST /predict   {"inputs": [item, ...], "parameters": {...}} -> {"outputs": [result, ...]}
                    items and results as `litebert.pipeline` for the directory's task
    POST /embed     {"inputs": [{"text": ...}], "parameters": {"pooling": "mean"|"cls", "normalize": bool}}
                    (PyTorch backends: the task model's own encoder)
    GET  /health    200 while the process runs
    GET  /ready     200 when the model is loaded and warmed up, 503 before that and while draining
    GET  /info      task, labels, limits, batching settings and counters
    /v2/...         the Open Inference Protocol (KServe v2 / Triton HTTP): health, metadata, infer (`serving_v2`)

Errors are JSON {"error": ..., "fields": [{"field": "inputs.0.text", "message": ...}]}: 422 for a bad body (missing
or wrong-typed field, text too long, empty list, a field of another task), 413 for a body over the size limit,
504 past the per-request timeout, 500 when the model fails (the server keeps serving), 503 past --max-connections
(counted by uvicorn, answered here: `serving_connections`).

A client that leaves while its request waits for the model is noticed (its connection's `http.disconnect`): the
request is cancelled, the batcher drops its items before they reach the model, and /info counts it.
"""

import asyncio
import contextlib
import json
import math
import os
import sys
import time
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from typing import Annotated, Literal

from litebert.config import ABOVE_ZERO, NON_NEGATIVE, POSITIVE, check_options, closed, option
from litebert.errors import ConfigError, LitebertError

# Auto lanes stop here: each lane holds a batch's activations (albert-xxlarge at 32 x 512 tokens: GBs).
MAX_AUTO_LANES = 4
ENV_CONFIG = "LITEBERT_SERVE_CONFIG"  # how --workers N passes the settings to each worker process


@dataclass
class ServeConfig:
    model: str = option(help="model directory, fine-tuning run directory, or export-onnx directory (its task is "
                             "served)")
    host: str = option("127.0.0.1", "address to listen on (default: 127.0.0.1, this machine only)")
    port: int = option(8080, "port to listen on", check=closed(1, 65535))
    workers: int = option(1, "server processes, each with its own copy of the model", check=POSITIVE)
    backend: str = option("auto", "auto | fp32 | bf16 | onnx (auto: bf16 where a start-up probe measures it faster "
                                  "on this host, else fp32)")
    truncation: str = option("longest_first", "longest_first (cut, and say how many tokens in each result) or "
                                              "error (refuse a text over the model's max_seq_length)",
                             choices=("longest_first", "error"))
    onnx_file: str | None = option(None, "the .onnx file for --backend onnx (default: the one in the export "
                                         "directory)")
    batching: bool = option(True, "dynamic batching of concurrent requests (default: on; --no-batching for one "
                                  "call each)")
    max_batch_size: int = option(32, "most items per model call", check=POSITIVE)
    max_wait_ms: float = option(5.0, "how long a batch's first request waits for more, when more are expected "
                                     "(as many as came with the last batch; default: 5)", check=closed(0, 60_000))
    wait_when_idle: bool = option(False, "a lone request, too, waits the full --max-wait-ms for company (default: "
                                         "off: it goes at once)")
    max_items: int = option(64, "most texts per request", check=POSITIVE)
    max_text_chars: int = option(20_000, "longest text field, in characters", check=POSITIVE)
    max_request_bytes: int = option(1_000_000, "largest request body", check=POSITIVE)
    timeout_s: float = option(30.0, "per-request limit, queueing included; past it the answer is a 504 "
                                      "(default: 30)", check=ABOVE_ZERO)
    threads: int | None = option(None, "intra-op threads for torch / onnxruntime (default: 1 per lane when --lanes "
                                       "is left to auto on a CPU with several cores, else theirs)", check=POSITIVE)
    lanes: int | None = option(None, "model calls that run at once, each on its own thread (default: auto: on a "
                                     f"CPU, one per core, at most {MAX_AUTO_LANES}, when --threads is not given; "
                                     "else 1)", check=POSITIVE)
    device: str | None = option(None, "where the PyTorch backends run: cpu, cuda or cuda:N (default: cpu)")
    graceful_s: float = option(30.0, "how long SIGTERM waits for in-flight requests (default: 30)",
                               check=NON_NEGATIVE)
    max_connections: int = option(256, "open connections at once, per worker; past it a new one gets a 503 (slow "
                                       "clients cannot hold the server)", check=POSITIVE)
    body_timeout_s: float = option(10.0, "longest time a request body may take to arrive; past it the answer is a "
                                         "408 (default: 10)", check=ABOVE_ZERO)
    docs: bool = option(False, "serve the interactive API pages /docs and /redoc (they load their scripts from a CDN, "
                               "so they need internet access in the browser; /openapi.json is always served)")

    def __post_init__(self) -> None:
        check_options(self)  # types, choices and rules of every field: one check for library, CLI and --config

    def concurrency(self) -> tuple[int, int | None]:
        """(lanes, torch threads): what auto means on this host. On a CPU, lanes of one thread each serve more
        than one lane of every core (litebert.batching); on a GPU, or where --threads is given, one lane."""
        if self.lanes is not None:
            return self.lanes, self.threads
        on_cpu = self.device is None or self.device == "cpu"
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        if not on_cpu or self.threads is not None or not self.batching or cores < 2:
            return 1, self.threads
        return min(cores, MAX_AUTO_LANES), 1

    def check(self) -> "ServeConfig":
        from litebert.pipelines import BACKENDS

        if self.backend not in BACKENDS:
            raise ConfigError(f"--backend {self.backend!r} is not one of {', '.join(BACKENDS)}")
        return self


def _require_fastapi():
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise ConfigError("litebert serve needs FastAPI and uvicorn: pip install 'litebert[serve]'") from None


def request_models(task: str, max_items: int, max_chars: int):
    """The request model for `task`: pydantic classes that forbid unknown fields, so a field of
    another task is an error that names it. Built per server because the limits are settings."""
    from pydantic import BaseModel, ConfigDict, Field, StringConstraints, create_model

    Text = Annotated[str, StringConstraints(min_length=1, max_length=max_chars)]
    strict = ConfigDict(extra="forbid")

    class TextItem(BaseModel):
        model_config = strict
        text: Text

    class PairItem(TextItem):
        text_pair: Text | None = None

    class QAItem(BaseModel):
        model_config = strict
        question: Text
        context: Text

    class NoParams(BaseModel):
        model_config = strict

    class QAParams(NoParams):
        null_threshold: float = 0.0

    class MaskParams(NoParams):
        top_k: Annotated[int, Field(ge=1, le=100)] = 5

    class EmbedParams(NoParams):
        pooling: Literal["mean", "cls"] = "mean"
        normalize: bool = False

    from litebert.heads import for_pipeline

    # A family names its models here, or brings a function that builds its own (families/choice.py).
    models = locals()
    item, params = (models[name] if isinstance(name, str) else name(Text, strict)
                    for name in for_pipeline(task).family_class().request)

    name = "".join(w.title() for w in task.split("-")) + "Request"  # e.g. TextClassificationRequest
    return create_model(name, __config__=strict,
                        inputs=(Annotated[list[item], Field(min_length=1, max_length=max_items)], ...),
                        parameters=(params, Field(default_factory=params)))  # (a default instance would be
    # deep-copied for every request by pydantic: a tenth of a near-free model's request CPU)


def build_pipeline(cfg: ServeConfig):
    from litebert.pipelines import pipeline

    return pipeline(None, cfg.model, cfg.backend, batch_size=cfg.max_batch_size, onnx_file=cfg.onnx_file,
                    threads=cfg.concurrency()[1], truncation=cfg.truncation, device=cfg.device)


def create_app(cfg: ServeConfig, pipe=None):
    """The FastAPI app. `pipe`: an already-built pipeline (else built from cfg at startup)."""
    _require_fastapi()
    from fastapi import FastAPI

    from litebert.records import model_name, read_record
    from litebert.serving_v2 import add_routes as add_v2_routes

    weights_dir, record = read_record(cfg.model)  # fails fast, before the server binds, on a bad directory
    state = {"ready": False, "draining": False, "pipes": {}, "batchers": {}, "started": time.time(), "dropped": 0,
             "inputs": 0, "truncated_inputs": 0, "task": record.task}
    docs = {} if cfg.docs else {"docs_url": None, "redoc_url": None}  # their pages fetch scripts from a CDN
    app = FastAPI(title="litebert", version=_version(), lifespan=_lifespan(cfg, pipe, state), **docs,
                  description=f"{record.task} ({record.finetune_task or record.architecture}) from {cfg.model}")
    app.state.serve = state
    app.add_middleware(_body_limit, cfg=cfg, state=state)
    app.add_middleware(_connection_cap, limit=cfg.max_connections)  # (added last: the outermost)
    _add_error_handlers(app)
    answer = _answerer(cfg, state)
    predict_model = request_models(record.task, cfg.max_items, cfg.max_text_chars)
    _add_routes(app, cfg, record, state, answer, predict_model)

    def is_ready() -> bool:
        # A directory removed under a running server is said the same way whether this worker had loaded it or
        # was still loading it (with --workers N, /ready may reach either).
        if not weights_dir.is_dir():
            state["error"] = f"the model directory {weights_dir} is gone"
        return state["ready"] and not state.get("error")

    state["is_ready"] = is_ready
    add_v2_routes(app, model_name(weights_dir), predict_model, answer, is_ready, state, _error)
    return app


def _lifespan(cfg: ServeConfig, pipe, state: dict):
    """Start-up (load, warm up, start a batcher per pipeline; its warm-up results give the v2 metadata's
    outputs) and shutdown (drain the batchers)."""
    from litebert.batching import Batcher, approx_tokens

    def runner(pipe_):
        def run(items, params):
            return pipe_(items, **params)
        return run

    @asynccontextmanager
    async def lifespan(app):
        state["cut_off"] = asyncio.Event()  # (made in the server's event loop)
        try:
            main = pipe or await asyncio.to_thread(build_pipeline, cfg)
        except LitebertError as exc:  # a worker of --workers N whose directory went bad after the parent's check:
            state["error"] = f"the model could not be loaded: {exc}"  # /ready says so; no exit, no respawn loop
            yield
            return
        state["pipes"] = {main.task: main}
        try:
            state["pipes"]["embeddings"] = main.embeddings()
        except ConfigError:
            pass  # an ONNX task graph has no encoder output: /embed answers 404
        for task, p in state["pipes"].items():
            warm = await asyncio.to_thread(p, [p.warmup])  # first call pays one-off costs, not a user's request
            if task == main.task:
                state["warm_results"] = warm
            skips = getattr(getattr(p, "runner", None), "skips_padding", False)
            length = None if skips else approx_tokens  # None: each round is one batch
            batcher = Batcher(runner(p), cfg.max_batch_size, cfg.max_wait_ms / 1000, enabled=cfg.batching,
                              wait_when_idle=cfg.wait_when_idle, length=length, lanes=cfg.concurrency()[0])
            batcher.start()
            state["batchers"][task] = batcher
        state["ready"] = True
        yield
        state["ready"] = False
        for batcher in state["batchers"].values():
            await batcher.close()

    return lifespan


def _body_limit(app, cfg: ServeConfig, state: dict):
    """ASGI middleware for POST bodies: a Content-Length within --max-request-bytes, the body arriving within
    --body-timeout-s, from a client still there; the app then reads the body from here. (Plain ASGI, not
    starlette's BaseHTTPMiddleware, which runs each request in a task group and streams its response through a
    queue: a tenth of a near-free model's request CPU.)"""

    async def limited(scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length", b"").decode("latin-1") or None
        refusal = None
        if length is None:
            refusal = _error(411, "a Content-Length header is required", "body")
        elif not length.isdigit() or int(length) > cfg.max_request_bytes:
            refusal = _error(413, f"request body of {length} bytes is over the limit of {cfg.max_request_bytes}",
                             "body")
        else:
            try:  # a client dripping its body byte by byte must not hold a connection (and a slot) for ever
                body = await asyncio.wait_for(_read_body(receive), cfg.body_timeout_s)
                gone = await _disconnected(receive)  # the whole body came, then the client left: no model time
            except asyncio.TimeoutError:
                refusal = _error(408, f"the request body did not arrive within {cfg.body_timeout_s:g} s", "body")
            except ConnectionResetError:  # the client left while sending: nobody is left to answer
                gone = True
            if refusal is None and gone:
                state["dropped"] += 1
                refusal = _error(499, "the client closed the connection", None)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        replay = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive_again():  # the body once, then the connection's own messages (its http.disconnect)
            return replay.pop() if replay else await receive()

        await app(scope, receive_again, send)

    return limited


async def _read_body(receive) -> bytes:
    """The whole body of a request; ConnectionResetError when the client leaves first."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ConnectionResetError
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _disconnected(receive) -> bool:
    """Whether the connection has already said http.disconnect (without waiting for it)."""
    waiting = asyncio.ensure_future(receive())
    await asyncio.sleep(0)
    if waiting.done():
        return waiting.result()["type"] == "http.disconnect"
    waiting.cancel()
    return False


def _add_error_handlers(app) -> None:
    """Every error in the documented JSON shape."""
    from fastapi import Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException as StarletteHTTPException

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):  # 404, 405, a body FastAPI cannot parse
        if exc.status_code == 400:  # FastAPI's "error parsing the body" (invalid UTF-8): 422 like every bad body
            cause = exc.__cause__
            why = f" ({type(cause).__name__}: {cause})" if cause is not None else ""
            return _error(422, f"invalid request: body: not valid JSON{why}", "body")
        return _error(exc.status_code, str(exc.detail), "body" if exc.status_code == 422 else None)

    @app.exception_handler(RecursionError)
    async def too_deep(request: Request, exc: RecursionError):  # a body nested too deeply to parse
        return _error(422, "invalid request: the JSON body is nested too deeply", "body")

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError):
        fields = [{"field": "body" if e.get("type") == "json_invalid" else ".".join(str(p) for p in e["loc"][1:])
                   or "body", "message": e["msg"]} for e in exc.errors()]  # (json_invalid's loc: the byte offset)
        return JSONResponse({"error": "invalid request: " + "; ".join(f"{f['field']}: {f['message']}"
                                                                      for f in fields), "fields": fields},
                            status_code=422)


def _answerer(cfg: ServeConfig, state: dict):
    """`answer(task, body, request)`: a validated request's items through the task's batcher -> {"outputs",
    "precision", "truncated_inputs"}, or an error response (every door to the model goes through it)."""

    async def answer(task: str, body, request) -> dict:
        if not state["ready"]:
            return _error(503, "not ready (loading or shutting down)", None)
        pipe_ = state["pipes"][task]
        items = [pipe_.from_request(i.model_dump()) for i in body.inputs]
        params = body.parameters.model_dump()
        try:
            for i, item in enumerate(items):  # checked here, so one bad request never fails a batch of others
                pipe_.check(item, i)
        except LitebertError as exc:  # input the model cannot take (e.g. fill-mask without [MASK])
            return _error(422, str(exc), "inputs")
        work = asyncio.ensure_future(state["batchers"][task].submit(items, params))
        cut = asyncio.ensure_future(state["cut_off"].wait())  # set just before the graceful-shutdown limit
        gone = asyncio.ensure_future(_client_gone(request))
        try:
            done, _ = await asyncio.wait({work, cut, gone}, timeout=cfg.timeout_s,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            cut.cancel()
            gone.cancel()
        if work not in done:
            work.cancel()  # a request still queued is then dropped by the batcher, unrun
            if gone in done:
                state["dropped"] += 1
                return _error(499, "the client closed the connection", None)  # (nobody reads it)
            if cut in done:  # uvicorn would close the connection without a word: answer first
                return _error(503, f"the server is shutting down and this request did not finish within the "
                                   f"{cfg.graceful_s:g} s allowed (--graceful-s); send it again", None)
            return _error(504, f"no answer within the {cfg.timeout_s} s request timeout", None)
        try:
            outputs = work.result()
        except LitebertError as exc:  # input the model cannot take (e.g. fill-mask without [MASK])
            return _error(422, str(exc), "inputs")
        except Exception as exc:  # the model failed: this request gets a 500, the server goes on
            return _error(500, f"model failure: {type(exc).__name__}: {exc}", None)
        if not _all_finite(outputs):
            return _error(500, "model failure: the model produced a non-finite number (NaN or infinity)", None)
        truncated = sum(1 for o in outputs if isinstance(o, dict) and o.get("truncated_tokens", 0) > 0)
        state["inputs"] += len(outputs)
        state["truncated_inputs"] += truncated
        return {"outputs": outputs, "precision": pipe_.precision, "truncated_inputs": truncated}

    return answer


def _add_routes(app, cfg: ServeConfig, record, state: dict, answer, PredictRequest) -> None:
    """/predict, /embed, /health, /ready, /info."""
    from fastapi import Request
    from fastapi.responses import JSONResponse

    EmbedRequest = request_models("embeddings", cfg.max_items, cfg.max_text_chars)

    @app.post("/predict", summary=f"{record.task} for the served model")
    async def predict(body: PredictRequest, request: Request):
        return await answer(record.task, body, request)

    @app.post("/embed", summary="sentence embeddings from the served model's encoder")
    async def embed(body: EmbedRequest, request: Request):
        if state["ready"] and "embeddings" not in state["batchers"]:
            return _error(404, "this server has no encoder output (an ONNX task graph); serve a 'base' export", None)
        return await answer("embeddings", body, request)

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    @app.get("/ready")
    async def ready():
        if not state["is_ready"]():
            return JSONResponse({"ready": False, **({"error": state["error"]} if state.get("error") else {})},
                                status_code=503)
        return {"ready": True, "task": record.task}

    @app.get("/info")
    async def info():
        main = state["pipes"].get(record.task)
        lanes, threads = cfg.concurrency()
        return {"task": record.task, "record": record.to_dict(), "backend": cfg.backend,
                "precision": main.precision if main else None,
                "settings": {k: v for k, v in asdict(cfg).items() if k not in ("host", "port")},
                "lanes": lanes, "threads": threads,
                "model_calls": {t: b.batches for t, b in state["batchers"].items()},
                "items_run": {t: b.items for t, b in state["batchers"].items()},
                "items_dropped": {t: b.dropped for t, b in state["batchers"].items()},
                "dropped_disconnected": state["dropped"], "inputs": state["inputs"],
                "truncated_inputs": state["truncated_inputs"]}


def _connection_cap(app, limit: int):
    """ASGI middleware: past `limit` open connections (uvicorn's count, in the scope: `serving_connections`), a
    request is answered 503 in the documented shape before its body is read, and its connection closed. In-process
    (TestClient) there is no count and no cap."""
    from litebert.serving_connections import OPEN_CONNECTIONS

    async def capped(scope, receive, send):
        open_now = scope.get(OPEN_CONNECTIONS) if scope["type"] == "http" else None
        if open_now is not None and open_now > limit:
            response = _error(503, f"too many connections: {open_now} open, the limit is {limit} "
                                   "(--max-connections); try again shortly", None)
            response.headers["connection"] = "close"  # frees this connection at once
            await response(scope, receive, send)
            return
        await app(scope, receive, send)

    return capped


async def _client_gone(request) -> None:
    """Returns when the client has closed its connection. The body is already read (_body_limit), so what the
    connection can still bring is its `http.disconnect`."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _all_finite(value) -> bool:
    """Whether every float in a JSON-able answer is finite (json would write NaN, which is not JSON)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_all_finite(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return all(_all_finite(v) for v in value)
    return True


def _error(status: int, message: str, field: str | None):
    from fastapi.responses import JSONResponse

    body = {"error": message, "fields": [{"field": field, "message": message}] if field else []}
    return JSONResponse(body, status_code=status)


def _version() -> str:
    from litebert import __version__

    return __version__


def app_from_env():
    """uvicorn's factory for --workers N: each worker process builds its own app (and model) from the env. A worker
    that cannot load the directory (it went bad after the parent checked it) serves a failing /ready instead of
    exiting, which uvicorn would answer with a new worker, for ever."""
    cfg = ServeConfig(**json.loads(os.environ[ENV_CONFIG])).check()
    try:
        return create_app(cfg)
    except LitebertError as exc:
        return _unloaded_app(f"the model could not be loaded: {exc}")


def _unloaded_app(message: str):
    """/health 200 (the process runs), every other path 503 with `message`."""
    from fastapi import FastAPI

    app = FastAPI(title="litebert", version=_version(), docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    @app.api_route("/{path:path}", methods=["GET", "POST"])
    async def unavailable(path: str):
        return _error(503, message, None)

    return app


def serve(cfg: ServeConfig) -> None:
    """Run the server until SIGINT/SIGTERM; in-flight requests finish first (up to cfg.graceful_s)."""
    cfg.check()
    _require_fastapi()
    import uvicorn

    if cfg.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"litebert serve: warning: listening on {cfg.host}: the API has no authentication, so anyone who can "
              "reach this address can use the model; put it behind a proxy that checks who calls", file=sys.stderr)
    from litebert.serving_connections import PROTOCOL

    # No limit_concurrency: its 503 is plain text; uvicorn's connection count reaches the app instead (PROTOCOL)
    # and _connection_cap answers past --max-connections in the documented shape.
    options = dict(host=cfg.host, port=cfg.port, log_level="info", timeout_graceful_shutdown=cfg.graceful_s,
                   http=PROTOCOL)
    if cfg.workers > 1:
        # Each worker loads the directory itself; a bad one would make every worker fail and uvicorn respawn them
        # for ever. Load it once here first: the same clean error (exit 2) as with one worker.
        create_app(cfg, pipe=build_pipeline(cfg))
        os.environ[ENV_CONFIG] = json.dumps(asdict(cfg))
        uvicorn.run("litebert.serving:app_from_env", factory=True, workers=cfg.workers, **options)
        return
    app = create_app(cfg, pipe=build_pipeline(cfg))  # a bad directory fails here, as a CLI error, not in uvicorn
    _draining_server(uvicorn.Config(app, **options), app.state.serve).run()


GRACE_MARGIN_S = 0.5  # seconds before uvicorn's graceful-shutdown limit at which waiting requests are answered 503


def _draining_server(config, state: dict):
    """A uvicorn.Server that, on SIGTERM/SIGINT, turns /ready to 503 at once (so a load balancer stops sending)
    before uvicorn's own graceful shutdown lets in-flight requests finish."""
    import uvicorn

    class DrainingServer(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self):
            with super().capture_signals():
                yield
                # uvicorn raises the signal again once it has shut down, so the process died of it (-15): a
                # shutdown that SIGTERM asked for and that finished is a success, exit 0
                getattr(self, "_captured_signals", []).clear()

        def handle_exit(self, sig, frame):
            state["ready"] = False
            if "cut_off" in state and not self.should_exit:  # the first signal: in-flight requests get until the
                # graceful limit less a margin to write their answer, then a 503 in the documented shape
                import asyncio

                loop = asyncio.get_event_loop()
                delay = max(0.0, (config.timeout_graceful_shutdown or 0.0) - GRACE_MARGIN_S)
                loop.call_soon_threadsafe(loop.call_later, delay, state["cut_off"].set)
            super().handle_exit(sig, frame)

    return DrainingServer(config)
