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
    assert r.status_code == 422, r.text  # as documented (invalid UTF-8 was FastAPI's 400)
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


def _start_server(model, log_path, *flags):
    """A real `litebert serve` on a free port, waited for until /ready answers 200: (process, url, log file)."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(log_path, "w+")
    proc = subprocess.Popen([sys.executable, "-m", "litebert", "serve", "--model", str(model), "--port", str(port),
                             "--threads", "1", *flags], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 180
    while True:
        assert proc.poll() is None and time.time() < deadline, log.seek(0) or log.read()
        try:
            if httpx.get(url + "/ready", timeout=2).status_code == 200:
                return proc, url, log
        except httpx.TransportError:
            pass
        time.sleep(0.3)


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
    # --wait-when-idle: every request waits the whole 2 s batching window, so the three clients below are gone
    # while their requests are still queued (without it a lone request runs at once and may finish first)
    proc, url, log = _start_server(model_dir, f"{model_dir}.slow.log", "--body-timeout-s", "1", "--max-wait-ms",
                                   "2000", "--wait-when-idle")
    port = int(url.rsplit(":", 1)[1])
    try:
        body = json.dumps({"inputs": [{"text": "a fine film"}]}).encode()
        head = (f"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:  # drips: half the body, then nothing
            s.sendall(head + body[:10])
            started = time.monotonic()
            reply = _read_reply(s)
            assert time.monotonic() - started < 5
        assert reply.startswith("HTTP/1.1 408") and '"error"' in reply and '"fields"' in reply, reply
        before = httpx.get(url + "/info").json()
        for _ in range(3):  # send the whole request and leave at once
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                s.sendall(head + body)
                s.shutdown(socket.SHUT_RDWR)
        time.sleep(3.5)  # past the window: the round has formed (and found nobody left to run)
        info = httpx.get(url + "/info").json()
        assert info["dropped_disconnected"] - before["dropped_disconnected"] == 3, info
        assert info["model_calls"]["text-classification"] == before["model_calls"]["text-classification"], info
        assert info["items_run"]["text-classification"] == before["items_run"]["text-classification"], info
    finally:
        proc.kill()
        proc.wait(30)
        log.close()


def _children(pid: int) -> set[int]:
    """The worker processes of a `--workers N` server (its spawned children, not multiprocessing's helpers)."""
    from pathlib import Path

    workers = set()
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        try:
            if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                workers.add(int(child))
        except OSError:
            continue  # it ended meanwhile
    return workers


def test_a_model_removed_under_workers_gives_a_failing_ready_not_a_respawn_loop(model_dir, tmp_path):
    """Today a worker that cannot load the directory exits, and uvicorn starts another, for ever."""
    import os
    import shutil
    import signal

    model = tmp_path / "model"
    shutil.copytree(model_dir, model)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(tmp_path / "serve.log", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "litebert", "serve", "--model", str(model), "--port", str(port),
                             "--threads", "1", "--workers", "2"], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 180
        while True:
            assert proc.poll() is None and time.time() < deadline, log.seek(0) or log.read()
            try:
                if httpx.get(url + "/ready", timeout=2).status_code == 200 and len(_children(proc.pid)) == 2:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.3)
        shutil.rmtree(model)
        r = httpx.get(url + "/ready", timeout=5)
        assert r.status_code == 503 and "is gone" in r.json()["error"]
        os.kill(sorted(_children(proc.pid))[0], signal.SIGKILL)  # a worker dies; uvicorn starts another
        time.sleep(8)
        workers = _children(proc.pid)
        time.sleep(4)
        assert _children(proc.pid) == workers and len(workers) == 2  # the new worker stays: no respawn loop
        r = httpx.get(url + "/ready", timeout=5)
        assert r.status_code == 503 and "error" in r.json()
        assert proc.poll() is None
    finally:
        workers = _children(proc.pid) if proc.poll() is None else set()
        proc.terminate()  # uvicorn's supervisor stops its workers
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
        for child in workers:
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
        log.close()


