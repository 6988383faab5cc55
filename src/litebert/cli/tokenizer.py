"""`litebert tokenizer train | encode`: train an ALBERT SentencePiece model, or inspect how a text tokenizes."""

from __future__ import annotations

import argparse
import json

from litebert.cli._common import add_alias, add_command
from litebert.errors import ConfigError


def _spm_option(text: str) -> tuple[str, object]:
    """KEY=VALUE, the value parsed as JSON when it parses (numbers, true/false, lists), else kept as a string."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=VALUE, e.g. split_digits=true")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


def register(subparsers) -> None:
    parser = subparsers.add_parser("tokenizer", help="train or try a tokenizer")
    sub = parser.add_subparsers(dest="tokenizer_command", required=True, metavar="ACTION")

    train = add_command(sub, "train", "train a unigram SentencePiece model with ALBERT's settings",
                        "litebert tokenizer train --input corpus/*.txt --vocab-size 30000 --out tok/",
                        description="Train a unigram SentencePiece model (pad 0, unk 1, [CLS] 2, [SEP] 3, "
                                    "[MASK] 4, ALBERT's user symbols, coverage 0.99995) and write a tokenizer "
                                    "dir in Hugging Face layout.")
    train.add_argument("--input", nargs="+", required=True, metavar="PATH",
                       help="text files (one sentence per line) or .jsonl documents, folders or globs; "
                            ".gz/.bz2/.xz are read directly")
    train.add_argument("--out", required=True, metavar="DIR", help="output tokenizer directory")
    train.add_argument("--vocab-size", type=int, default=30000, help="number of pieces (default 30000)")
    train.add_argument("--character-coverage", type=float, default=None, help="default 0.99995 (ALBERT's)")
    train.add_argument("--input-sentence-size", type=int, default=None,
                       help="sentences sampled from the corpus (default 10,000,000); bounds memory")
    train.add_argument("--model-type", choices=("unigram", "bpe", "char", "word"), default=None,
                       help="default unigram")
    train.add_argument("--threads", dest="num_threads", type=int, default=None,
                       help="trainer threads (default: all cores)")
    add_alias(train, "--num-threads", "num_threads", type=int)
    train.add_argument("--no-lower-case", action="store_true",
                       help="keep case (the tokenizer then encodes with do_lower_case=False too)")
    train.add_argument("--on-bad-utf8", choices=("error", "replace", "skip"), default="error",
                       help="invalid UTF-8 lines: stop with file:line (default), replace bad bytes, or skip")
    train.add_argument("--seed", type=int, default=12345,
                       help="seed of the trainer's sentence sampling (default: 12345, SentencePiece's own, so a "
                            "vocabulary trained before this option existed comes out the same)")
    train.add_argument("--spm", type=_spm_option, action="append", default=[], metavar="KEY=VALUE",
                       help="any other SentencePiece trainer option, repeatable (e.g. --spm "
                            "hard_vocab_limit=false; default: none)")
    train.add_argument("--verbose", action="store_true", help="show SentencePiece's training log (default: quiet)")
    train.set_defaults(func=_train)

    encode = add_command(sub, "encode", "show the pieces, ids and offsets of a text",
                         'litebert tokenizer encode --tokenizer tok/ "Hello, my dog is cute" --pair "It is."')
    encode.add_argument("--tokenizer", required=True, metavar="DIR",
                        help="tokenizer dir (or a spiece.model / vocab.txt file)")
    encode.add_argument("text", help="the text to encode")
    encode.add_argument("--pair", default=None, help="second segment (default: none)")
    encode.add_argument("--max-length", type=int, default=None, help="truncate to this many tokens (default: no limit)")
    encode.set_defaults(func=_encode)


def _train(args) -> int:
    from litebert.tokenizer_train import train_sentencepiece

    overrides = {key: value for key, value in (
        ("character_coverage", args.character_coverage), ("input_sentence_size", args.input_sentence_size),
        ("model_type", args.model_type), ("num_threads", args.num_threads)) if value is not None}
    for key, value in args.spm:
        if key in overrides:
            raise ConfigError(f"--spm {key}=...: set it with its own flag --{key.replace('_', '-')}")
        overrides[key] = value
    result = train_sentencepiece(args.input, args.out, args.vocab_size, do_lower_case=not args.no_lower_case,
                                 on_bad_utf8=args.on_bad_utf8, seed=args.seed, verbose=args.verbose, **overrides)
    r = result
    print(f"wrote {r.out_dir} ({r.vocab_size} pieces) from {r.files} file(s): {r.sentences} sentences, "
          f"{r.too_long_sentences} too long skipped, {r.bad_utf8_lines} lines with bad UTF-8 ({args.on_bad_utf8})")
    return 0


def _encode(args) -> int:
    from litebert.tokenizer import load_tokenizer

    tok = load_tokenizer(args.tokenizer)
    enc = tok.encode(args.text, args.pair, max_length=args.max_length, return_offsets=True)
    source = [args.text, args.pair]
    for i, (tid, ttype, (start, end)) in enumerate(zip(enc.input_ids, enc.token_type_ids, enc.offsets)):
        shown = source[ttype][start:end] if end > start else ""
        print(f"{i:4d} {tid:6d} {ttype} {tok.id_to_token(tid)!r:24} {start:5d}:{end:<5d} {shown!r}")
    return 0
