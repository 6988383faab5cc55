"""Word segmentation for whole-word masking of text without spaces (Chinese), as albert_zh and the Chinese
BERT-wwm models do it: a segmenter (jieba) splits the text into words, and a token starts a word when the
tokenizer would start one there AND a segmented word begins at its first character. A WordPiece Chinese vocab
makes every character a token and a "word", so without this a 2-character word is masked half the time by half.

jieba is an optional dependency (`pip install litebert[zh]`); it is imported only when a store asks for it.
"""

from __future__ import annotations

import numpy as np

from litebert.errors import ConfigError

SEGMENTERS = ("jieba",)


def load_segmenter(name: str):
    """A function text -> sorted word-start character offsets into `text`."""
    if name not in SEGMENTERS:
        raise ConfigError(f"word segmenter {name!r}: use one of {', '.join(SEGMENTERS)}")
    try:
        import jieba
    except ImportError:
        raise ConfigError("whole-word masking for Chinese needs jieba: pip install 'litebert[zh]' (or jieba)") \
            from None
    import logging

    jieba.setLogLevel(logging.WARNING)  # its dictionary-loading chatter goes to stderr otherwise
    jieba.initialize()

    def word_starts(text: str) -> np.ndarray:
        return np.fromiter((start for _, start, _ in jieba.tokenize(text)), dtype=np.int64)  # [W]

    return word_starts


def segmented_word_starts(tokenizer, vocab_word_starts: np.ndarray, text: str, segment) -> tuple[list[int],
                                                                                                   np.ndarray]:
    """(ids, [T] bool word-start flags) of one text: a token starts a word when the vocab says it can start one
    (no "##" / "▁" continuation) and the segmenter starts a word at the token's first original character."""
    ids, spans = tokenizer._encode_offsets(text)
    starts = np.fromiter((s for s, _ in spans), dtype=np.int64, count=len(spans))  # [T] original char offsets
    flags = vocab_word_starts[np.asarray(ids, dtype=np.int64)] & np.isin(starts, segment(text))
    if len(flags):
        flags[0] = True  # a sentence starts a word whatever the segmenter thinks of its first character
    return ids, flags
