"""The README's Python snippet runs as written."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_python_snippet_runs_as_written(tmp_path, monkeypatch, shared_data):
    from litebert.tokenizer import AlbertTokenizer

    snippet = re.search(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S).group(1)
    # what the snippet expects to find: a tokenizer at runs/demo/tokenizer (here ALBERT's own 30k vocabulary)
    monkeypatch.chdir(tmp_path)
    AlbertTokenizer(shared_data / "albert-vocab" / "30k-clean.model").save_pretrained(tmp_path / "runs/demo/tokenizer")
    scope: dict = {}
    exec(compile(snippet, str(README), "exec"), scope)
    assert tuple(scope["out"].mlm_logits.shape) == (1, 2, 30000) and tuple(scope["out"].sop_logits.shape) == (1, 2)
    assert scope["clf"].load_report["initialised"] and scope["enc"].offsets
    assert (tmp_path / "my-albert" / "model.safetensors").is_file()
    inputs = scope["inputs"]  # the tokenizer call: transformers' fields, padded into tensors
    assert list(inputs) == ["input_ids", "token_type_ids", "attention_mask"] and tuple(scope["logits"].shape) == (2, 3)
    assert inputs.input_ids[1].tolist()[:int(inputs.attention_mask[1].sum())] == \
        scope["tok"].encode("dull.", pair="Yes.").input_ids
