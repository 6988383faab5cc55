"""Every `litebert COMMAND --help` example runs as written, in a folder holding the files it names.

The examples are read from the parsers themselves (the epilog `add_command` writes), so a new or edited example
is tested without touching this file. Each runs in the same order a user would meet them, against small fixtures
made here or taken from the shared data (glue/ -> the GLUE folders, albert_base/ -> a real TF checkpoint).
Only sizes are scaled (SCALED below: steps, batch sizes, budgets, vocabulary, threads, the model preset); every
command, positional argument, path and other flag is the example's own. `serve` is started on a free loopback
port instead of 8080 and stopped once it answers /ready.
"""

from __future__ import annotations

import argparse
import codecs
import glob
import json
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from litebert.cli import COMMANDS, build_parser, main

# flag -> the value a test-sized run uses (a dict: per original value). The shape of each command stays.
SCALED: dict[str, str | dict[str, str]] = {
    "--vocab-size": "1000", "--batch-size": "4", "--micro-batch-size": "2", "--max-time": "10m",
    "--workers": "1", "--threads": "1", "--examples": "50", "--minutes": "0.01", "--budget-minutes": "0.05",
    "--steps": {"125000": "2", "150000": "3"}, "--port": "0",
    # the preset: albert-base's 12 layers make every later step minutes long on a CPU; the tiny preset keeps the
    # same code path (a preset name, no weights: pretrain from scratch)
    "--model": {"albert-base-v2": "albert-tiny"},
}
# Extra size flags per command (the example leaves them at defaults sized for real runs).
EXTRA = {
    "pretrain": ["--max-seq-length", "64", "--eval-batches", "1", "--log-every", "1"],
    "finetune": ["--steps", "2", "--max-train-examples", "16", "--max-eval-examples", "8", "--max-seq-length", "64"],
    "tokenizer train": [],
    # a held-out split for the pretraining run's eval and `evaluate --model runs/base` (1% of this corpus is none)
    "data build": ["--validation-fraction", "0.05"],
    "bench": ["--model", "albert-tiny", "--batch", "2", "--seq", "32", "--repeats", "1"],
    "ablate": ["--steps", "2", "--seeds", "1", "--finetune-steps", "2", "--finetune-train-examples", "16",
               "--layers", "1", "--hidden-size", "64", "--max-seq-length", "32", "--glue", "glue",
               "--vocab-size", "1000"],
    "demo": ["--vocab-size", "1000", "--steps", "2"],
}
# `litebert params --model albert-base-v2` is cheap and stays verbatim.
VERBATIM = {("params", "--model")}


def help_examples() -> list[tuple[str, str]]:
    """(command path, example line) of every sub-command's --help, continuation lines joined."""
    found: dict[str, list[str]] = {}

    def walk(parser, prefix):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    path = f"{prefix}{name}"
                    if sub.epilog and path not in found:
                        text = sub.epilog.split("example:", 1)[1].replace("\\\n", " ")
                        found[path] = [line.strip() for line in text.splitlines() if line.strip()]
                    walk(sub, path + " ")

    for command in COMMANDS:
        walk(build_parser(command), "")
    return [(path, line) for path, lines in found.items() for line in lines]


def shell_words(line: str) -> list[str]:
    """What bash would pass: $'...' (ANSI-C quoting), comments and globs handled as a shell does."""
    line = re.sub(r"\$'((?:[^'\\]|\\.)*)'", lambda m: shlex.quote(codecs.decode(m.group(1), "unicode_escape")),
                  line)
    words = []
    for word in shlex.split(line, comments=True):
        words.extend(sorted(glob.glob(word)) or [word] if "*" in word else [word])
    return words


def scaled(command: str, words: list[str]) -> list[str]:
    """The example's words with SCALED sizes, plus the command's EXTRA size flags."""
    out = list(words)
    for i, word in enumerate(out[:-1]):
        rule = SCALED.get(word)
        if rule is None or (command, word) in VERBATIM:
            continue
        out[i + 1] = rule.get(out[i + 1], out[i + 1]) if isinstance(rule, dict) else rule
    extra = EXTRA.get(command, [])
    given = {w for w in out if w.startswith("--")}
    for flag, value in zip(extra[::2], extra[1::2]):
        if flag not in given:
            out += [flag, value]
    return out


