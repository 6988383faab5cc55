"""Promise 7: files from elsewhere cannot run code.

- Weights load only from safetensors: a model directory that has only a pickled `pytorch_model.bin` is refused,
  and the pickle is never opened.
- Training state loads with torch.load(weights_only=True): a crafted trainer_state.pt, in a checkpoint whose COMMIT
  matches it (so `--resume auto` picks it), is refused (the run falls back to the checkpoint before) and its
  payload never runs.
- Nothing in the package fetches or runs remote code: a scan of its source (the AST, so comments and strings do not
  count) finds no network library, no torch.hub, no trust_remote_code, no eval/exec, no pickle loading and no
  torch.load without weights_only=True.
"""

from __future__ import annotations

import ast
import hashlib
import json
import pickle
import shutil
from pathlib import Path

import pytest
import torch

import litebert
from harness import pretrain_args
from litebert.cli import main as cli_main
from litebert.convert import load_hf_albert
from litebert.errors import LitebertError
from litebert.model import AlbertForPreTraining


class Payload:
    """Pickles to a call that creates `marker`: what a malicious checkpoint would do, made harmless."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').close()",)


def write_payload(path: Path, marker: Path, form: str = "torch.save") -> None:
    """A state whose loading runs Payload, written as torch.save writes (a zip holding a protocol-2 pickle), as
    torch's legacy format, or as a bare pickle of Python's default protocol (4: opcodes torch's safe loader has no
    case for, so it refused them with an empty reason)."""
    state = {"step": 8, "optimizer": Payload(marker)}
    if form == "pickle":
        path.write_bytes(pickle.dumps(state))
    else:
        torch.save(state, path, _use_new_zipfile_serialization=form == "torch.save")
    # The payload is live: an unsafe load runs it. (Checked on a copy, then the marker is removed.)
    probe = path.with_name("probe.pt")
    shutil.copy(path, probe)
    try:
        torch.load(probe, weights_only=False)  # (a bare pickle runs it too, before torch finds no file header)
    except Exception:
        assert form == "pickle"
    assert marker.exists()
    marker.unlink()
    probe.unlink()


@pytest.mark.parametrize("form", ["torch.save", "legacy torch.save", "pickle"])
def test_crafted_training_state_is_refused_and_never_run(tiny_data, reference_runs, tmp_path, capsys, form):
    run, marker = tmp_path / "run", tmp_path / "payload-ran"
    shutil.copytree(reference_runs["single"], run)
    ckpt = run / "checkpoint-8"
    write_payload(ckpt / "trainer_state.pt", marker, form)
    # Re-commit so the checkpoint is complete by every check and --resume auto picks it.
    manifest = json.loads((ckpt / "COMMIT").read_text())
    data = (ckpt / "trainer_state.pt").read_bytes()
    manifest["files"]["trainer_state.pt"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (ckpt / "COMMIT").write_text(json.dumps(manifest))

    # Refused, never run; the checkpoint counts as damaged, so the run falls back to checkpoint-6 (see
    # test_resume_integrity.py) and redoes steps 7 and 8.
    assert cli_main(pretrain_args(tiny_data, run, resume="auto")) == 0
    err = capsys.readouterr().err
    assert f"skipping checkpoint-8: {ckpt / 'trainer_state.pt'}: cannot load training state (UnpicklingError" in err
    assert "refused, never executed" in err and "Traceback" not in err
    # What was refused and why: the callable it imports, and torch's reason (never empty, never its advice to load
    # unsafely or to allowlist the callable); no torch warning about the pickle protocol.
    assert "its pickle imports builtins.exec, which a training state never holds" in err, err
    reason = err.split("cannot load training state (UnpicklingError:", 1)[1].split(");", 1)[0].strip()
    assert reason and "weights_only" not in reason and "safe_globals" not in reason, err
    assert "Detected pickle protocol" not in err and "Warning" not in err, err
    assert "resuming from checkpoint-6 instead" in err
    assert not marker.exists()


def test_weights_load_only_from_safetensors(reference_runs, tmp_path):
    model_dir, marker = tmp_path / "model", tmp_path / "payload-ran"
    model_dir.mkdir()
    shutil.copy(reference_runs["single"] / "checkpoint-8" / "config.json", model_dir)
    write_payload(model_dir / "pytorch_model.bin", marker)
    with pytest.raises(LitebertError, match="model.safetensors"):
        AlbertForPreTraining.from_pretrained(model_dir)
    with pytest.raises(LitebertError, match="never unpickles"):
        load_hf_albert(model_dir)
    assert not marker.exists()
    # With model.safetensors beside it, the safetensors file is what loads; the pickle is still never opened.
    shutil.copy(reference_runs["single"] / "checkpoint-8" / "model.safetensors", model_dir)
    AlbertForPreTraining.from_pretrained(model_dir)
    assert not marker.exists()


# Libraries that fetch from elsewhere (a bare socket, e.g. to find a free local port, fetches nothing).
NETWORK_MODULES = {"urllib", "urllib2", "urllib3", "requests", "httpx", "aiohttp", "http", "ftplib",
                   "huggingface_hub", "pycurl", "websocket", "paramiko"}
PICKLE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "joblib", "shelve", "marshal"}


def source_violations(path: Path) -> list[str]:
    """What in one module could fetch or run code from elsewhere, as 'file:line: what'."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []

    def bad(node, what):
        found.append(f"{path}:{node.lineno}: {what}")

    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                root = name.split(".")[0]
                if root in NETWORK_MODULES:
                    bad(node, f"imports {name} (network)")
                if root in PICKLE_MODULES:
                    bad(node, f"imports {name} (unpickling)")
                if name.startswith("torch.hub"):
                    bad(node, "imports torch.hub")
        elif isinstance(node, ast.Attribute) and node.attr == "hub" and getattr(node.value, "id", None) == "torch":
            bad(node, "uses torch.hub")
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            owner = getattr(func.value, "id", "") if isinstance(func, ast.Attribute) else ""
            keywords = {k.arg: k.value for k in node.keywords}
            if isinstance(func, ast.Name) and name in ("eval", "exec", "__import__"):
                bad(node, f"calls {name}()")
            if name == "load" and owner == "torch":
                flag = keywords.get("weights_only")
                if not (isinstance(flag, ast.Constant) and flag.value is True):
                    bad(node, "torch.load without weights_only=True")
            if name == "load" and owner in ("np", "numpy"):
                flag = keywords.get("allow_pickle")
                if flag is not None and not (isinstance(flag, ast.Constant) and flag.value is False):
                    bad(node, "numpy.load with allow_pickle")
            if "trust_remote_code" in keywords:
                flag = keywords["trust_remote_code"]
                if not (isinstance(flag, ast.Constant) and flag.value is False):
                    bad(node, "trust_remote_code not False")
    return found


