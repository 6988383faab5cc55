"""`litebert data build` (corpus -> token store, or one part of it), `litebert data merge` (parts -> one store),
`litebert data info` (a store's meta and stats) and `litebert data inspect` (label balance and masking of the
pretraining examples a store gives)."""

from __future__ import annotations

import argparse
import os
import sys
import time

from litebert.cli._common import add_command


def register(subparsers) -> None:
    parser = subparsers.add_parser("data", help="build and inspect pretraining token stores")
    sub = parser.add_subparsers(dest="data_command", required=True, metavar="ACTION")

    build = add_command(
        sub, "build", "tokenize a corpus into a memory-mapped token store",
        "litebert data build --input corpus/ --tokenizer tok/ --out store/ --workers 8",
        description="Plain text: one sentence per line, blank line between documents. JSONL (.jsonl/.json): one "
                    "document per line in a 'text' field, cut into sentences. .gz/.bz2/.xz are read transparently.")
    build.add_argument("--input", nargs="+", required=True, metavar="PATH", help="files, folders or globs")
    build.add_argument("--tokenizer", required=True, metavar="DIR", help="tokenizer dir (or spiece.model/vocab.txt)")
    build.add_argument("--out", required=True, metavar="STORE", help="store directory to write")
    build.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                       help="tokenizing processes (default: all cores)")
    build.add_argument("--validation-fraction", type=float, default=0.01, metavar="F",
                       help="share of documents held out as the validation split (default 0.01)")
    build.add_argument("--on-bad-utf8", choices=("error", "replace", "skip"), default="error",
                       help="invalid UTF-8 lines: stop (default), replace bad bytes with U+FFFD, or skip the line")
    build.add_argument("--seed", type=int, default=0, help="seed of the validation split (default: 0)")
    build.add_argument("--max-sentence-tokens", type=int, default=512,
                       help="cut longer sentences at word starts (default 512)")
    build.add_argument("--min-doc-tokens", type=int, default=2, help="skip shorter documents (default 2)")
    build.add_argument("--min-doc-sentences", type=int, default=1,
                       help="skip documents with fewer sentences (default: 1)")
    build.add_argument("--max-doc-sentences", type=int, default=0,
                       help="cut plain-text documents longer than this many sentences (0: never; for books with "
                            "no blank lines)")
    build.add_argument("--word-segmenter", choices=("jieba",), default=None,
                       help="whole words from a segmenter (Chinese whole-word masking; needs litebert[zh]) instead "
                            "of the tokenizer's vocab alone (default: none)")
    build.add_argument("--shard", metavar="I/N",
                       help="build only part I (0-based) of N of the store, for N machines; join the parts with "
                            "`litebert data merge` (default: the whole store)")
    build.add_argument("--overwrite", action="store_true", help="replace an existing store (default: refuse)")
    build.add_argument("--quiet", action="store_true", help="no progress line (default: a progress line on stderr)")
    build.set_defaults(func=_build)

    merge = add_command(sub, "merge", "make the parts built with --shard one store (moves them into it)",
                        "litebert data merge part0/ part1/ --out store/")
    merge.add_argument("parts", nargs="+", metavar="PART", help="all N part directories, in any order")
    merge.add_argument("--out", required=True, metavar="STORE", help="store directory to write")
    merge.add_argument("--overwrite", action="store_true", help="replace an existing store (default: refuse)")
    merge.set_defaults(func=_merge)

    info = add_command(sub, "info", "print a store's tokenizer, settings and counts", "litebert data info store/")
    info.add_argument("store", metavar="STORE", help="a token store directory")
    info.set_defaults(func=_info)

    inspect = add_command(sub, "inspect", "label balance and masking of the pretraining examples a store gives",
                          "litebert data inspect store/ --examples 2000")
    inspect.add_argument("store", metavar="STORE", help="a token store directory")
    inspect.add_argument("--examples", type=int, default=1000, help="examples to build and read (default 1000)")
    inspect.add_argument("--split", choices=("train", "validation"), default="train",
                         help="which split (default: train)")
    inspect.add_argument("--max-seq-length", type=int, default=128, help="tokens per example (default: 128)")
    inspect.add_argument("--objective", choices=("sop", "nsp", "none"), default="sop",
                         help="sentence-level objective the examples are built for (default: sop)")
    inspect.add_argument("--single-sentence", choices=("random", "split", "skip"), default="random",
                         help="a one-sentence chunk takes B from a random document (official), is split, or skipped "
                              "(default: random)")
    inspect.add_argument("--short-seq-draw", choices=("chunk", "document"), default="chunk",
                         help="short target length drawn per chunk (paper) or per document (official code) "
                              "(default: chunk)")
    inspect.add_argument("--mask-unit", choices=("word", "token"), default="word",
                         help="masking unit (default: word)")
    inspect.add_argument("--seed", type=int, default=0, help="seed of the examples (default: 0)")
    inspect.set_defaults(func=_inspect)


