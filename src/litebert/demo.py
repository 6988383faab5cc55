"""`litebert demo`: the whole pipeline, offline, on text every Python install has.

corpus (the standard library's documentation: pydoc topics + docstrings, ~1.7 MB of English)
  -> SentencePiece vocabulary -> token store -> pretrain albert-tiny (2 layers, a distance bias on the attention)
     for a few minutes on the CPU
  -> evaluate MLM / SOP on held-out documents -> fill-mask examples.
Leaves RUN_DIR/{corpus.txt, tokenizer/, store/, model.json, pretrain/} which the other commands accept.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import shutil
import sys
import sysconfig
import time
from pathlib import Path

from litebert.config import distance_bias_slopes

SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "lib2to3", "__pycache__"}
FILL_MASK_EXAMPLES = [
    "Return the number of [MASK] in the list.",
    "Raise a [MASK] if the file does not exist.",
    "The function returns a new [MASK] object.",
    "This module provides [MASK] for working with dates and times.",
]

# The study's best recipe for albert-tiny at this budget (docs/recipes.md): LAMB at 1e-2 (the paper's 1.76e-3 is for
# 4,096-sequence batches), small batches (more updates per token), 40% of the words masked (more predictions
# per sequence), 5% warm-up.
# branch_init_scale 1 (the official draw): at the demo's 2 block applications the default's 0.5 scored 7.1% / 7.4%
# at [MASK] after 1.2M tokens against the official draw's 7.7% / 7.7% (seeds 0 / 1; docs/recipes.md, "Session 18").
DEMO_RECIPE = dict(batch_size=16, micro_batch_size=16, max_seq_length=64, masked_lm_prob=0.4,
                   max_predictions_per_seq=26, lr=1e-2, optimizer="lamb", branch_init_scale=1.0)
# albert-tiny's shape with its one shared block applied 2 times instead of 4: at this budget 1, 2 and 4
# applications learned the same per token (docs/recipes.md), and 2 train about 1.5x the tokens per second.
# With a distance bias on the attention (config.distance_bias; not ALBERT's, so the demo's model is saved in
# litebert's format): without it, five minutes leave every head near uniform and the model under a bigram table
# at [MASK] (7.7% against 12.3% at 1.2M tokens); with slopes (2, 0.5) it reads its neighbours from the start
# (13.7% / 13.4% / 14.2%, seeds 0-2; docs/recipes.md, "Session 19").
DEMO_MODEL = dict(preset="albert-tiny", num_hidden_layers=2, distance_bias=distance_bias_slopes(2))


def stdlib_documents(min_chars: int = 200) -> list[str]:
    """pydoc's topic texts and the longer docstrings of the standard library's modules, classes and functions.

    Read from source with `ast` (nothing is imported), in sorted file order, so the corpus is the same on
    every run of the same Python.
    """
    from pydoc_data.topics import topics

    docs = [topics[k] for k in sorted(topics)]
    root = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(root.rglob("*.py")):
        if SKIP_DIRS & set(path.relative_to(root).parts):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue  # a handful of deliberately broken or non-UTF-8 test fixtures
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc and len(doc) >= min_chars:
                    docs.append(doc)
    return docs


def write_corpus(path: Path) -> dict[str, int]:
    """One sentence per line, a blank line between documents (the BERT/ALBERT input convention)."""
    from litebert.data.corpus import split_sentences

    docs = sentences = 0
    with path.open("w", encoding="utf-8") as f:
        for doc in stdlib_documents():
            lines = [s for para in doc.split("\n\n") for s in split_sentences(" ".join(para.split()))]
            if len(lines) < 2:
                continue
            f.write("\n".join(lines) + "\n\n")
            docs, sentences = docs + 1, sentences + len(lines)
    return {"documents": docs, "sentences": sentences, "bytes": path.stat().st_size}


def build_demo_data(out: Path, vocab_size: int = 8000, seed: int = 0, say=lambda msg: None):
    """corpus.txt -> tokenizer/ -> store/ under `out`: the demo's data, the same on every run of the same Python.
    Returns the opened TokenStore."""
    from litebert.data.store_build import build_store
    from litebert.tokenizer_train import train_sentencepiece

    out.mkdir(parents=True, exist_ok=True)
    corpus = out / "corpus.txt"
    stats = write_corpus(corpus)
    say(f"corpus: {stats['documents']:,} documents, {stats['sentences']:,} sentences, "
        f"{stats['bytes'] / 1e6:.2f} MB from the standard library's documentation -> {corpus}")
    train_sentencepiece([corpus], out / "tokenizer", vocab_size=vocab_size, seed=seed)
    say(f"tokenizer: unigram SentencePiece, {vocab_size} pieces -> {out / 'tokenizer'}")
    store = build_store([corpus], out / "tokenizer", out / "store", workers=2, validation_fraction=0.05,
                        seed=seed, overwrite=True)
    say(f"token store: {store.stats['kept']['tokens']:,} tokens -> {out / 'store'}")
    return store


def demo_pretrain_config(model: str | Path, store: str | Path, out: str | Path, minutes: float = 5.0,
                         steps: int | None = None, seed: int = 0, threads: int | None = None, say=None):
    """The demo's pretraining run as a PretrainConfig: DEMO_RECIPE, and for a time budget (`steps` None) a step
    count measured on this machine, with the wall clock as the budget. With `threads` None as well, the pace is
    measured at torch's default thread count and at 1 thread, and the run takes the faster: on a machine that
    other processes keep busy, threads that wait for each other train several times fewer tokens than one
    (docs/recipes.md measured 5-10x), and a load average lags by a minute."""
    import torch

    from litebert.pretrain import PretrainConfig, measure_seconds_per_step

    base = dict(model=str(model), data=str(store), **DEMO_RECIPE, seed=seed, eval_batches=20)
    budget = None
    if steps is None:
        def pace(n: int | None) -> float:
            return measure_seconds_per_step(PretrainConfig(**base, threads=n, out=str(out)), steps=10)

        paces: dict[int, float] = {}
        if threads is None and torch.get_num_threads() > 1:
            paces = {n: pace(n) for n in (torch.get_num_threads(), 1)}  # (each probe sets the process's threads)
            threads = min(paces, key=paces.get)
            if say is not None:
                say("pace measured now: " + ", ".join(f"{t:.3f} s/step with {n} thread(s)" for n, t in paces.items())
                    + f"; pretraining with {threads} (--threads N to choose)")
        per_step = paces[threads] if paces else pace(threads)
        # The probe's pace is a forecast: room for twice the steps it predicts, so that the wall clock, not the
        # step count, ends the run (and its schedule, which follows whichever is further along) on a machine that
        # gets quieter as well as on one that gets busier.
        steps = max(50, int(2 * minutes * 60 / per_step))
        budget = f"{minutes * 60:g}s"
    return PretrainConfig(**base, threads=threads, out=str(out), steps=steps, warmup_steps=steps // 20,
                          log_every=max(1, steps // 20), eval_every=max(1, steps // 4), save_every=steps,
                          resume="none", max_time=budget)


def demo_model_config(vocab_size: int):
    """albert-tiny (E=64, H=128) with its one shared block applied DEMO_MODEL's times, for a `vocab_size` vocabulary."""
    from litebert.config import AlbertConfig

    shape = {k: v for k, v in DEMO_MODEL.items() if k != "preset"}
    return AlbertConfig.from_preset(DEMO_MODEL["preset"], vocab_size=vocab_size, **shape)


