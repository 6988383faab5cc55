"""`litebert serve`: the real server (uvicorn, a subprocess) on a free loopback port, driven by a real HTTP client.

Checked: answers equal the Python API's, every kind of bad request gets a 4xx JSON error naming its field, a
model failure is a 500 after which the server still answers, a concurrent burst gets answers equal to sequential
ones (and is batched), and SIGTERM lets an in-flight request finish."""

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import litebert
from litebert.records import INFERENCE_RECORD, read_record
from tiny_models import TEXTS, same, save_model, tokenizer

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

LONG = " ".join(["the film is long and the plot wanders but the actors are good"] * 12)  # > 64 tokens


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, model_dir, *flags):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(f"{model_dir}.{self.port}.log", "w+")
        self.proc = subprocess.Popen([sys.executable, "-m", "litebert", "serve", "--model", str(model_dir),
                                      "--port", str(self.port), "--threads", "1", *flags],
                                     stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout=180):
        deadline = time.time() + timeout
        while time.time() < deadline:
            assert self.proc.poll() is None, self.output()
            try:
                if httpx.get(self.url + "/ready", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.3)
        raise AssertionError("server not ready in time:\n" + self.output())

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, shared_data):
    """A classifier whose record claims 128 tokens while the model has 64 positions: a long text makes the
    model itself fail (an index past the position table), which is how the 500 path is exercised."""
    path = save_model(tmp_path_factory.mktemp("serve") / "clf", "AlbertForSequenceClassification",
                      tokenizer(shared_data), num_labels=2, label_names=["neg", "pos"])
    _, record = read_record(path)
    (path / INFERENCE_RECORD).write_text(json.dumps({**record.to_dict(), "max_seq_length": 128}))
    return path


@pytest.fixture(scope="module")
def servers(model_dir):
    """Both servers start at once (the start-up is most of this file's time)."""
    main = Server(model_dir, "--backend", "fp32", "--max-wait-ms", "20", "--max-items", "8", "--max-text-chars", "2000",
                  "--max-request-bytes", "10000", "--lanes", "2")  # two rounds in the model at once
    slow = Server(model_dir, "--max-wait-ms", "2000", "--max-batch-size", "64",
                  "--wait-when-idle")  # a lone request waits 2 s
    try:
        yield main.wait_ready(), slow.wait_ready()
    finally:
        main.stop()
        slow.stop()


@pytest.fixture(scope="module")
def server(servers):
    return servers[0]


def post(server, body, path="/predict", **kw):
    return httpx.post(server.url + path, json=body, timeout=30, **kw)


def test_answers_equal_the_python_api(server, model_dir):
    api = litebert.pipeline(None, model_dir, "fp32")
    pairs = [("a man plays a guitar .", "a person plays music .")]
    r = post(server, {"inputs": [{"text": t} for t in TEXTS] + [{"text": a, "text_pair": b} for a, b in pairs]})
    assert r.status_code == 200, r.text
    same(r.json()["outputs"], api(TEXTS + pairs))
    r = post(server, {"inputs": [{"text": t} for t in TEXTS], "parameters": {"pooling": "cls", "normalize": True}},
             "/embed")
    same(r.json()["outputs"], api.embeddings()(TEXTS, pooling="cls", normalize=True))
    assert httpx.get(server.url + "/health").json() == {"status": "ok"}
    assert httpx.get(server.url + "/ready").json() == {"ready": True, "task": "text-classification"}
    info = httpx.get(server.url + "/info").json()
    assert info["record"]["labels"] == ["neg", "pos"] and info["settings"]["max_items"] == 8
    assert (info["lanes"], info["threads"]) == (2, 1)
    schema = httpx.get(server.url + "/openapi.json").json()
    assert {"/predict", "/embed", "/health", "/ready"} <= set(schema["paths"])
    assert "TextClassificationRequest" in schema["components"]["schemas"]


@pytest.mark.parametrize("cores, settings, expected", [
    (2, {}, (2, 1)),  # a CPU with several cores: a lane per core, one torch thread each
    (16, {}, (4, 1)),  # at most MAX_AUTO_LANES
    (1, {}, (1, None)),  # one core: one lane, torch's own threads
    (8, {"threads": 4}, (1, 4)),  # --threads given: one lane of that many threads
    (8, {"lanes": 3}, (3, None)),  # --lanes given: as asked
    (8, {"device": "cuda"}, (1, None)),  # a GPU: one lane
    (8, {"batching": False}, (1, None)),
])
def test_auto_lanes_and_threads(monkeypatch, cores, settings, expected):
    import os

    from litebert.serving import ServeConfig

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    assert ServeConfig(model="m", **settings).concurrency() == expected


