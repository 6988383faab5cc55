"""`litebert serve`'s Open Inference Protocol (KServe v2) endpoints: the real server on a loopback port, driven by
Triton's own HTTP client (tritonclient[http], `pip install litebert[oip]`) and by plain JSON as the KServe spec
writes it; the answers equal the Python API's. The tensor conversions are checked alone below."""

import json

import numpy as np
import pytest

import litebert
from litebert.serving_v2 import ProtocolError, parse_body, request_rows, result_tensors
from test_serve import Server
from tiny_models import TEXTS, save_model, tokenizer

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, shared_data):
    return save_model(tmp_path_factory.mktemp("v2") / "sentiment", "AlbertForSequenceClassification",
                      tokenizer(shared_data), num_labels=2, label_names=["neg", "pos"])


@pytest.fixture(scope="module")
def server(model_dir):
    s = Server(model_dir, "--backend", "fp32", "--max-text-chars", "200")
    try:
        yield s.wait_ready()
    finally:
        s.stop()


def test_triton_client_reads_metadata_and_infers(server, model_dir):
    http = pytest.importorskip("tritonclient.http")
    from tritonclient.utils import InferenceServerException

    client = http.InferenceServerClient(url=server.url.removeprefix("http://"))
    assert client.is_server_live() and client.is_server_ready() and client.is_model_ready("sentiment")
    assert not client.is_model_ready("another")
    meta = client.get_model_metadata("sentiment")
    assert meta["name"] == "sentiment" and meta["versions"] == ["1"]
    assert [(t["name"], t["datatype"], t["shape"]) for t in meta["inputs"]] == [("text", "BYTES", [-1]),
                                                                               ("text_pair", "BYTES", [-1])]
    outputs = {t["name"]: (t["datatype"], t["shape"]) for t in meta["outputs"]}
    assert outputs == {"label": ("BYTES", [-1]), "label_id": ("INT64", [-1]), "score": ("FP32", [-1]),
                       "scores": ("FP32", [-1, 2]), "truncated_tokens": ("INT64", [-1])}

    expected = litebert.pipeline(None, model_dir, "fp32")(TEXTS)
    for binary in (True, False):  # tritonclient's default binary tensor extension, then plain JSON
        text = http.InferInput("text", [len(TEXTS)], "BYTES")
        text.set_data_from_numpy(np.array(TEXTS, dtype=object), binary_data=binary)
        result = client.infer("sentiment", [text])
        assert [x.decode() if isinstance(x, bytes) else x for x in result.as_numpy("label")] == [e["label"] for e in expected]
        assert result.as_numpy("label_id").tolist() == [e["label_id"] for e in expected]
        np.testing.assert_allclose(result.as_numpy("scores"), [list(e["scores"].values()) for e in expected],
                                   atol=1e-5)
    only = client.infer("sentiment", [text], outputs=[http.InferRequestedOutput("score", binary_data=False)])
    assert only.get_response()["outputs"][0]["name"] == "score" and len(only.get_response()["outputs"]) == 1

    bad = http.InferInput("sentence", [1], "BYTES")
    bad.set_data_from_numpy(np.array(["a"], dtype=object))
    with pytest.raises(InferenceServerException, match=r"inputs\[sentence\].*unknown input"):
        client.infer("sentiment", [bad])


def test_kserve_json_request_and_errors_naming_the_tensor(server, model_dir):
    url = server.url + "/v2/models/sentiment/versions/1/infer"
    pairs = [("a man plays a guitar .", "a person plays music .")] * 2
    body = {"id": "r1", "inputs": [{"name": "text", "shape": [2, 1], "datatype": "BYTES", "data": [[a] for a, _ in pairs]},
                                   {"name": "text_pair", "shape": [2], "datatype": "BYTES", "data": [b for _, b in pairs]}]}
    r = httpx.post(url, json=body, timeout=30)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["model_name"] == "sentiment" and answer["id"] == "r1" and answer["parameters"]["precision"] == "fp32"
    expected = litebert.pipeline(None, model_dir, "fp32")(pairs)
    score = next(t for t in answer["outputs"] if t["name"] == "score")
    assert score["shape"] == [2] and score["data"] == pytest.approx([e["score"] for e in expected], abs=1e-5)

    cases = [({"inputs": [{"name": "text", "shape": [1], "datatype": "BYTES", "data": ["a" * 201]}]},
              "inputs[text].data[0]"),  # over --max-text-chars: the same check as /predict
             ({"inputs": [{"name": "text", "shape": [2], "datatype": "BYTES", "data": ["a"]}]}, "inputs[text]"),
             ({"inputs": [{"name": "text", "shape": [1], "datatype": "FP32", "data": [1.0]}]}, "inputs[text]"),
             ({"inputs": [{"name": "text", "shape": [1], "datatype": "BYTES", "data": ["a"]}],
               "parameters": {"top_k": 2}}, "parameters.top_k"),  # another task's option
             ({"inputs": [{"name": "text", "shape": [1], "datatype": "BYTES", "data": ["a"]}],
               "outputs": [{"name": "logits"}]}, "outputs"),
             ({"inputs": []}, "inputs")]
    for bad, field in cases:
        r = httpx.post(url, json=bad, timeout=30)
        assert r.status_code == 422, (bad, r.text)
        assert field in [f["field"] for f in r.json()["fields"]] and field in r.json()["error"], r.text
    assert httpx.post(server.url + "/v2/models/other/infer", json=body, timeout=30).status_code == 404
    assert httpx.get(server.url + "/v2").json()["name"] == "litebert"


def test_result_tensors_by_kind():
    # a sentence task's columns, an embedding, fill-mask's nested lists, a column with a missing value
    cols = result_tensors([{"label": "a", "label_id": 1, "score": 0.5, "ok": True, "scores": {"a": 0.5, "b": 0.5}}])
    assert [(t["name"], t["datatype"], t["shape"]) for t in cols] == [
        ("label", "BYTES", [1]), ("label_id", "INT64", [1]), ("score", "FP32", [1]), ("ok", "BOOL", [1]),
        ("scores", "FP32", [1, 2])]
    (emb,) = result_tensors([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]])
    assert (emb["name"], emb["shape"], emb["data"]) == ("embedding", [2, 3], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    masks = [[[{"token": "x", "score": 0.9}]]]
    (out,) = result_tensors(masks)
    assert (out["name"], out["datatype"], json.loads(out["data"][0])) == ("output", "BYTES", masks[0])
    (odds,) = result_tensors([{"null_odds": None}, {"null_odds": 0.5}])
    assert odds["datatype"] == "BYTES" and odds["data"] == ["null", "0.5"]


def test_binary_inputs_and_their_errors():
    texts = ["één", "two"]
    raw = b"".join(len(t.encode()).to_bytes(4, "little") + t.encode() for t in texts)
    header = json.dumps({"inputs": [{"name": "text", "shape": [2], "datatype": "BYTES",
                                     "parameters": {"binary_data_size": len(raw)}}]}).encode()
    request = parse_body(header + raw, str(len(header)))
    assert request_rows(request, {"text": False}) == ([{"text": "één"}, {"text": "two"}], {})
    with pytest.raises(ProtocolError, match="runs past"):
        parse_body(header + raw[:-2], str(len(header)))
    with pytest.raises(ProtocolError, match="not JSON"):
        parse_body(b"{", None)
    options = {"inputs": [{"name": "options", "shape": [1, 2], "datatype": "BYTES", "data": ["a", "b"]}],
               "parameters": {"priority": 1}}
    assert request_rows(options, {"options": True}) == ([{"options": ["a", "b"]}], {})
