"""Representation health: does the encoder still tell its inputs apart?

A BERT-family model early in pretraining (or trained with too high a learning rate) can map every input to nearly
the same hidden state: the MLM head then predicts word frequencies, and a classifier fine-tuned on top sees one
point for all sentences and stays at the majority class. Two figures on a fixed batch of real sequences say
whether that happened:

- `health_spread`: across-batch standard deviation of the sentence vectors (mean of the last layer over real
  tokens), averaged over features, divided by their root-mean-square. Identical sentence vectors give 0; a
  freshly initialised model gives about 0.2-0.4. Scale-free, so a large LayerNorm bias cannot hide a collapse.
- `health_pooled_cos`: mean pairwise cosine similarity of the pooled ([CLS] -> dense -> tanh) outputs, the
  vector the SOP and sequence-classification heads read. Near 1 when the pooler says the same for every input.

A model is called collapsed when `health_spread` < COLLAPSE_SPREAD: its sentences differ by under 1% of their
size. (The issue that asked for this saw pooled outputs differing by ~5e-4 across inputs.)
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from litebert.tokenizer import load_tokenizer

COLLAPSE_SPREAD = 0.01
HEALTH_BATCH = 16  # sequences in the fixed held-out batch: enough for a stable spread, cheap at every log step


def spread(x: torch.Tensor) -> float:
    """x [B, H] -> mean over features of the across-batch std, over the RMS of x (0: all rows equal)."""
    x = x.double()
    rms = x.pow(2).mean().sqrt()
    return (x.std(0, unbiased=False).mean() / rms).item() if rms > 0 else 0.0


def sentence_spread(hidden: torch.Tensor, mask: torch.Tensor) -> float:
    """`health_spread` of a last layer: hidden [B, L, H], mask [B, L] (1 at real tokens) -> the spread of the
    sentence vectors, each the mean of its real tokens' hidden states. Any encoder's output will do."""
    weights = mask[..., None].double()  # [B, L, 1]
    return spread((hidden.double() * weights).sum(1) / weights.sum(1).clamp_min(1.0))  # [B, H]


def mean_pairwise_cosine(x: torch.Tensor) -> float:
    """x [B, H] -> mean cosine similarity over the B (B - 1) ordered pairs of distinct rows."""
    b = x.shape[0]
    if b < 2:
        return float("nan")
    unit = F.normalize(x.double(), dim=-1)
    sims = unit @ unit.T  # [B, B]
    return ((sims.sum() - sims.diagonal().sum()) / (b * (b - 1))).item()


@torch.no_grad()
def representation_health(encoder: torch.nn.Module, batch: dict[str, torch.Tensor]) -> dict[str, float]:
    """The two health figures of `encoder` (an AlbertModel: the `.albert` of any task model) on `batch`
    (input_ids / attention_mask / token_type_ids, [B, L]). Leaves the module's train/eval mode as it was."""
    was_training = encoder.training
    encoder.eval()
    try:
        device = next(encoder.parameters()).device
        mask = batch["attention_mask"].to(device)
        out = encoder(batch["input_ids"].to(device), mask, batch["token_type_ids"].to(device))
        result = {"health_spread": sentence_spread(out.sequence_output, mask)}
        if out.pooled_output is not None:
            result["health_pooled_cos"] = mean_pairwise_cosine(out.pooled_output)
        return result
    finally:
        encoder.train(was_training)


def is_collapsed(health: dict[str, float]) -> bool:
    return health.get("health_spread", 1.0) < COLLAPSE_SPREAD


def warn_collapsed(health: dict[str, float], where: str) -> None:
    """Print the collapse warning to stderr (every time: a warnings.warn would show once per process)."""
    print(f"litebert: warning: {where}: the model's representations are collapsed (health_spread "
          f"{health['health_spread']:.2g} < {COLLAPSE_SPREAD}: all inputs get nearly the same hidden state, and the "
          "MLM predicts little beyond word frequencies); fine-tuning from it tends to stay at the majority class; "
          "pretrain longer or with the recipe of docs/recipes.md", file=sys.stderr, flush=True)


COLLAPSE_PATIENCE = 3  # consecutive deep checks after warm-up that make a collapse
# Below this a run does not come back: from the official draw albert-base fell through it within 30 updates and
# stayed at 1e-6..1e-8 (the GPU runs, for 1,000 updates); with the residual branches scaled (pretrain's
# default, PreTrainedAlbert.init_branches) it dipped to 8e-4 and climbed back over COLLAPSE_SPREAD by update 240
# (docs/recipes.md, "Session 18").
DEEP_COLLAPSE_SPREAD = 1e-4
COLLAPSE_POLICIES = ("warn", "stop")


