"""Numeric and device options are validated in one place (litebert/cli/_checks.py) for every command: a
non-finite or nonsense value is exit code 2 with the flag and the value named, before any work, never a crash and
never a silent default."""

from __future__ import annotations

import argparse
import re

import pytest

from litebert.cli import main as cli_main

CASES = [
    (["pretrain", "--data", "S", "--lr", "nan"], r"--lr nan: must be a finite number"),
    (["pretrain", "--data", "S", "--lr", "1e300"], r"--lr 1e\+300: must be in \(0, 1\]"),
    (["pretrain", "--data", "S", "--warmup-steps=-3"], r"--warmup-steps -3: must be >= 0"),
    (["pretrain", "--data", "S", "--max-grad-norm", "inf"], r"--max-grad-norm inf: must be a finite number"),
    (["finetune", "sst-2", "--model", "M", "--data", "D", "--epochs", "0"], r"--epochs 0.0: must be > 0"),
    (["finetune", "sst-2", "--model", "M", "--data", "D", "--lr=-1e-5"], r"--lr -1e-05: must be in \(0, 1\]"),
    (["finetune", "sst-2", "--model", "M", "--data", "D", "--warmup-ratio", "2"],
     r"--warmup-ratio 2.0: must be in \[0, 1\]"),
    (["finetune", "sst-2", "--model", "M", "--data", "D", "--steps", "0"], r"--steps 0: must be >= 1"),
    (["fill-mask", "--model", "M", "a [MASK] b", "--top-k", "0"], r"--top-k 0: must be >= 1"),
    (["predict", "sst-2", "--model", "M", "--input", "I", "--batch-size", "0"], r"--batch-size 0: must be >= 1"),
    (["data", "build", "--input", "I", "--tokenizer", "T", "--out", "O", "--validation-fraction", "nan"],
     r"--validation-fraction nan: must be a finite number"),
    (["data", "build", "--input", "I", "--tokenizer", "T", "--out", "O", "--workers", "0"],
     r"--workers 0: must be >= 1"),
    (["tokenizer", "train", "--input", "I", "--out", "O", "--vocab-size", "0"], r"--vocab-size 0: must be >= 1"),
    (["export-onnx", "M", "--task", "base", "--out", "O", "--opset=-1"], r"--opset -1: must be >= 1"),
]


@pytest.mark.parametrize("args, message", CASES, ids=[" ".join(a[:1] + a[-2:]) for a, _ in CASES])
def test_a_bad_number_is_exit_2_naming_the_flag(args, message, capsys):
    assert cli_main(args) == 2
    err = capsys.readouterr().err
    assert re.search(r"^litebert: error: " + message, err), err
    assert "Traceback" not in err


def test_a_device_this_build_cannot_use_is_refused(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA; the refusal is for builds and machines without it")
    assert cli_main(["pretrain", "--data", "S", "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert re.search(r"litebert: error: --device cuda: (this torch build .* has no CUDA support|no such CUDA GPU)",
                     err), err


def test_top_k_larger_than_the_vocabulary_is_refused(tmp_path, capsys):
    """--top-k must leave real tokens to propose: more than the vocabulary (less its special tokens) is refused
    with the bound, where the model is known."""

    from litebert.config import AlbertConfig
    from litebert.model import AlbertForMaskedLM
    from litebert.tokenizer_train import train_sentencepiece

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"the cat number {i} sat on the mat.\n" for i in range(300)))
    vocab = train_sentencepiece([corpus], tmp_path / "model", vocab_size=60, hard_vocab_limit=False).vocab_size
    config = AlbertConfig(vocab_size=vocab, embedding_size=8, hidden_size=16, num_hidden_layers=1,
                          num_attention_heads=2, intermediate_size=32, max_position_embeddings=32)
    AlbertForMaskedLM(config).save_pretrained(tmp_path / "model")
    assert cli_main(["fill-mask", "--model", str(tmp_path / "model"), "the [MASK] sat.", "--top-k", str(vocab)]) == 2
    err = capsys.readouterr().err
    assert f"litebert: error: --top-k {vocab}: must be in [1, " in err and "the vocabulary of" in err, err


def test_every_rule_names_a_real_option():
    """Each rule's destination is a plain option of some command (a typo would silently check nothing), not a field
    of an options dataclass only: a field's rule lives on the field (one home)."""
    from litebert.cli import COMMANDS, build_parser
    from litebert.cli._checks import RULES
    from litebert.cli._common import FIELD_DESTS

    plain = set()

    def collect(p):
        fields = p.get_default(FIELD_DESTS) or frozenset()
        for action in p._actions:
            if action.dest not in fields:
                plain.add(action.dest)
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    collect(sub)
    for command in COMMANDS:  # (the top-level parser alone lists the commands without their options)
        collect(build_parser(command))
    assert not sorted(set(RULES) - plain)


def test_a_field_option_is_checked_by_its_field_rule(capsys):
    """--ngram is a PretrainConfig field with the rule [1, 10]; the command line gives the field's message for 0
    as for 11 (not a second, looser rule of its own)."""
    for value in ("0", "11"):
        assert cli_main(["pretrain", "--data", "S", "--ngram", value]) == 2
        assert capsys.readouterr().err.strip() == f"litebert: error: --ngram {value}: must be in [1, 10]"
