"""The README's inference snippets run as written (in a folder holding a tiny fine-tuned `runs/sst2`): the
pipeline calls, `litebert serve` with its curl line (on a free port instead of 8080), and the ONNX export."""

import json
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from litebert.finetune import FinetuneConfig, finetune
from tiny_models import save_model, tokenizer

README = Path(__file__).resolve().parents[1] / "README.md"


def snippets() -> list[tuple[str, str]]:
    """(kind, code) of every block marked `<!-- readme-test: KIND -->`, in README order."""
    return re.findall(r"<!-- readme-test: (\w+) -->\n```\w+\n(.*?)```", README.read_text(), flags=re.S)


def litebert_cmd(line: str) -> list[str]:
    words = shlex.split(line.split("#")[0].rstrip(" &\n"))
    assert words[0] == "litebert", line
    return [sys.executable, "-m", "litebert", *words[1:]]


def test_readme_inference_snippets_run(tmp_path, shared_data, monkeypatch):
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("fastapi")
    pytest.importorskip("onnxruntime")
    from test_serve import free_port

    init = save_model(tmp_path / "init", "AlbertForPreTraining", tokenizer(shared_data))
    finetune(FinetuneConfig(task="sst-2", model=str(init), data=str(shared_data / "glue" / "SST-2"),
                            out=str(tmp_path / "runs" / "sst2"), steps=3, batch_size=4, max_seq_length=64,
                            max_train_examples=16, max_eval_examples=8, precision="fp32", lr=1e-4))
    monkeypatch.chdir(tmp_path)
    blocks = snippets()
    assert [k for k, _ in blocks] == ["python", "serve", "onnx", "python"]
    namespace: dict = {}
    exec(blocks[0][1], namespace)
    assert namespace["one"]["label"] in ("negative", "positive") and len(namespace["many"]) == 2
    assert len(namespace["vectors"]) == 2
    scores = [score for score, _ in namespace["ranked"]]
    assert len(scores) == 3 and scores == sorted(scores, reverse=True) and all(-1 <= x <= 1 for x in scores)

    serve_line, curl_line = [l for l in blocks[1][1].splitlines() if l and not l.startswith("#")]
    port = str(free_port())
    server = subprocess.Popen(litebert_cmd(serve_line.replace("8080", port)), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 180
        while time.time() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/ready", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.3)
        assert shutil.which("curl"), "the README's example uses curl"
        out = subprocess.run(curl_line.replace("8080", port), shell=True, capture_output=True, text=True, timeout=60)
        answer = json.loads(out.stdout)["outputs"][0]
        assert answer["label"] == namespace["one"]["label"]
        assert answer["score"] == pytest.approx(namespace["one"]["score"], abs=1e-5)
    finally:
        server.terminate()
        server.wait(30)

    (export_line,) = [l for l in blocks[2][1].splitlines() if l.strip()]
    assert subprocess.run(litebert_cmd(export_line), timeout=300).returncode == 0
    exec(blocks[3][1], namespace)  # loads sst2-onnx with backend="onnx" and checks its label
