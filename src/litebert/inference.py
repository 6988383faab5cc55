"""Inference helpers: fill-mask over a trained model directory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from litebert.errors import ConfigError, LitebertError

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


def fill_mask(model_dir: str | Path, texts: list[str], top_k: int = 5, model=None,
              tokenizer=None) -> list[list[list[MaskPrediction]]]:
    """For each text, for each [MASK] in it, the top_k predictions."""
    import torch

    from litebert.model import AlbertForMaskedLM
    from litebert.tokenizer import load_tokenizer

    from litebert.rundir import resolve_model_dir

    if model is None or tokenizer is None:
        model_dir = resolve_model_dir(model_dir)
    tokenizer = tokenizer or load_tokenizer(model_dir)
    model = (model or AlbertForMaskedLM.from_pretrained(model_dir)).eval()
    if model.config.vocab_size != tokenizer.vocab_size:
        raise LitebertError(f"{model_dir}: model vocab {model.config.vocab_size} != tokenizer vocab "
                            f"{tokenizer.vocab_size}")
    proposable = model.config.vocab_size - len(tokenizer.special_ids)
    if not 1 <= top_k <= proposable:
        raise ConfigError(f"--top-k {top_k}: must be in [1, {proposable}] (the vocabulary of {model_dir} has "
                          f"{model.config.vocab_size} tokens, {len(tokenizer.special_ids)} of them special)")
    results = []
    for text in texts:
        ids = encode_with_masks(tokenizer, text)
        if len(ids) > model.config.max_position_embeddings:
            raise LitebertError(f"fill-mask: {len(ids)} tokens, more than the model's "
                                f"{model.config.max_position_embeddings} positions")
        input_ids = torch.tensor([ids])
        positions = (input_ids == tokenizer.mask_id).nonzero()[:, 1].unsqueeze(0)  # [1, P]
        with torch.no_grad():
            logits = model(input_ids, masked_positions=positions).mlm_logits[0].float()  # [P, V]
        results.append(top_predictions(logits.numpy(), tokenizer, top_k))
    return results
