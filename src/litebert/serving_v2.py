"""The Open Inference Protocol (KServe v2, the protocol of Triton's HTTP API) over `litebert serve`'s model, so
KServe and Triton clients (tritonclient.http, kserve's InferenceRESTClient) can call it.

    GET  /v2                                 server metadata {"name", "version", "extensions"}
    GET  /v2/health/live, /v2/health/ready   200 / 200 when ready (else 503)
    GET  /v2/models/{name}[/versions/1]      model metadata {"name", "versions", "platform", "inputs", "outputs"}
    GET  /v2/models/{name}[/versions/1]/ready
    POST /v2/models/{name}[/versions/1]/infer
         {"id"?, "parameters"?, "inputs": [{"name", "shape", "datatype", "data"}], "outputs"?: [{"name"}]}
      -> {"model_name", "model_version", "id", "parameters", "outputs": [{"name", "shape", "datatype", "data"}]}

The model's name is its directory's (`records.model_name`, the name its model card gives it); its one version is
"1". Input tensors are the fields of the task's `/predict` item (`text` and `text_pair`; `question` and `context`;
`options` as a [N, K] tensor for multiple choice), each BYTES of shape [N] (or [N, 1]), row i of every tensor
making item i; they are checked by the same request model as /predict, so a bad one gets the same 422, naming
`inputs[NAME].data[i]`. Request parameters are the task's /predict parameters (top_k, pooling, ...); Triton's
own (binary_data_output, priority, timeout, sequence_*) are accepted and have no effect here. Input data may come
as JSON or in Triton's binary tensor extension (what tritonclient sends by default: the JSON header's length in
`Inference-Header-Content-Length`, then each input's bytes, BYTES elements as a 4-byte little-endian length and
the UTF-8 text); answers are always JSON, which every client reads.

Output tensors are the columns of the pipeline's results (`result_tensors`): a field that is a string in every
result is BYTES [N], an int INT64, a float FP32, a bool BOOL, a dict or list of numbers of one length (a
classifier's `scores` in label order, an embedding) FP32 [N, K]; anything else (entities, fill-mask's top-k
lists) is BYTES [N] holding each result's field as JSON. The metadata's outputs are those of the warm-up call's
result, with -1 for the batch dimension.
"""

import json
import struct
import typing
from typing import Any

VERSION = "1"
# Triton's request-level parameters: understood by its clients and servers, meaningless for this model.
PROTOCOL_PARAMETERS = ("binary_data_output", "priority", "timeout", "sequence_id", "sequence_start", "sequence_end")
HEADER_LENGTH = "inference-header-content-length"  # Triton's binary tensor extension


class ProtocolError(ValueError):
    """A request the protocol cannot read: answered 422 naming `field`."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


def item_fields(request_model) -> dict[str, bool]:
    """The /predict item's fields -> whether each is a list (a [N, K] tensor), from the pydantic request model."""
    item = typing.get_args(request_model.model_fields["inputs"].annotation)[0]
    return {name: typing.get_origin(f.annotation) is list for name, f in item.model_fields.items()}


def input_metadata(fields: dict[str, bool]) -> list[dict]:
    return [{"name": name, "datatype": "BYTES", "shape": [-1, -1] if is_list else [-1]}
            for name, is_list in fields.items()]


def parse_body(body: bytes, header_length: str | None) -> dict:
    """The request's JSON object, with binary-extension inputs decoded into their "data"."""
    if header_length is not None and not header_length.isdigit():
        raise ProtocolError("body", f"{HEADER_LENGTH} {header_length!r} is not a byte count")
    size = int(header_length) if header_length is not None else len(body)
    try:
        request = json.loads(body[:size])
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError("body", f"the request is not JSON: {exc}") from None
    if not isinstance(request, dict) or not isinstance(request.get("inputs"), list) or not request["inputs"]:
        raise ProtocolError("inputs", "the request must be an object with a non-empty list 'inputs'")
    offset = size
    for k, tensor in enumerate(request["inputs"]):
        if not isinstance(tensor, dict):
            raise ProtocolError(f"inputs[{k}]", "each input must be an object {name, shape, datatype, data}")
        size = (tensor.get("parameters") or {}).get("binary_data_size")
        if size is not None:
            if not isinstance(size, int) or offset + size > len(body):
                raise ProtocolError(f"inputs[{tensor.get('name', k)}]", "binary_data_size runs past the body")
            tensor["data"] = _bytes_elements(body[offset:offset + size], tensor.get("name", k))
            offset += size
    if offset != len(body):
        raise ProtocolError("body", f"{len(body) - offset} bytes after the last binary input")
    return request