def write_fixtures(root: Path, shared_data: Path) -> None:
    """The files the examples name, as a user would have them before running the commands in order."""
    from pydoc_data.topics import topics

    (root / "corpus").mkdir()
    texts = [" ".join(topics[k].split()) for k in sorted(topics)]
    for n in range(2):  # documents: sentences one per line, a blank line between documents
        docs = [". \n".join(t.split(". ")[:40]) for t in texts[n::2]]
        (root / "corpus" / f"part{n}.txt").write_text("\n\n".join(docs) + "\n")
    (root / "glue").mkdir()
    for task in ("SST-2", "RTE"):
        (root / "glue" / task).symlink_to(shared_data / "glue" / task)
    (root / "albert_base").symlink_to(shared_data / "albert-tf-golden" / "tiny")
    mnli = root / "glue" / "MNLI"  # not in the shared data: a small file in MNLI's own format
    mnli.mkdir()
    header = "index\tpromptID\tpairID\tgenre\tsentence1\tsentence2\tlabel1\tgold_label\n"
    rows = [("A man is sleeping.", "A man is awake.", "contradiction"),
            ("A dog runs in a park.", "An animal is outside.", "entailment"),
            ("Two kids play chess.", "The kids are brothers.", "neutral")] * 6
    body = "".join(f"{i}\t{i}\t{i}\tfiction\t{a}\t{b}\t{y}\t{y}\n" for i, (a, b, y) in enumerate(rows))
    for split in ("train", "dev_matched", "dev_mismatched"):
        (mnli / f"{split}.tsv").write_text(header + body)
    (root / "mydata").mkdir()
    reviews = [("great value, works well", 5), ("broke after a day", 1), ("fine for the price", 3)] * 6
    csv = "review,stars\n" + "".join(f'"{r}",{s}\n' for r, s in reviews)
    for split in ("train", "dev"):
        (root / "mydata" / f"{split}.csv").write_text(csv)


def prepare(root: Path, command: str, line: str) -> None:
    """State an example needs that no earlier example makes (a user would have made it another way)."""
    if command == "data merge" and not (root / "part0").exists():
        # the other way to the same store/: built in parts (on N machines), then merged
        (root / "store").rename(root / "store-in-one-go")
        for i in range(2):
            assert main(["data", "build", "--input", "corpus/", "--tokenizer", "tok/", "--out", f"part{i}/",
                         "--shard", f"{i}/2", "--workers", "1", "--quiet", *EXTRA["data build"]]) == 0
    if command in ("evaluate", "predict", "serve", "export-onnx") and "runs/" in line:
        task, run = {"runs/mnli": ("mnli", "MNLI"), "runs/rte": ("rte", "RTE")}.get(
            next((r for r in ("runs/mnli", "runs/rte") if r in line), ""), (None, None))
        if task and not (root / "runs" / task).exists():
            assert main(scaled("finetune", ["finetune", task, "--model", "runs/base", "--data", f"glue/{run}",
                                            "--out", f"runs/{task}"])) == 0
    if command == "demo":  # a user runs the demo into a fresh folder (the one below is only its layout)
        (root / "runs" / "demo" / "pretrain").unlink(missing_ok=True)
    if command == "fill-mask" and not (root / "runs" / "demo").exists():
        # `litebert demo --out runs/demo` (run later in this file, and end to end in test_demo.py) lays its
        # pretraining run out as runs/demo/pretrain; the same layout from this file's own pretraining run
        (root / "runs" / "demo").mkdir()
        (root / "runs" / "demo" / "pretrain").symlink_to(root / "runs" / "base", target_is_directory=True)


def run_serve(words: list[str]) -> None:
    httpx = pytest.importorskip("httpx")
    from test_serve import free_port

    port = str(free_port())
    words = [port if w == "0" and words[i - 1] == "--port" else w for i, w in enumerate(words)]
    proc = subprocess.Popen([sys.executable, "-m", "litebert", *words[1:]], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/ready", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.5)
        pytest.fail(f"{' '.join(words)}: never ready (exit {proc.poll()}): {proc.stderr.read()[-2000:]}"
                    if proc.poll() is not None else f"{' '.join(words)}: not ready in 120 s")
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.mark.slow
def test_every_help_example_runs(tmp_path, shared_data, monkeypatch, capsys):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("fastapi")
    examples = help_examples()
    assert len(examples) >= 20 and {c for c, _ in examples} >= set(COMMANDS) - {"tokenizer", "data"}
    write_fixtures(tmp_path, shared_data)
    monkeypatch.chdir(tmp_path)
    for command, line in examples:
        words = shell_words(line)
        assert words[0] == "litebert", line
        words = scaled(command, words)[1:]
        prepare(tmp_path, command, line)
        if command == "serve":
            run_serve(["litebert", *words])
            continue
        code = main(words)
        out = capsys.readouterr()
        assert code == 0, f"`{line}` (run as `litebert {' '.join(words)}`) exited {code}:\n{out.err[-3000:]}"
    # what the examples promise to write is there
    assert (tmp_path / "runs" / "base" / "curves.png").is_file()
    assert (tmp_path / "runs" / "sst2" / "best" / "model.safetensors").is_file()
    assert (tmp_path / "runs" / "sst2-again" / "best" / "model.safetensors").is_file()
    assert (tmp_path / "sst2-onnx" / "model.onnx").is_file()
    preds = [json.loads(l) for l in (tmp_path / "preds.jsonl").read_text().splitlines()]
    assert len(preds) == 1821  # SST-2's test split, one prediction a row
    assert (tmp_path / "albert-base-v2" / "model.safetensors").is_file()
