"""Fixtures of the reliability suite (helpers in harness.py): the tiny token store and model, the uninterrupted
reference runs, and a counter of fuzz cases that is printed at the end of the session."""

from __future__ import annotations

import collections
import json

import pytest

from harness import (EPOCH_RUN, STORE_DOCUMENTS, TINY_MODEL, SmallDisk, finish, pretrain_args, start,
                     write_pydoc_corpus)

FUZZ_CASES: collections.Counter = collections.Counter()


def pytest_terminal_summary(terminalreporter):
    if FUZZ_CASES:
        terminalreporter.write_sep("-", "reliability fuzz cases")
        for name, n in sorted(FUZZ_CASES.items()):
            terminalreporter.write_line(f"{name}: {n}")
        terminalreporter.write_line(f"total fuzz cases: {sum(FUZZ_CASES.values())}")


@pytest.fixture(scope="session")
def fuzz_count():
    """fuzz_count(name): count one generated case of the fuzz test `name`."""
    def count(name: str) -> None:
        FUZZ_CASES[name] += 1
    return count


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory):
    """(store dir, tokenizer dir, model config JSON): a 500-piece SentencePiece vocab trained on pydoc topics
    and a store of its first STORE_DOCUMENTS documents."""
    from litebert.data.store_build import build_store
    from litebert.tokenizer_train import train_sentencepiece

    root = tmp_path_factory.mktemp("tiny_data")
    write_pydoc_corpus(root / "all.txt")
    write_pydoc_corpus(root / "corpus.txt", STORE_DOCUMENTS)
    train_sentencepiece([root / "all.txt"], root / "tokenizer", vocab_size=500)
    store = build_store([root / "corpus.txt"], root / "tokenizer", root / "store", workers=1,
                        validation_fraction=0.05)
    model = root / "model.json"
    model.write_text(json.dumps({**TINY_MODEL, "vocab_size": store.vocab_size}))
    return root / "store", root / "tokenizer", model


@pytest.fixture(scope="session")
def reference_runs(tiny_data, tmp_path_factory):
    """Uninterrupted runs several tests compare against, made once and side by side. {name: run dir}:
    "single": 1 process, length 32, 8 steps, a checkpoint every 2 steps (all inside epoch 0);
    "dual": the same under torchrun with 2 processes (accumulation 1 instead of 2: the same global batch);
    "epochs": EPOCH_RUN: 1 process with 2 DataLoader workers, length 64, 14 steps (epoch 0 ends inside step 11),
    a checkpoint every 3 steps."""
    root = tmp_path_factory.mktemp("reference")
    specs = {"single": (pretrain_args(tiny_data, root / "single"), 1),
             "dual": (pretrain_args(tiny_data, root / "dual"), 2),
             "epochs": (pretrain_args(tiny_data, root / "epochs", **EPOCH_RUN), 1)}
    procs = {name: start(args, nproc) for name, (args, nproc) in specs.items()}
    for name, proc in procs.items():
        done = finish(proc)
        assert done.returncode == 0, f"reference run {name} failed:\n{done.stderr[-4000:]}"
    return {name: root / name for name in specs}


@pytest.fixture
def small_disk(tmp_path):
    """SmallDisk under tmp_path: `small_disk.mount(size)` gives a tmpfs; everything is unmounted afterwards."""
    disk = SmallDisk(tmp_path)
    yield disk
    disk.unmount_all()