def demo_held_out_eval(model_dir: str | Path, store, cfg) -> dict[str, float]:
    """The demo's held-out figures of the model in `model_dir` (ALBERT's 15% masking whatever the training rate, so
    they compare across recipes) over 20 batches of 32 pairs, in fp32: `litebert evaluate --model DEMO_DIR
    --batch-size 32 --precision fp32` repeats them. `cfg` is the run's PretrainConfig (demo_pretrain_config)."""
    from litebert.model import AlbertForPreTraining
    from litebert.pretrain_eval import held_out_eval

    model = AlbertForPreTraining.from_pretrained(model_dir)
    return held_out_eval(model, store, dataclasses.replace(cfg, micro_batch_size=32), "fp32")


def run_demo(out: str | Path = "runs/demo", minutes: float = 5.0, steps: int | None = None, vocab_size: int = 8000,
             seed: int = 0, threads: int | None = None) -> dict:
    """The whole pipeline. Pretraining gets `minutes` of wall clock: a few probe steps measure this machine's
    speed and set the step count (or pass `steps`), so the demo ends in about minutes + 2 however fast the CPU."""
    from litebert.checkpoint import find_latest_checkpoint
    from litebert.families.mlm import fill_mask, format_predictions
    from litebert.pretrain import pretrain

    out = Path(out)
    t0 = time.perf_counter()

    def say(msg: str) -> None:
        print(f"[demo {time.perf_counter() - t0:6.1f}s] {msg}", file=sys.stderr, flush=True)

    store = build_demo_data(out, vocab_size, seed, say)
    model_config = demo_model_config(store.vocab_size)
    model_config.to_json(out / "model.json")
    # The store was just rebuilt and the step count re-measured, so a previous demo's checkpoints (say, 1,732
    # steps on a faster machine) belong to another run: start the pretraining afresh instead of resuming them.
    if (out / "pretrain").exists():
        shutil.rmtree(out / "pretrain")
        say(f"removed the previous demo's pretraining run {out / 'pretrain'}")
    cfg = demo_pretrain_config(out / "model.json", out / "store", out / "pretrain", minutes, steps, seed, threads, say)
    threads = cfg.threads
    length = f"{cfg.steps} steps" + (f" or {minutes:g} minutes, whichever ends first (the learning-rate schedule "
                                     "follows the one further along, so it is finished either way)"
                                     if cfg.max_time else "")
    say(f"pretraining albert-tiny (E={model_config.embedding_size}, H={model_config.hidden_size}, "
        f"{model_config.num_hidden_layers} layers, all-shared"
        + (f", distance bias {model_config.distance_bias}" if model_config.distance_bias else "")
        + f") for {length}: batches of "
        f"{cfg.batch_size} x {cfg.max_seq_length} tokens, {cfg.masked_lm_prob:.0%} masked")
    result = pretrain(cfg)
    say(f"pretraining done: {result.get('tokens', 0):,.0f} tokens in {result.get('step', cfg.steps)} steps")
    ckpt = out / "pretrain" / "final"  # the model at the last step (--steps, or where the time budget ran out)
    last = find_latest_checkpoint(out / "pretrain")
    result.update(demo_held_out_eval(ckpt, store, cfg))
    print("\n" + "\n".join(summary_lines(result, minutes if cfg.max_time else None, threads)))
    print(f"\nFill-mask with {ckpt}:")
    for text, masks in zip(FILL_MASK_EXAMPLES, fill_mask(ckpt, FILL_MASK_EXAMPLES, top_k=5)):
        print(f"  {text}\n    -> " + format_predictions(masks[0], ".2f"))
    print(f"\nRun dir: {out}  (try: litebert fill-mask --model {ckpt} \"...[MASK]...\"; "
          f"litebert plot {out / 'pretrain'})")
    say("done")
    return {**result, "checkpoint": str(last), "final": str(ckpt)}


