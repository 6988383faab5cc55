"""Promise 18: SIGTERM stops `litebert serve` without losing a request, and leaves no process behind.

The signals are real (sent to a real `litebert serve` process) and so is the model call they arrive in: a model of
1,024 layers (ALBERT shares one block's weights, so it is small and slow), whose call on 8 texts of 400 words takes
seconds on a CPU. /info's `model_calls` says when the call has begun.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

sys.path.insert(0, str(Path(__file__).parents[1]))
from test_serve_hardening import _children, _shape, _start_server  # noqa: E402
from tiny_models import save_model, tokenizer  # noqa: E402

LONG = {"inputs": [{"text": f"text {i}: " + "the film wanders and the actors " * 80} for i in range(8)]}


@pytest.fixture(scope="module")
def deep_model(tmp_path_factory, shared_data):
    return save_model(tmp_path_factory.mktemp("deep") / "clf", "AlbertForSequenceClassification",
                      tokenizer(shared_data), num_labels=2, label_names=["neg", "pos"], num_hidden_layers=1024,
                      max_position_embeddings=512)


def _post_in_background(url: str) -> tuple[threading.Thread, dict]:
    answer: dict = {}

    def post():
        try:
            answer["r"] = httpx.post(url + "/predict", json=LONG, timeout=120)
        except httpx.TransportError as exc:
            answer["error"] = exc

    thread = threading.Thread(target=post)
    thread.start()
    return thread, answer


def _wait_inside_the_model_call(url: str, thread: threading.Thread) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        calls = httpx.get(url + "/info", timeout=10).json()["model_calls"]
        if sum(calls.values()) >= 1:
            assert thread.is_alive(), "the answer came before the signal could be sent"
            return
        time.sleep(0.02)
    raise AssertionError("the request never reached the model")


def _stop(proc) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(30)


@pytest.mark.parametrize("graceful_s, answered", [(120, 200), (1, 503)])
def test_sigterm_inside_a_model_call_answers_and_exits_0(deep_model, tmp_path, graceful_s, answered):
    """SIGTERM while the request is inside the model call: with time to spare (--graceful-s 120) the answer is
    sent, all 8 outputs; with less time than the call takes (--graceful-s 1) a JSON 503 saying to send it again
    comes before the limit. Either way the connection gets an answer, and the server exits 0 once the call is done.
    (Before: exit code -15, uvicorn raising the signal again after its shutdown.)"""
    proc, url, log = _start_server(deep_model, tmp_path / "serve.log", "--backend", "fp32", "--graceful-s",
                                   str(graceful_s))
    try:
        thread, answer = _post_in_background(url)
        _wait_inside_the_model_call(url, thread)
        proc.send_signal(signal.SIGTERM)
        thread.join(120)
        assert "r" in answer, f"no answer: {answer.get('error')!r}"
        r = answer["r"]
        assert r.status_code == answered, r.text[:500]
        if answered == 200:
            assert len(r.json()["outputs"]) == len(LONG["inputs"])
        else:
            assert "shutting down" in _shape(r)["error"] and "send it again" in _shape(r)["error"]
        assert proc.wait(120) == 0, log.seek(0) or log.read()[-3000:]
        log.seek(0)
        assert "Traceback" not in log.read()
    finally:
        _stop(proc)
        log.close()


def _descendants(pid: int) -> set[int]:
    """Every process below `pid` (workers, and anything they or multiprocessing started)."""
    found, todo = set(), [pid]
    while todo:
        parent = todo.pop()
        try:
            children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
        except OSError:
            continue
        for child in map(int, children):
            found.add(child)
            todo.append(child)
    return found


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_sigterm_to_workers_ends_every_process(deep_model, tmp_path):
    """`serve --workers 2` under SIGTERM: the parent exits 0 and every process it started (the workers and their
    helpers) has ended: no orphan keeps the port or the model."""
    proc, url, log = _start_server(deep_model, tmp_path / "serve.log", "--backend", "fp32", "--workers", "2")
    try:
        deadline = time.monotonic() + 120
        while len(_children(proc.pid)) < 2 or httpx.get(url + "/ready", timeout=10).status_code != 200:
            assert time.monotonic() < deadline and proc.poll() is None, log.seek(0) or log.read()[-3000:]
            time.sleep(0.3)
        below = _descendants(proc.pid)
        assert len(_children(proc.pid)) == 2 and _children(proc.pid) <= below
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 0, log.seek(0) or log.read()[-3000:]
        deadline = time.monotonic() + 30
        while any(map(_running, below)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [pid for pid in below if _running(pid)], "left running after the server exited"
        with pytest.raises(httpx.TransportError):
            httpx.get(url + "/health", timeout=5)
    finally:
        for pid in _descendants(proc.pid) if proc.poll() is None else set():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _stop(proc)
        log.close()