def test_package_source_fetches_and_runs_no_foreign_code():
    root = Path(litebert.__file__).parent
    files = sorted(root.rglob("*.py"))
    assert len(files) > 20
    violations = [v for f in files for v in source_violations(f)]
    assert not violations, "\n".join(violations)


def test_the_source_scan_catches_what_it_looks_for(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import urllib.request\nimport pickle\nimport torch\ntorch.hub.load('x', 'y')\n"
                   "torch.load('f')\ntorch.load('f', weights_only=False)\neval('1')\n"
                   "m.from_pretrained('x', trust_remote_code=True)\nimport numpy as np\n"
                   "np.load('a', allow_pickle=True)\n")
    assert len(source_violations(bad)) == 8


def test_a_refused_state_file_gets_no_advice_to_load_it_unsafely(tmp_path):
    """torch's refusal ends with how to load the file anyway (weights_only=False, which runs its code); our
    message keeps the reason (the refused global) and drops that advice."""
    from litebert.checkpoint import load_state

    marker = tmp_path / "payload-ran"
    write_payload(tmp_path / "state.pt", marker)
    with pytest.raises(LitebertError) as exc:
        load_state(tmp_path / "state.pt")
    message = str(exc.value)
    assert "weights_only" not in message and "exec" in message and "refused, never executed" in message, message
    assert not marker.exists()


# ------------------------------------------------------------------------------------------ tokenizer.json

TEXT = "the film [EVIL] was fine, in 1999."


def _tampered(data: dict, how: str, piece_id: int | None = None) -> bytes:
    """tokenizer.json's content edited as `how` says (`piece_id`: the piece to rename)."""
    data = json.loads(json.dumps(data))
    if how == "a piece renamed":
        data["model"]["vocab"][piece_id][0] = "\u2581zzzz"
    elif how == "a character map that is not base64":
        step = next(s for s in data["normalizer"]["normalizers"] if s["type"] == "Precompiled")
        step["precompiled_charsmap"] = "!!!"
    elif how == "an added token past the vocab":
        data["added_tokens"].append({**data["added_tokens"][0], "id": len(data["model"]["vocab"]) + 10**6,
                                     "content": "[EVIL]"})
    elif how == "an added token that is not an object":
        data["added_tokens"].append(7)
    elif how == "a normalizer that is not a step":
        data["normalizer"]["normalizers"] = 3
    else:
        return json.dumps(data).encode()[:2000]  # cut short
    return json.dumps(data).encode()