def _bytes_elements(raw: bytes, name) -> list[str]:
    """A BYTES tensor in the binary extension: each element a uint32 little-endian length, then its bytes."""
    out, at = [], 0
    while at < len(raw):
        if at + 4 > len(raw):
            raise ProtocolError(f"inputs[{name}]", "a BYTES element's length is cut off")
        (n,) = struct.unpack_from("<I", raw, at)
        chunk = raw[at + 4:at + 4 + n]
        if len(chunk) != n:
            raise ProtocolError(f"inputs[{name}]", "a BYTES element runs past its tensor")
        try:
            out.append(chunk.decode("utf-8"))
        except UnicodeDecodeError:
            raise ProtocolError(f"inputs[{name}]", f"element {len(out)} is not UTF-8 text") from None
        at += 4 + n
    return out


def request_rows(request: dict, fields: dict[str, bool]) -> tuple[list[dict], dict]:
    """(the /predict items, the /predict parameters) of a v2 request: row i of every input tensor makes item i."""
    columns: dict[str, list] = {}
    for tensor in request["inputs"]:
        name = tensor.get("name")
        where = f"inputs[{name}]"
        if name not in fields:
            raise ProtocolError(where, f"unknown input {name!r} (this model takes {', '.join(fields)})")
        if name in columns:
            raise ProtocolError(where, "the input is given twice")
        if tensor.get("datatype") != "BYTES":
            raise ProtocolError(where, f"datatype {tensor.get('datatype')!r}: text inputs are BYTES")
        shape, data = tensor.get("shape"), _flat(tensor.get("data"))
        if not (isinstance(shape, list) and shape and all(isinstance(d, int) and d >= 0 for d in shape)):
            raise ProtocolError(where, f"shape {shape!r} is not a list of sizes")
        rows, width = shape[0], _product(shape[1:])
        if rows * width != len(data):
            raise ProtocolError(where, f"shape {shape} holds {rows * width} elements, the data has {len(data)}")
        if not fields[name] and width != 1:
            raise ProtocolError(where, f"shape {shape}: one text per item, so [N] or [N, 1]")
        columns[name] = ([data[i * width:(i + 1) * width] for i in range(rows)] if fields[name]
                         else data)
    counts = {len(c) for c in columns.values()}
    if len(counts) > 1:
        raise ProtocolError("inputs", f"the inputs' first dimensions differ ({sorted(counts)})")
    items = [{name: column[i] for name, column in columns.items()} for i in range(counts.pop())]
    params = {k: v for k, v in (request.get("parameters") or {}).items() if k not in PROTOCOL_PARAMETERS}
    return items, params


def _flat(data) -> list:
    """Tensor data, nested or flat, as one row-major list."""
    if not isinstance(data, list):
        raise ProtocolError("inputs", "each input needs its 'data' as a list")
    out: list = []
    for x in data:
        out.extend(_flat(x) if isinstance(x, list) else [x])
    return out