class CollapseWatch:
    """Pretraining's collapse detector, fed every health check.

    `update` says "dip" once, at the first check past the warm-up under COLLAPSE_SPREAD: deep models pass through
    one on their way out of the piece-frequency phase, so it is news, not a verdict. It says "collapsed" once, when
    `patience` consecutive checks past the warm-up are under DEEP_COLLAPSE_SPREAD: runs that fell that far stayed
    at the piece-frequency guess (docs/recipes.md, "Why pretraining collapsed"). A model still under
    COLLAPSE_SPREAD when the run ends is warned about there (`warn_collapsed`).
    """

    def __init__(self, patience: int = COLLAPSE_PATIENCE):
        self.patience = patience
        self.streak = 0  # consecutive deep checks after warm-up
        self.first_dip: int | None = None  # the step of the first check under COLLAPSE_SPREAD, warm-up included
        self.dip_said = False
        self.declared_at: int | None = None

    def update(self, step: int, health: dict[str, float], past_warmup: bool) -> str | None:
        """Take one health check: "dip" or "collapsed" at the check that first makes it so, else None."""
        spread = health.get("health_spread", 1.0)
        if spread < COLLAPSE_SPREAD and self.first_dip is None:
            self.first_dip = step
        self.streak = self.streak + 1 if spread < DEEP_COLLAPSE_SPREAD and past_warmup else 0
        if self.declared_at is None and self.streak >= self.patience:
            self.declared_at = step
            return "collapsed"
        if spread < COLLAPSE_SPREAD and past_warmup and not self.dip_said and self.declared_at is None:
            self.dip_said = True
            return "dip"
        return None


def dip_message(health: dict[str, float], step: int, first_dip: int | None) -> str:
    """What a run in a dip is going through, for `CollapseWatch`'s "dip"."""
    since = f" since step {first_dip}" if first_dip is not None and first_dip < step else ""
    return (f"step {step}: health_spread {health['health_spread']:.2g} < {COLLAPSE_SPREAD}{since}: the "
            f"representations are in a dip (inputs get nearly the same hidden state while the MLM learns the piece "
            f"frequencies). Deep models pass through one and climb back; the run is called collapsed if it falls "
            f"under {DEEP_COLLAPSE_SPREAD:g} for {COLLAPSE_PATIENCE} checks in a row")


def collapse_message(health: dict[str, float], step: int, first_dip: int | None, advice: str) -> str:
    """What happened and what to change, for a run that `CollapseWatch` called collapsed."""
    since = f" since step {first_dip}" if first_dip is not None and first_dip < step else ""
    return (f"step {step}: the run has collapsed: health_spread {health['health_spread']:.2g} < "
            f"{DEEP_COLLAPSE_SPREAD:g}, under {COLLAPSE_SPREAD}{since} (every input gets the same hidden state, so "
            f"the MLM can only predict piece frequencies; runs that fell this far did not recover in their budget). "
            f"{advice}")


def store_health_batch(store, max_seq_length: int, size: int = HEALTH_BATCH) -> dict[str, torch.Tensor]:
    """A fixed batch of plain (unmasked) text, [B, L] tensors: held-out sentences packed in order into rows of
    [CLS] tokens [SEP] of at most `max_seq_length`, one document per row at most; from the validation split,
    topped up from the training split when it has fewer than `size` rows. The same rows at every call."""
    cls, sep, pad = (store.token_id(name) for name in ("cls", "sep", "pad"))
    room = max_seq_length - 2
    rows: list[list[int]] = []
    for split_name in ("validation", "train"):
        split = store.split(split_name)
        for index in range(store.num_documents(split_name)):
            row: list[int] = []
            for sentence in split.document(index):
                if row and len(row) + len(sentence) > room:
                    rows.append(row)
                    row = []
                row.extend(int(t) for t in sentence[: room - len(row)])
            rows.append(row)
            if len(rows) >= size:
                break
        if len(rows) >= size:
            break
    rows = [[cls, *row, sep] for row in rows[:size] if row]
    ids = torch.full((len(rows), max_seq_length), pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row)
        mask[i, : len(row)] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}


def texts_health_batch(tokenizer_dir: str | Path, texts: list[str], max_seq_length: int) -> dict[str, torch.Tensor]:
    """A batch of `texts` encoded with the model's tokenizer, for checking a model without its store."""
    tok = load_tokenizer(tokenizer_dir)
    enc = tok.batch_encode(texts, max_length=max_seq_length, padding="longest", return_tensors="pt")
    return {k: enc[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
