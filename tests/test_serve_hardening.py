"""The server is as hard as the trainer (docs/reliability.md, promise 15): every error it writes has the
documented shape {"error", "fields"} (a body FastAPI cannot parse, a model that returns NaN, an unknown path);
a bad model directory under --workers N is one clean exit 2 from the parent, not workers respawning; a client
dripping its body is cut off at --body-timeout-s; a client that left is not given model time; /docs and /redoc
(CDN pages) are off unless asked for; --host beyond loopback warns that there is no authentication."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest
import torch

from tiny_models import save_model, tokenizer

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, shared_data):
    return save_model(tmp_path_factory.mktemp("hard") / "clf", "AlbertForSequenceClassification",
                      tokenizer(shared_data), num_labels=2, label_names=["neg", "pos"])


@pytest.fixture(scope="module")
def client(model_dir):
    from fastapi.testclient import TestClient

    from litebert.serving import ServeConfig, create_app

    with TestClient(create_app(ServeConfig(model=str(model_dir), threads=1))) as c:
        yield c


def _shape(r):
    body = r.json()
    assert set(body) == {"error", "fields"}, body
    assert isinstance(body["error"], str) and isinstance(body["fields"], list)
    return body


@pytest.mark.parametrize("content", [
    b'{"inputs": [{"text": "caf\xe9"}]}',  # invalid UTF-8 (latin-1 e-acute); today: {"detail": ...}
    b'{"inputs": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",  # nested past the parser's depth
    b'{"inputs": [',
])
def test_unparseable_bodies_get_the_documented_error_shape(client, content):
    r = client.post("/predict", content=content, headers={"content-type": "application/json"})
    assert 400 <= r.status_code < 500
    assert _shape(r)["fields"][0]["field"] == "body"


def test_an_unknown_path_or_method_gets_the_documented_error_shape(client):
    assert _shape(client.get("/nowhere"))["error"] == "Not Found"
    r = client.get("/predict")
    assert r.status_code == 405 and _shape(r)


def test_docs_pages_are_off_by_default(client, model_dir):
    from fastapi.testclient import TestClient

    from litebert.serving import ServeConfig, create_app

    assert client.get("/docs").status_code == 404 and client.get("/redoc").status_code == 404
    assert client.get("/openapi.json").status_code == 200
    with TestClient(create_app(ServeConfig(model=str(model_dir), threads=1, docs=True))) as on:
        assert on.get("/docs").status_code == 200


def test_a_model_that_returns_nan_is_a_json_500_and_the_server_goes_on(model_dir, tmp_path):
    """Today: a plain-text 500 with a traceback (json refuses NaN)."""
    import shutil

    from fastapi.testclient import TestClient
    from safetensors.torch import load_file, save_file

    from litebert.serving import ServeConfig, create_app

    nan_dir = tmp_path / "nan"
    shutil.copytree(model_dir, nan_dir)
    weights = load_file(nan_dir / "model.safetensors")
    name = next(k for k in weights if k.startswith("classifier.") and k.endswith("bias"))
    weights[name] = torch.full_like(weights[name], float("nan"))
    save_file(weights, nan_dir / "model.safetensors", metadata={"format": "pt"})
    with TestClient(create_app(ServeConfig(model=str(nan_dir), threads=1)), raise_server_exceptions=False) as c:
        r = c.post("/predict", json={"inputs": [{"text": "a fine film"}]})
        assert r.status_code == 500 and "non-finite" in _shape(r)["error"]
        assert c.get("/ready").status_code == 200


def test_workers_with_a_bad_directory_exit_2_from_the_parent(tmp_path, model_dir):
    """Today: exit 0 after worker tracebacks, or (a missing directory) workers respawning for ever."""
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(model_dir, bad)
    (bad / "model.safetensors").write_bytes(b"not safetensors")
    for target in (tmp_path / "missing", bad):
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "litebert", "serve", "--model", str(target), "--workers", "2",
                               "--port", str(_free_port())], capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, done.stderr[-2000:]
        assert done.stderr.startswith("litebert: error: ") and "Traceback" not in done.stderr, done.stderr
        assert time.monotonic() - started < 60


def test_host_beyond_loopback_warns_that_there_is_no_authentication(tmp_path, capsys):
    from litebert.cli import main

    assert main(["serve", "--model", str(tmp_path / "missing"), "--host", "0.0.0.0"]) == 2  # never binds
    assert "the API has no authentication" in capsys.readouterr().err
    assert main(["serve", "--model", str(tmp_path / "missing")]) == 2
    assert "authentication" not in capsys.readouterr().err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _read_reply(s: socket.socket) -> str:
    """One HTTP response (head and its Content-Length of body) from socket `s`."""
    data = b""
    while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < int(
            next((line.split(b":")[1] for line in data.split(b"\r\n") if line.lower().startswith(b"content-length")),
                 b"0")):
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    return data.decode()


def test_slow_bodies_are_cut_off_and_gone_clients_get_no_model_time(model_dir):
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(f"{model_dir}.{port}.log", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "litebert", "serve", "--model", str(model_dir), "--port",
                             str(port), "--threads", "1", "--body-timeout-s", "1", "--max-wait-ms", "500",
                             "--wait-when-idle"],  # a lone request sits 500 ms in the queue: time to leave
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 120
        while True:
            assert proc.poll() is None and time.time() < deadline, log.seek(0) or log.read()
            try:
                if httpx.get(url + "/ready", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.3)
        body = json.dumps({"inputs": [{"text": "a fine film"}]}).encode()
        head = (f"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:  # drips: half the body, then nothing
            s.sendall(head + body[:10])
            started = time.monotonic()
            reply = _read_reply(s)
            assert time.monotonic() - started < 5
        assert reply.startswith("HTTP/1.1 408") and '"error"' in reply and '"fields"' in reply, reply
        calls = httpx.get(url + "/info").json()["model_calls"]["text-classification"]
        for _ in range(3):  # send the whole request and leave at once
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                s.sendall(head + body)
                s.shutdown(socket.SHUT_RDWR)
        time.sleep(1.5)
        info = httpx.get(url + "/info").json()
        assert info["dropped_disconnected"] >= 1
        assert info["model_calls"]["text-classification"] - calls <= 3 - info["dropped_disconnected"]
    finally:
        proc.kill()
        proc.wait(30)
        log.close()
