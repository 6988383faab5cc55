"""Continued (domain- or task-adaptive) pretraining (issue 23): `pretrain --model MODEL_DIR` starts from the
directory's weights with a fresh optimizer and schedule, on a store built with the model's own tokenizer."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent / "reliability"))
from harness import TINY_MODEL, config_args, write_pydoc_corpus  # noqa: E402

from litebert import AlbertConfig, AlbertForPreTraining  # noqa: E402
from litebert.cli import main as cli_main  # noqa: E402
from litebert.errors import TokenizerError  # noqa: E402
from litebert.pretrain import PretrainConfig, pretrain  # noqa: E402
from litebert.pretrain_setup import setup  # noqa: E402
from litebert.pretrained import read_model_state  # noqa: E402


@pytest.fixture(scope="module")
def books(tmp_path_factory):
    """A tokenizer and a store of the first 60 pydoc documents ("general" text), a store of the next 40 built with
    the same tokenizer ("new domain"), and one built with another tokenizer of the same vocabulary size."""
    from litebert.data.store_build import build_store
    from litebert.tokenizer_train import train_sentencepiece

    root = tmp_path_factory.mktemp("continued")
    write_pydoc_corpus(root / "all.txt", 100)
    docs = (root / "all.txt").read_text().split("\n\n")
    (root / "general.txt").write_text("\n\n".join(docs[:60]) + "\n")
    (root / "domain.txt").write_text("\n\n".join(docs[60:]) + "\n")
    train_sentencepiece([root / "general.txt"], root / "tok", vocab_size=300)
    train_sentencepiece([root / "domain.txt"], root / "other-tok", vocab_size=300)
    for name, text, tok in (("general", "general.txt", "tok"), ("domain", "domain.txt", "tok"),
                            ("other", "domain.txt", "other-tok")):
        build_store([root / text], root / tok, root / f"store-{name}", validation_fraction=0.05)
    (root / "model.json").write_text(json.dumps({**TINY_MODEL, "vocab_size": 300}))
    return root


def test_continued_pretraining_starts_from_the_weights_with_a_fresh_schedule(books, tmp_path):
    base = config_args((books / "store-general", books / "tok", books / "model.json"), tmp_path / "base",
                       steps=4, save_every=4)
    pretrain(PretrainConfig(**base))
    start = tmp_path / "base" / "checkpoint-4"
    args = config_args((books / "store-domain", None, None), tmp_path / "adapted", model=str(start), tokenizer=None,
                       steps=3, warmup_steps=2, save_every=3)
    run = setup(PretrainConfig(**args))
    saved = read_model_state(start)[2]
    assert run.step == 0 and not run.optimizer.state  # a fresh optimizer, from step 0
    assert all(torch.equal(run.raw_model.state_dict()[k], v) for k, v in saved.items())
    assert run.scheduler.get_last_lr()[0] == 0.0  # the warm-up starts again at 0
    result = pretrain(PretrainConfig(**args))
    logs = [json.loads(x) for x in (tmp_path / "adapted" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in logs if "loss" in r] == [1, 2, 3]
    assert [r["lr"] for r in logs if "loss" in r][:2] == [0.0, pytest.approx(args["lr"] / 2)]
    assert (tmp_path / "adapted" / "checkpoint-3" / "spiece.model").read_bytes() == (
        start / "spiece.model").read_bytes()  # the tokenizer is kept
    assert "eval_mlm_acc" in result


def test_continued_pretraining_refuses_a_store_of_another_tokenizer(books, tmp_path, capsys):
    torch.manual_seed(0)
    from litebert.tokenizer import load_tokenizer

    AlbertForPreTraining(AlbertConfig(**{**{k: v for k, v in TINY_MODEL.items() if k != "format"},
                                         "vocab_size": 300})).save_pretrained(tmp_path / "model",
                                                                              tokenizer=load_tokenizer(books / "tok"))
    args = config_args((books / "store-other", None, None), tmp_path / "run", model=str(tmp_path / "model"),
                       tokenizer=None)
    with pytest.raises(TokenizerError, match=r"--model .*model: its tokenizer is not the one the store"):
        pretrain(PretrainConfig(**args))
    argv = ["pretrain"] + [x for k, v in args.items() if v is not None for x in (f"--{k.replace('_', '-')}", str(v))]
    assert cli_main(argv) == 2
    assert "litebert data build --tokenizer" in capsys.readouterr().err


@pytest.mark.parametrize("cls", ["AlbertModel", "AlbertForSequenceClassification"])
def test_continued_pretraining_loads_an_encoder_saved_by_another_class(books, tmp_path, cls, capsys):
    """A bare encoder (its tensors have no `albert.` prefix) or a fine-tuned classifier: the encoder's weights are
    the start, and the heads it lacks (the MLM head, the SOP head) are said to start afresh, not silently random."""
    import litebert
    from litebert.tokenizer import load_tokenizer

    torch.manual_seed(1)
    config = AlbertConfig(**{**{k: v for k, v in TINY_MODEL.items() if k != "format"}, "vocab_size": 300})
    model = getattr(litebert, cls)(config)
    model.save_pretrained(tmp_path / "model", tokenizer=load_tokenizer(books / "tok"))
    encoder = model.state_dict() if cls == "AlbertModel" else {
        k[len("albert."):]: v for k, v in model.state_dict().items() if k.startswith("albert.")}
    args = config_args((books / "store-domain", None, None), tmp_path / "run", model=str(tmp_path / "model"),
                       tokenizer=None)
    run = setup(PretrainConfig(**args))
    started = run.raw_model.state_dict()
    assert encoder and all(torch.equal(started["albert." + k], v) for k, v in encoder.items())
    assert "each starts afresh: mlm, sop\n" in capsys.readouterr().err