def _build(args: argparse.Namespace) -> int:
    from litebert.data.merge import build_part, parse_shard
    from litebert.data.store_build import build_store, format_report

    build = build_store
    if args.shard is not None:
        index, count = parse_shard(args.shard)

        def build(inputs, tokenizer, out, **kwargs):
            return build_part(inputs, tokenizer, out, index, count, **kwargs)
    t0 = time.perf_counter()

    def progress(done: int) -> None:
        rate = done / 1e6 / max(time.perf_counter() - t0, 1e-9)
        print(f"\r{done / 1e6:8.1f} MB  {rate:6.2f} MB/s", end="", file=sys.stderr, flush=True)

    store = build(
        args.input, args.tokenizer, args.out, workers=args.workers, validation_fraction=args.validation_fraction,
        on_bad_utf8=args.on_bad_utf8, seed=args.seed, max_sentence_tokens=args.max_sentence_tokens,
        min_doc_tokens=args.min_doc_tokens, min_doc_sentences=args.min_doc_sentences, overwrite=args.overwrite,
        max_doc_sentences=args.max_doc_sentences, word_segmenter=args.word_segmenter,
        progress=None if args.quiet else progress)
    seconds = time.perf_counter() - t0
    if not args.quiet:
        print(file=sys.stderr)
    print(format_report(store.stats))
    mb = store.stats["input"]["bytes"] / 1e6
    print(f"wrote      {store.path} in {seconds:.1f} s ({mb / seconds:.2f} MB/s with {args.workers} worker(s))")
    return 0


def _merge(args: argparse.Namespace) -> int:
    from litebert.data.merge import merge_parts
    from litebert.data.store_build import format_report

    t0 = time.perf_counter()
    store = merge_parts(args.parts, args.out, overwrite=args.overwrite)
    print(format_report(store.stats))
    print(f"merged     {len(args.parts)} part(s) into {store.path} in {time.perf_counter() - t0:.1f} s")
    return 0


def _info(args: argparse.Namespace) -> int:
    from litebert.data.store import TokenStore
    from litebert.data.store_build import format_report

    store = TokenStore.open(args.store)
    tok = store.meta["tokenizer"]
    print(f"store    {store.path}")
    print(f"tokens   {store.meta['dtype']}, vocab {tok['vocab_size']} ({tok['class']}, "
          f"fingerprint {tok['fingerprint'][:16]})")
    print("build    " + ", ".join(f"{k}={v}" for k, v in store.meta["build"].items() if k != "inputs"))
    if store.stats:
        print(format_report(store.stats))
    return 0


def _inspect(args: argparse.Namespace) -> int:
    from litebert.data.inspect import format_inspection, inspect_examples
    from litebert.data.pretraining import PretrainingDataset
    from litebert.errors import ConfigError
    from litebert.pretrain import LABEL_SKEW_WARNING
    from litebert.pretrain_config import SINGLE_SENTENCE_MODES

    if args.examples < 1:
        raise ConfigError(f"--examples {args.examples}: must be >= 1")
    dataset = PretrainingDataset(args.store, split=args.split, max_seq_length=args.max_seq_length,
                                 objective=args.objective, single_sentence=SINGLE_SENTENCE_MODES[args.single_sentence],
                                 short_seq_draw=args.short_seq_draw, mask_unit=args.mask_unit, seed=args.seed)
    result = inspect_examples(dataset, args.examples)
    segmenter = dataset.store.meta["build"].get("word_segmenter")
    print(f"store      {dataset.store.path} ({args.split}); words from "
          f"{segmenter + ' segmentation' if segmenter else 'the tokenizer vocab'}")
    print("\n".join(format_inspection(result)))
    if args.objective != "none" and abs(result["label1"] - 0.5) > LABEL_SKEW_WARNING:
        print(f"warning    {result['label1']:.0%} of labels are 1, far from 50/50: use --single-sentence split or "
              "skip in pretraining")
    return 0