def test_a_request_cut_off_by_the_graceful_shutdown_limit_gets_a_json_503(model_dir, tmp_path):
    """A lone request waits 10 s for company (--wait-when-idle); SIGTERM gives it 2 s (--graceful-s). Today uvicorn
    closes the connection without an answer."""
    import signal
    import threading

    proc, url, log = _start_server(model_dir, tmp_path / "serve.log", "--graceful-s", "2", "--wait-when-idle",
                                   "--max-wait-ms", "10000")
    try:
        answer = {}

        def request():
            try:
                answer["r"] = httpx.post(url + "/predict", json={"inputs": [{"text": "a fine film"}]}, timeout=30)
            except httpx.TransportError as exc:
                answer["error"] = exc

        thread = threading.Thread(target=request)
        thread.start()
        time.sleep(1.0)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        thread.join(30)
        assert "r" in answer, answer.get("error")
        r = answer["r"]
        assert r.status_code == 503 and "shutting down" in _shape(r)["error"]
        assert time.monotonic() - started < 5
        assert proc.wait(30) in (0, -signal.SIGTERM)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        log.close()


def test_past_max_connections_the_503_has_the_documented_shape(model_dir, tmp_path):
    """Three clients hold connections by dripping a request head that never ends (the app cannot see them: a
    request starts only once its head is complete); a fourth connection's request is answered 503 in the JSON
    shape. Today: uvicorn's plain-text "Service Unavailable". Once they leave, requests are served again."""
    proc, url, log = _start_server(model_dir, tmp_path / "serve.log", "--max-connections", "3")
    port = int(url.rsplit(":", 1)[1])
    drips = []
    try:
        for _ in range(3):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(b"POST /predict HTTP/1.1\r\nHost: x\r\n")  # ... and nothing more
            drips.append(s)
        time.sleep(0.5)
        r = httpx.get(url + "/health", timeout=10)
        assert r.status_code == 503 and "--max-connections" in _shape(r)["error"], r.text
        assert r.headers.get("connection") == "close"
        r = httpx.post(url + "/predict", json={"inputs": [{"text": "a fine film"}]}, timeout=10)
        assert r.status_code == 503 and _shape(r)
        for s in drips:
            s.close()
        deadline = time.monotonic() + 10
        while (r := httpx.post(url + "/predict", json={"inputs": [{"text": "a fine film"}]}, timeout=10)
               ).status_code == 503 and time.monotonic() < deadline:
            time.sleep(0.2)  # uvicorn notices the closed connections on its next loop turns
        assert r.status_code == 200, r.text
    finally:
        for s in drips:
            s.close()
        proc.kill()
        proc.wait(30)
        log.close()


def test_clients_that_leave_while_queued_get_no_model_time(model_dir, tmp_path):
    """A request waits 4 s in the batch queue for company (--wait-when-idle); three more join it and their clients
    close the connection while queued (after the body was taken, so the middleware's check has passed). The model
    then runs the first request's one item only, and /info counts the three dropped. Today the three went to the
    model with it."""
    import threading

    proc, url, log = _start_server(model_dir, tmp_path / "serve.log", "--wait-when-idle", "--max-wait-ms", "4000")
    port = int(url.rsplit(":", 1)[1])
    task = "text-classification"
    try:
        before = httpx.get(url + "/info").json()
        answer = {}

        def keeper():
            answer["r"] = httpx.post(url + "/predict", json={"inputs": [{"text": "a fine film"}]}, timeout=30)

        thread = threading.Thread(target=keeper)
        thread.start()
        time.sleep(0.3)
        body = json.dumps({"inputs": [{"text": "a dull film"}]}).encode()
        head = (f"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        leavers = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(3)]
        for s in leavers:
            s.sendall(head + body)
        time.sleep(0.5)  # queued behind the first request's window
        for s in leavers:
            s.close()
        thread.join(30)
        assert answer["r"].status_code == 200, answer["r"].text
        after = httpx.get(url + "/info").json()
        assert after["items_run"][task] - before["items_run"][task] == 1
        assert after["items_dropped"][task] - before["items_dropped"][task] == 3
        assert after["dropped_disconnected"] - before["dropped_disconnected"] == 3
    finally:
        proc.kill()
        proc.wait(30)
        log.close()
