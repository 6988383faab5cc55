"""Hub ids ("org/name") resolve through a local Hugging Face cache laid out as huggingface_hub lays it out
(refs/main -> snapshots/<commit>/ files linked into blobs/), honouring HF_HUB_CACHE and HF_HOME; never the network."""

from __future__ import annotations

import hashlib
import os

import pytest
import torch

import litebert
from litebert.cli import main
from litebert.errors import CheckpointError
from litebert.hub_cache import hub_cache_dir, resolve_model_path
from litebert.pretrain import PretrainConfig
from litebert.pretrain_setup import model_config_for
from litebert.tokenizer import AlbertTokenizer, load_tokenizer

COMMIT = "0123456789abcdef0123456789abcdef01234567"
HUB_VARS = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME")


def _lay_out_cache(cache, repo_id, files):
    """models--org--name/{blobs/<sha256>, snapshots/<commit>/<file> -> ../../blobs/<sha256>, refs/main}."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    (repo / "blobs").mkdir(parents=True)
    (repo / "snapshots" / COMMIT).mkdir(parents=True)
    (repo / "refs").mkdir()
    for name, data in files.items():
        digest = hashlib.sha256(data).hexdigest()
        (repo / "blobs" / digest).write_bytes(data)
        os.symlink(f"../../blobs/{digest}", repo / "snapshots" / COMMIT / name)
    (repo / "refs" / "main").write_text(COMMIT)  # huggingface_hub writes the hash without a newline
    return repo / "snapshots" / COMMIT


@pytest.fixture
def model_files(shared_data, tmp_path):
    """A tiny masked-LM directory with the official 30k SentencePiece model, as files to put into the cache."""
    torch.manual_seed(0)
    config = litebert.AlbertConfig(vocab_size=30000, embedding_size=8, hidden_size=16, num_hidden_layers=1,
                                   num_attention_heads=2, intermediate_size=32, max_position_embeddings=32)
    model = litebert.AlbertForMaskedLM(config).eval()
    tok = AlbertTokenizer(shared_data / "albert-vocab" / "30k-clean.model")
    model.save_pretrained(tmp_path / "src", tokenizer=tok)
    return model, {p.name: p.read_bytes() for p in (tmp_path / "src").iterdir()}


@pytest.fixture
def clean_env(monkeypatch):
    for var in HUB_VARS:
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


@pytest.mark.parametrize("variable", ["HF_HUB_CACHE", "HF_HOME"])
def test_hub_id_loads_from_the_local_cache(model_files, clean_env, tmp_path, capsys, variable):
    model, files = model_files
    root = tmp_path / "hf"
    cache = root / "hub" if variable == "HF_HOME" else root
    snapshot = _lay_out_cache(cache, "albert/tiny-test", files)
    clean_env.setenv(variable, str(root))
    assert hub_cache_dir() == cache
    assert resolve_model_path("albert/tiny-test") == snapshot

    loaded = litebert.AlbertForMaskedLM.from_pretrained("albert/tiny-test").eval()
    for name, tensor in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
    assert load_tokenizer("albert/tiny-test").encode("Hello, my dog is cute").input_ids == \
        [2, 10975, 15, 51, 1952, 25, 10901, 3]
    assert main(["fill-mask", "--model", "albert/tiny-test", "my dog is [MASK]."]) == 0
    assert "[MASK] #1:" in capsys.readouterr().out
    # Continued pretraining from a Hub id starts from the cached weights.
    config, init_dir = model_config_for(PretrainConfig(model="albert/tiny-test", data="unused", max_seq_length=32),
                                        30000)
    assert init_dir == snapshot and config.hidden_size == 16


def test_hub_id_not_in_cache_says_how_to_get_it(clean_env, tmp_path, capsys):
    clean_env.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    with pytest.raises(CheckpointError, match=r"albert/albert-base-v2: no such local file or directory, and not in the "
                                              r"Hugging Face cache at .*empty.*hf download albert/albert-base-v2"):
        litebert.AlbertModel.from_pretrained("albert/albert-base-v2")
    assert main(["fill-mask", "--model", "albert/albert-base-v2", "a [MASK]."]) == 2
    err = capsys.readouterr().err
    assert "hf download albert/albert-base-v2" in err and "Traceback" not in err


def test_broken_cache_entries_are_named(model_files, clean_env, tmp_path):
    _, files = model_files
    clean_env.setenv("HF_HUB_CACHE", str(tmp_path))
    snapshot = _lay_out_cache(tmp_path, "org/model", files)
    (snapshot.parents[1] / "refs" / "main").write_text("f" * 40)
    with pytest.raises(CheckpointError, match=r"refs/main names commit f{40}, but .* is missing"):
        resolve_model_path("org/model")
    (snapshot.parents[1] / "refs" / "main").unlink()
    with pytest.raises(CheckpointError, match="has no refs/main"):
        resolve_model_path("org/model")
    # A path that exists is taken as it is, whatever it looks like.
    assert resolve_model_path(snapshot) == snapshot