def _transformers_ids(directory: Path):
    """What stock transformers makes of the directory: its ids for TEXT, or the exception it raised (the tokenizers
    library panics on some files: a BaseException)."""
    transformers = pytest.importorskip("transformers")
    try:
        return transformers.AutoTokenizer.from_pretrained(directory)(TEXT)["input_ids"]
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:
        return exc


@pytest.mark.parametrize("how, named", [
    ("a piece renamed", r"model\.vocab\[\d+\]\[0\] is '\u2581zzzz' where"),
    ("a character map that is not base64", r"normalizer\.normalizers\[\d+\]\.precompiled_charsmap is '!!!'"),
    ("an added token past the vocab", "added_tokens has 6 entries where 5 were written"),
    ("cut short", "not valid JSON"),
])
def test_a_tampered_tokenizer_json_beside_spiece_model_is_refused(tiny_data, tmp_path, how, named):
    """litebert tokenizes a directory it saved from spiece.model, but transformers reads its tokenizer.json first.
    Edited, that file makes transformers fail (a JSON error, a panic in the tokenizers library) or give other ids
    than spiece.model (a renamed piece; an added token with an id past the model's embeddings), so litebert
    refuses the directory, naming the file and the field. (Before: loaded without a word, the file unread.)"""
    from litebert.errors import TokenizerError
    from litebert.tokenizer import load_tokenizer

    good, bad = tmp_path / "good", tmp_path / "bad"
    shutil.copytree(tiny_data[1], good)
    tokenizer = load_tokenizer(good)
    ids = tokenizer(TEXT)["input_ids"]
    assert _transformers_ids(good) == ids  # untampered, the two agree
    shutil.copytree(good, bad)
    longest = max(ids[1:-1], key=lambda i: len(tokenizer.id_to_token(i)))  # a piece TEXT is made of
    (bad / "tokenizer.json").write_bytes(_tampered(json.loads((good / "tokenizer.json").read_text()), how, longest))

    seen = _transformers_ids(bad)
    assert seen != ids, "transformers read the tampered file and still gave spiece.model's ids"
    with pytest.raises(TokenizerError, match=named) as refused:
        load_tokenizer(bad)
    assert str(bad / "tokenizer.json") in str(refused.value)


def test_a_reformatting_save_of_tokenizer_json_is_not_refused(tiny_data, tmp_path):
    """transformers saving the directory in place rewrites tokenizer.json with other digits: the same tokenizer,
    which litebert still loads, with the same ids."""
    transformers = pytest.importorskip("transformers")
    from litebert.tokenizer import load_tokenizer

    shutil.copytree(tiny_data[1], tmp_path / "tok")
    before = (tmp_path / "tok" / "tokenizer.json").read_bytes()
    ids = load_tokenizer(tmp_path / "tok")(TEXT)["input_ids"]
    transformers.AutoTokenizer.from_pretrained(tmp_path / "tok").save_pretrained(tmp_path / "tok")
    assert (tmp_path / "tok" / "tokenizer.json").read_bytes() != before
    assert load_tokenizer(tmp_path / "tok")(TEXT)["input_ids"] == ids == _transformers_ids(tmp_path / "tok")


@pytest.mark.parametrize("how, named", [
    ("an added token past the vocab", r"added_tokens\[5\] \('\[EVIL\]', id \d+\) is not a piece of model\.vocab"),
    ("an added token that is not an object", r"added_tokens\[5\] = 7; expected an object"),
    ("a normalizer that is not a step", "normalizer = .*expected a step object"),
])
def test_a_tampered_transformers_only_directory_is_refused(tiny_data, tmp_path, how, named):
    """A directory transformers saved (tokenizer.json alone, no spiece.model): litebert rebuilds its SentencePiece
    model from the file, and refuses one it cannot rebuild faithfully, naming the field. (Before: an
    AttributeError, or an added token past the vocab dropped without a word while transformers gives its id.)"""
    transformers = pytest.importorskip("transformers")
    from litebert.errors import TokenizerError
    from litebert.tokenizer import load_tokenizer

    hf = tmp_path / "hf"
    transformers.AutoTokenizer.from_pretrained(tiny_data[1]).save_pretrained(hf)
    assert not (hf / "spiece.model").exists()
    load_tokenizer(hf)  # as saved, it loads
    (hf / "tokenizer.json").write_bytes(_tampered(json.loads((hf / "tokenizer.json").read_text()), how))
    with pytest.raises(TokenizerError, match=named):
        load_tokenizer(hf)
