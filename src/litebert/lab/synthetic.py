"""Synthetic corpora for checks that a pretraining run learns: text with one known structure and its baselines.

    write_markov_corpus   made-up words in a Markov chain: only word order carries information, so a model
                          beats the commonest-word guess at [MASK] only by reading the mask's neighbours
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from litebert.tokenizer import WordPieceTokenizer


def write_markov_corpus(path: Path, vocab_file: Path, words: int = 100, documents: int = 2000,
                        seed: int = 0) -> None:
    """`words` made-up words, each followed by one of three successors (p = 0.6 / 0.25 / 0.15), in sentences of 6-12
    words ending in "."; documents of 8 sentences (blank-line separated, the corpus format); and a WordPiece
    vocabulary (`vocab_file`) in which every word is one token. With the defaults, at a [MASK] the commonest word
    is right ~8-11% of the time and the word that most often follows the one before ~30-36%."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocab = sorted({"".join(rng.choice(letters, rng.integers(3, 7))) for _ in range(2 * words)})[:words]
    successors = np.stack([rng.choice(words, 3, replace=False) for _ in range(words)])  # [words, 3]
    with Path(path).open("w", encoding="utf-8") as f:
        for _ in range(documents):
            for _ in range(8):
                w, sentence = rng.integers(words), []
                for _ in range(rng.integers(6, 13)):
                    sentence.append(vocab[w])
                    w = successors[w][rng.choice(3, p=[0.6, 0.25, 0.15])]
                f.write(" ".join(sentence) + " .\n")
            f.write("\n")
    Path(vocab_file).write_text("\n".join([*WordPieceTokenizer.REQUIRED_TOKENS, ".", *vocab]) + "\n", encoding="utf-8")