# The result is called learned when the model's [MASK]-position accuracy is at least this many times the
# always-the-commonest-piece baseline (below it the run has hardly left that answer: a collapse looks like this).
LEARNED_FACTOR = 1.5


def summary_lines(r: dict, minutes: float | None, threads: int | None = None) -> list[str]:
    """The demo's held-out result in plain words: the fill-in figure at [MASK] positions beside what guessing
    without a model scores there, then the official headline, then a verdict (and what to do when the machine
    gave too little)."""
    acc, common, bigram = r["eval_mlm_acc_mask"], r["eval_base_mask_commonest"], r["eval_base_mask_bigram"]
    lines = [
        f"Held-out fill-in ({r['eval_targets_mask']:,} words hidden behind [MASK] in text the model never saw; "
        "ALBERT's 15% masking):",
        f"  the model gets right                                       {acc:6.1%}",
        f"  always guessing the commonest piece gets                   {common:6.1%}",
        f"  guessing the piece that most often follows the one before  {bigram:6.1%}  (a bigram table of the "
        "training text)",
        f"Official masked_lm_accuracy {r['eval_mlm_acc']:.1%}: it also counts the 20% of targets left unchanged or "
        f"randomly replaced in the input; copying the input (else the commonest piece) already scores "
        f"{r['eval_base_copy_commonest']:.1%} on it. Sentence order (SOP): {r.get('eval_sop_acc', float('nan')):.1%}"
        " (chance 50%).",
    ]
    tokens = r.get("tokens", 0.0)
    if acc < LEARNED_FACTOR * common:
        budget = f"{minutes:g} minutes" if minutes else "its steps"
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")  # not on Windows
        lines.append(f"Verdict: too little training. The machine gave {tokens / 1e6:.2f}M tokens in {budget} "
                     f"(load average {load:.1f} on {os.cpu_count()} cores), and at [MASK] the model is below "
                     f"{LEARNED_FACTOR:g}x the commonest-piece guess: it has not yet learned much beyond word "
                     f"frequencies. Give it more tokens: more time (--minutes {max(10, 2 * (minutes or 5)):g})"
                     + (", or --threads 1 on a busy machine (threads that wait for each other are slower than one)"
                        if threads != 1 else ", or a quieter machine (it trained with 1 thread)") + ".")
    elif acc < bigram:
        lines.append(f"Verdict: learning ({tokens / 1e6:.2f}M tokens): well above the commonest-piece guess, not yet "
                     f"above the bigram table; more --minutes keep improving it.")
    else:
        lines.append(f"Verdict: learned ({tokens / 1e6:.2f}M tokens): above both guesses that need no model.")
    return lines