def _product(dims: list[int]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def field_path(loc: tuple) -> str:
    """A /predict validation error's location ("inputs", i, field) as the v2 tensor element it came from."""
    if len(loc) >= 3 and loc[0] == "inputs":
        return f"inputs[{loc[2]}].data[{loc[1]}]"
    return ".".join(str(p) for p in loc) or "body"


def result_tensors(results: list) -> list[dict]:
    """The pipeline's results for N items as output tensors (see the module docstring for the types)."""
    if results and all(isinstance(r, dict) for r in results):
        names = list(dict.fromkeys(k for r in results for k in r))
        return [_tensor(name, [r.get(name) for r in results]) for name in names]
    return [_tensor("embedding" if _numbers_of_one_length(results) else "output", results)]


def _tensor(name: str, values: list) -> dict:
    n = len(values)
    if all(isinstance(v, str) for v in values):
        return {"name": name, "datatype": "BYTES", "shape": [n], "data": values}
    if all(isinstance(v, bool) for v in values):
        return {"name": name, "datatype": "BOOL", "shape": [n], "data": values}
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return {"name": name, "datatype": "INT64", "shape": [n], "data": values}
    if all(_is_number(v) for v in values):
        return {"name": name, "datatype": "FP32", "shape": [n], "data": values}
    if _numbers_of_one_length(values):
        rows = [list(v.values()) if isinstance(v, dict) else v for v in values]
        return {"name": name, "datatype": "FP32", "shape": [n, len(rows[0])], "data": [x for r in rows for x in r]}
    return {"name": name, "datatype": "BYTES", "shape": [n], "data": [json.dumps(v) for v in values]}


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _numbers_of_one_length(values: list) -> bool:
    """Every value a list (or dict, same keys) of numbers, all of one length."""
    rows = [list(v.values()) if isinstance(v, dict) else v for v in values]
    keys = {tuple(v) for v in values if isinstance(v, dict)}
    return (bool(rows) and all(isinstance(r, list) and r and all(map(_is_number, r)) for r in rows)
            and len({len(r) for r in rows}) == 1 and len(keys) <= 1
            and (not keys or all(isinstance(v, dict) for v in values)))


def output_metadata(warmup_results: list) -> list[dict]:
    """The outputs' names, types and shapes (batch dimension -1), from one call's results."""
    return [{"name": t["name"], "datatype": t["datatype"], "shape": [-1, *t["shape"][1:]]}
            for t in result_tensors(warmup_results)]


def select_outputs(tensors: list[dict], requested) -> list[dict]:
    """The tensors the request's "outputs" names (all when it names none), in its order."""
    if not requested:
        return tensors
    by_name = {t["name"]: t for t in tensors}
    names = [o.get("name") if isinstance(o, dict) else None for o in requested]
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ProtocolError("outputs", f"unknown output {unknown[0]!r} (this model gives {', '.join(by_name)})")
    return [by_name[n] for n in names]


def add_routes(app, name: str, predict_model, answer, is_ready, state: dict, error_response) -> None:
    """The v2 endpoints on `app`. `answer(task, body, request)`: serving's path to the model (a dict, or an error
    response); `is_ready()`: whether the model answers; `state["pipes"]`/`state["warm_results"]`: set at start-up;
    `error_response(status, message, field)`: serving's one error shape (passed in: no import back into serving)."""
    from fastapi import Request
    from fastapi.responses import JSONResponse
    from pydantic import ValidationError

    from litebert import __version__

    fields = item_fields(predict_model)
    model_paths = [f"/v2/models/{name}", f"/v2/models/{name}/versions/{VERSION}"]

    def route(method: str, suffix: str, handler) -> None:
        for path in model_paths:
            app.add_api_route(path + suffix, handler, methods=[method], include_in_schema=path == model_paths[0])

    @app.get("/v2")
    async def server_metadata():
        return {"name": "litebert", "version": __version__, "extensions": []}  # (binary inputs are read, not written)

    @app.get("/v2/health/live")
    async def live():
        return {"live": True}

    async def ready():
        ok = is_ready()
        return JSONResponse({"ready": ok}, status_code=200 if ok else 503)

    app.add_api_route("/v2/health/ready", ready, methods=["GET"])
    route("GET", "/ready", ready)

    async def metadata():
        return {"name": name, "versions": [VERSION], "platform": "litebert", "inputs": input_metadata(fields),
                "outputs": output_metadata(state.get("warm_results") or [])}

    route("GET", "", metadata)

    async def infer(request: Request):
        try:
            body = parse_body(await request.body(), request.headers.get(HEADER_LENGTH))
            items, params = request_rows(body, fields)
        except ProtocolError as exc:
            return error_response(422, f"invalid request: {exc.field}: {exc}", exc.field)
        try:
            checked = predict_model.model_validate({"inputs": items, "parameters": params})
        except ValidationError as exc:
            found = [(field_path(e["loc"]), e["msg"]) for e in exc.errors()]
            return JSONResponse({"error": "invalid request: " + "; ".join(f"{f}: {m}" for f, m in found),
                                 "fields": [{"field": f, "message": m} for f, m in found]}, status_code=422)
        answered = await answer(state["task"], checked, request)
        if not isinstance(answered, dict):
            return answered  # an error response, as /predict gives it
        try:
            outputs = select_outputs(result_tensors(answered["outputs"]), body.get("outputs"))
        except ProtocolError as exc:
            return error_response(422, f"invalid request: {exc.field}: {exc}", exc.field)
        return JSONResponse({"model_name": name, "model_version": VERSION, "id": str(body.get("id", "")),
                             "parameters": {"precision": answered["precision"],
                                            "truncated_inputs": answered["truncated_inputs"]},
                             "outputs": outputs})

    route("POST", "/infer", infer)
