"""SentencePiece training with the official ALBERT settings (`litebert tokenizer train`)."""

from __future__ import annotations

import io
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from collections.abc import Iterator, Sequence

from litebert.errors import ConfigError, CorpusError, LitebertError, TokenizerError
from litebert.files import atomic_write_bytes, check_output
from litebert.tokenizer import AlbertTokenizer, preprocess_text

# The spm_train command of the google-research/albert README. Any key can be overridden.
ALBERT_SPM_SETTINGS: dict = {
    "model_type": "unigram",
    "pad_id": 0, "unk_id": 1, "bos_id": -1, "eos_id": -1,
    "control_symbols": ["[CLS]", "[SEP]", "[MASK]"],
    "user_defined_symbols": ["(", ")", '"', "-", ".", "–", "£", "€"],
    "character_coverage": 0.99995,
    "input_sentence_size": 10_000_000,  # reservoir-sampled: memory stays bounded however big the corpus is
    "shuffle_input_sentence": True,
    "max_sentence_length": 4192,  # bytes; longer sentences are skipped (and counted)
}


@dataclass
class TrainResult:
    out_dir: Path
    vocab_size: int
    files: int
    sentences: int  # handed to the trainer (which samples input_sentence_size of them)
    too_long_sentences: int  # over max_sentence_length bytes, skipped
    bad_utf8_lines: int  # replaced or skipped under on_bad_utf8


def _check_not_empty(path: Path) -> None:
    from litebert.data.corpus import CorpusReader

    if next(CorpusReader([path], on_bad_utf8="replace", chunk_bytes=1 << 16).chunks(), None) is None:
        raise CorpusError(f"{path}: empty corpus (no non-blank lines)")


def train_sentencepiece(inputs: str | os.PathLike | Sequence[str | os.PathLike], out_dir: str | os.PathLike,
                        vocab_size: int = 30000, *, do_lower_case: bool = True, on_bad_utf8: str = "error",
                        seed: int = 12345, verbose: bool = False, **overrides) -> TrainResult:
    """Train a unigram SentencePiece model with ALBERT's settings and write a tokenizer dir (HF layout).

    `inputs` are files, folders or globs of plain text (one sentence per line) or JSONL documents, optionally
    .gz/.bz2/.xz (read by litebert.data.corpus). Sentences go through the same `preprocess_text` the tokenizer
    applies when encoding, so the vocabulary is learned on what it will see. `overrides` are SentencePiece
    trainer options, e.g. character_coverage=1.0, input_sentence_size=1_000_000, hard_vocab_limit=False.
    """
    import sentencepiece as spm

    from litebert.data.corpus import CorpusReader, split_sentences

    reader = CorpusReader(inputs, on_bad_utf8=on_bad_utf8)  # raises for missing files and unknown policies
    check_output(out_dir)  # before training, which can take hours
    for path in reader.files:
        _check_not_empty(path)
    settings = {**ALBERT_SPM_SETTINGS, "vocab_size": vocab_size, "num_threads": os.cpu_count() or 1, **overrides}
    for key in ("input", "model_prefix", "sentence_iterator", "model_writer"):
        if key in settings:
            raise ConfigError(f"{key}: set by train_sentencepiece itself (pass input files and out_dir instead)")
    max_bytes = int(settings["max_sentence_length"])
    counts = {"sentences": 0, "too_long": 0}
    failure: list[LitebertError] = []

    def sentences() -> Iterator[str]:
        try:
            for chunk in reader.chunks():
                texts = chunk.texts if chunk.kind == "sentences" else \
                    [s for doc in chunk.texts for s in split_sentences(doc)]
                for text in texts:
                    text = preprocess_text(text, lower=do_lower_case)
                    if len(text.encode()) > max_bytes:
                        counts["too_long"] += 1
                        continue
                    counts["sentences"] += 1
                    yield text
        except LitebertError as exc:  # SentencePiece wraps iterator errors in RuntimeError: keep ours
            failure.append(exc)
            raise

    model = io.BytesIO()
    spm.set_random_generator_seed(seed)
    try:
        spm.SentencePieceTrainer.train(sentence_iterator=sentences(), model_writer=model,
                                       minloglevel=0 if verbose else 2, **settings)
    except (RuntimeError, ValueError, TypeError) as exc:
        if failure:
            raise failure[0] from None
        raise TokenizerError(f"SentencePiece training failed: {str(exc).strip()} (a small corpus may need a smaller "
                             f"--vocab-size or --spm hard_vocab_limit=false)") from None
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out / AlbertTokenizer.vocab_file_name, model.getvalue())
    tok = AlbertTokenizer(out / AlbertTokenizer.vocab_file_name, do_lower_case=do_lower_case)
    tok.save_pretrained(out)
    result = TrainResult(out, tok.vocab_size, reader.stats.files, counts["sentences"], counts["too_long"],
                         reader.stats.bad_utf8_lines)
    record = {"inputs": [str(p) for p in reader.files], "settings": settings, "do_lower_case": do_lower_case,
              "seed": seed, "counts": {k: v for k, v in asdict(result).items() if k != "out_dir"}}
    atomic_write_bytes(out / "spm_train.json", json.dumps(record, indent=2, ensure_ascii=False).encode())
    return result