@pytest.mark.parametrize("body, status, field", [
    ({"inputs": [{"txt": "a"}]}, 422, "inputs.0.text"),  # missing text (and an unknown field)
    ({"inputs": [{"text": 5}]}, 422, "inputs.0.text"),  # wrong type
    ({"inputs": [{"text": "a" * 2001}]}, 422, "inputs.0.text"),  # over --max-text-chars
    ({"inputs": []}, 422, "inputs"),  # empty list
    ({"inputs": [{"text": "a"}] * 9}, 422, "inputs"),  # over --max-items
    ({"inputs": [{"question": "who?", "context": "ada"}]}, 422, "inputs.0.question"),  # another task's input
    ({"inputs": [{"text": "a"}], "parameters": {"top_k": 3}}, 422, "parameters.top_k"),  # another task's option
    ({"text": "a"}, 422, "inputs"),  # no inputs list
    ({"inputs": [{"text": "ok " * 600}] * 8}, 413, "body"),  # 14 kB of valid fields: over --max-request-bytes 10000
])
def test_bad_requests_get_json_errors_naming_the_field(server, body, status, field):
    r = post(server, body)
    assert r.status_code == status, r.text
    assert field in [f["field"] for f in r.json()["fields"]]
    assert status == 413 or field in r.json()["error"]


def test_malformed_json_and_a_model_failure(server):
    r = httpx.post(server.url + "/predict", content=b'{"inputs": [', headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["fields"]
    r = post(server, {"inputs": [{"text": LONG}]})  # 128 tokens into a 64-position model
    assert r.status_code == 500 and "model failure" in r.json()["error"]
    r = post(server, {"inputs": [{"text": "still serving"}]})
    assert r.status_code == 200 and r.json()["outputs"][0]["label"] in ("neg", "pos")


def test_concurrent_burst_equals_sequential_answers(server):
    """200 requests from 16 clients; one request with a failing input among them fails alone."""
    pool = TEXTS + ["good", "bad", "it was fine , i guess", "not my kind of film at all"]
    bodies = [{"inputs": [{"text": pool[(i + k) % len(pool)]} for k in range(1 + i % 3)]} for i in range(200)]
    key = lambda body: json.dumps(body)  # noqa: E731
    with httpx.Client(timeout=30) as client:
        sequential = {key(b): client.post(server.url + "/predict", json=b).json() for b in bodies}
    assert len(sequential) == 21
    calls_before = httpx.get(server.url + "/info").json()["model_calls"]["text-classification"]
    local = threading.local()

    def one(i):
        if not hasattr(local, "client"):
            local.client = httpx.Client(timeout=30)
        bad = i == 100  # a request whose input breaks the model, amid the burst
        r = local.client.post(server.url + "/predict", json={"inputs": [{"text": LONG}]} if bad else bodies[i])
        return i, r.status_code, r.json()

    with ThreadPoolExecutor(16) as ex:
        results = list(ex.map(one, range(200)))
    for i, status, body in results:
        if i == 100:
            assert status == 500
            continue
        assert status == 200, body
        same(body, sequential[key(bodies[i])])
    calls = httpx.get(server.url + "/info").json()["model_calls"]["text-classification"] - calls_before
    assert calls < 200, "no two requests were ever batched together"


def test_sigterm_lets_an_in_flight_request_finish(servers):
    slow = servers[1]
    done = {}

    def request():
        t0 = time.perf_counter()
        r = post(slow, {"inputs": [{"text": "finish me"}]})
        done.update(status=r.status_code, body=r.json(), seconds=time.perf_counter() - t0)

    thread = threading.Thread(target=request)
    thread.start()
    time.sleep(0.7)  # the request is now waiting in the batcher (max wait 2 s)
    slow.proc.send_signal(signal.SIGTERM)
    thread.join(30)
    assert done["status"] == 200 and done["body"]["outputs"][0]["label"] in ("neg", "pos")
    assert done["seconds"] > 1.5  # it really was in flight when SIGTERM came
    # uvicorn finishes its shutdown, then re-raises the signal it caught (so the exit status says SIGTERM)
    assert slow.proc.wait(30) in (0, -signal.SIGTERM)
    with pytest.raises(httpx.TransportError):  # and the server is gone
        httpx.get(slow.url + "/health", timeout=2)
    assert "Finished server process" in slow.output()


def test_cli_refuses_a_bad_directory_or_backend_before_serving(tmp_path, model_dir, capsys):
    from litebert.cli import main

    assert main(["serve", "--model", str(tmp_path / "missing")]) == 2
    assert "model directory not found" in capsys.readouterr().err
    assert main(["serve", "--model", str(model_dir), "--backend", "fp16"]) == 2
    assert "--backend 'fp16'" in capsys.readouterr().err
    assert main(["serve", "--model", str(model_dir), "--backend", "onnx"]) == 2  # no model.onnx in it
    assert "no ONNX file" in capsys.readouterr().err
