"""Masked-LM (fill-mask): the family of a pretraining or masked-LM directory, in one module. The model class is
`AlbertForMaskedLM` (model.py; a pretraining checkpoint loads into it). Special tokens ([CLS], <pad>, ...) are
never proposed.

Result schema, at every door: per text, per [MASK] in it (left to right), the top_k candidates
[{"token", "token_id", "score"}], best first (`score`: softmax probability)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from litebert.errors import ConfigError, LitebertError
from litebert.families.base import Family, need_text

MASK = "[MASK]"
WORD_START = "<word start>"  # how listings show SentencePiece's bare "▁" piece (MaskPrediction.shown)


@dataclass
class MaskPrediction:
    token: str  # the vocabulary entry, e.g. "▁paris" (SentencePiece) or "##ing" (WordPiece)
    token_id: int
    score: float  # softmax probability

    @property
    def text(self) -> str:
        """The token as it reads in text: no word-start mark "▁", no continuation mark "##"."""
        return self.token.replace("\u2581", " ").strip() if not self.token.startswith("##") else self.token[2:]

    @property
    def shown(self) -> str:
        """How a listing prints it: `text`, except for a piece that reads as nothing. SentencePiece's bare "▁"
        proposes "a new word starts here, spelled by the pieces after it" (mostly a word that starts with a quote,
        bracket or dash: about 4% of the demo corpus's pieces are a bare "▁"); as text it is empty, so it is
        shown as WORD_START rather than as a blank before its score."""
        return self.text or (WORD_START if self.token == "\u2581" else self.token)

    @property
    def starts_word(self) -> bool:
        return not self.token.startswith("##") and (self.token.startswith("\u2581") or "\u2581" not in self.token)


def filled_text(text: str, masks: list[list[MaskPrediction]]) -> str:
    """`text` with each [MASK] replaced by its top prediction (a WordPiece "##" piece joins the word before)."""
    parts = text.split(MASK)
    out = parts[0]
    for part, preds in zip(parts[1:], masks):
        top = preds[0]
        if not top.starts_word:
            out = out.rstrip()
        out += top.text + part
    return out


def format_predictions(preds: list[MaskPrediction], score_format: str = ".3g") -> str:
    """One [MASK]'s candidates as a line: "file (0.12)  list (0.08)  <word start> (0.05)"."""
    return "  ".join(f"{p.shown} ({p.score:{score_format}})" for p in preds)


def encode_with_masks(tokenizer, text: str) -> list[int]:
    """[CLS] text [SEP] with every literal "[MASK]" turned into the mask id.

    The official preprocessing would lower-case "[MASK]" and split it into pieces (control symbols are never
    produced from raw text), so the text is cut at each marker and the pieces are encoded separately.
    """
    parts = text.split(MASK)
    if len(parts) < 2:
        raise LitebertError(f"fill-mask: the text has no {MASK}: {text!r}")
    ids = [tokenizer.cls_id]
    for i, part in enumerate(parts):
        ids += tokenizer.encode_ids(part) if part.strip() else []
        if i < len(parts) - 1:
            ids.append(tokenizer.mask_id)
    return ids + [tokenizer.sep_id]


def top_predictions(logits: np.ndarray, tokenizer, top_k: int) -> list[list[MaskPrediction]]:
    """logits [P, V] at P mask positions -> per position the top_k tokens by softmax probability.
    Special tokens ([CLS], <pad>, ...) are never proposed."""
    logits = np.asarray(logits, dtype=np.float64).copy()
    logits[:, sorted(tokenizer.special_ids)] = -np.inf
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    top = np.argsort(-probs, axis=-1, kind="stable")[:, :top_k]  # [P, k]
    return [[MaskPrediction(tokenizer.convert_ids_to_tokens([i])[0], int(i), float(row[i])) for i in ids]
            for row, ids in zip(probs, top)]


class FillMask(Family):
    """Per text, per [MASK] in it: the top_k tokens with their probabilities."""

    task = "fill-mask"
    params = ("top_k",)
    request = ("TextItem", "MaskParams")
    warmup = "warm [MASK]"

    def check(self, item, index):
        return need_text(item, "text", index)

    def encode(self, texts):
        feats = []
        for text in texts:
            ids = encode_with_masks(self.tokenizer, text)
            if len(ids) > self.record.max_seq_length:
                raise ConfigError(f"fill-mask: {len(ids)} tokens, more than the model's {self.record.max_seq_length}")
            feats.append({"input_ids": ids, "attention_mask": [1] * len(ids), "token_type_ids": [0] * len(ids)})
        return feats

    def reduce(self, batch, outputs, **params):
        ids, logits = batch["input_ids"], outputs["logits"]  # [B, L], [B, L, V]
        return [logits[i][ids[i] == self.tokenizer.mask_id] for i in range(len(ids))]  # [P, V] each

    def decode(self, texts, feats, outputs, top_k: int = 5):
        vocab = self.tokenizer.vocab_size
        proposable = vocab - len(self.tokenizer.special_ids)
        if not 1 <= top_k <= proposable:
            raise ConfigError(f"--top-k {top_k}: must be in [1, {proposable}] (the vocabulary of {self.source} has "
                              f"{vocab} tokens, {len(self.tokenizer.special_ids)} of them special)")
        return [[[{"token": p.token, "token_id": p.token_id, "score": p.score} for p in row]
                 for row in top_predictions(o, self.tokenizer, top_k)] for o in outputs]


def fill_mask(model_dir: str | Path, texts: list[str], top_k: int = 5,
              precision: str = "auto") -> list[list[list[MaskPrediction]]]:
    """For each text, for each [MASK] in it, the top_k predictions (the CLI's `fill-mask` and the demo):
    `litebert.pipeline("fill-mask", ...)`'s results as MaskPredictions (a directory without a trained MLM head is
    refused there, naming what it is)."""
    from litebert.pipelines import pipeline

    pipe = pipeline("fill-mask", model_dir, precision)
    return [[[MaskPrediction(**p) for p in row] for row in masks] for masks in pipe(list(texts), top_k=top_k)]
