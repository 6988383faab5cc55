"""What does a checkpoint's frozen encoder know about SST-2 sentiment? A linear probe (logistic regression) on
four fixed features of each sentence, trained on the first N training sentences and scored on the full dev set:

- emb_mean: the mean of the input embeddings, before the E->H projection ([B, E]);
- cls: the last layer's [CLS] vector; pooled: the pooler's output (dense + tanh over [CLS]);
- mean: the mean of the last layer over the sentence's tokens.

Each probe's L2 strength is picked from three values by dev accuracy (a diagnostic, not a benchmark score). Also
prints each feature's mean pairwise cosine similarity over 300 dev sentences: near 1, the sentences are hard to
tell apart. Needs scikit-learn (the dev extra).

    python experiments/sst2_probe.py --train-examples 1000 runs/t8/p-init0625/checkpoint-5000 runs/t8/random-init
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from litebert.data.tasks import get_task, read_examples
from litebert.model import AlbertModel
from litebert.lab.shared_data import shared_data_dir
from litebert.tokenizer import load_tokenizer

FEATURES = ("emb_mean", "cls", "pooled", "mean")


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[B, L, D] averaged over the real tokens ([B, L, 1] mask) -> [B, D]."""
    return (x * mask).sum(1) / mask.sum(1)


def sentence_features(model: AlbertModel, tokenizer, texts: list[str], batch: int = 64) -> dict[str, np.ndarray]:
    out: dict[str, list[torch.Tensor]] = {k: [] for k in FEATURES}
    with torch.no_grad():
        for i in range(0, len(texts), batch):
            enc = tokenizer.batch_encode(texts[i:i + batch], max_length=64, padding=True, return_tensors="pt")
            mask = enc["attention_mask"].unsqueeze(-1).float()  # [B, L, 1]
            emb = model.embeddings(enc["input_ids"], enc["token_type_ids"])  # [B, L, E]
            o = model(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
            out["emb_mean"].append(masked_mean(emb, mask))
            out["cls"].append(o.sequence_output[:, 0])
            out["pooled"].append(o.pooled_output)
            out["mean"].append(masked_mean(o.sequence_output, mask))
    return {k: torch.cat(v).float().numpy() for k, v in out.items()}


def mean_cosine(x: np.ndarray) -> float:
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    sims = x @ x.T
    return float((sims.sum() - len(x)) / (len(x) * (len(x) - 1)))


def probe_accuracy(train_x, train_y, dev_x, dev_y) -> float:
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    scale = StandardScaler().fit(train_x)
    return max(LogisticRegression(C=c, max_iter=2000).fit(scale.transform(train_x), train_y)
               .score(scale.transform(dev_x), dev_y) for c in (0.01, 0.1, 1.0))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoints", nargs="+")
    ap.add_argument("--train-examples", type=int, default=1000)
    args = ap.parse_args()
    torch.set_num_threads(1)
    sst2 = shared_data_dir() / "glue" / "SST-2"
    train = read_examples(get_task("sst-2"), sst2, "train")[:args.train_examples]
    dev = read_examples(get_task("sst-2"), sst2, "dev")
    train_y, dev_y = np.array([e.label for e in train]), np.array([e.label for e in dev])
    print("| checkpoint | " + " | ".join(FEATURES) + " |")
    for path in args.checkpoints:
        model, tokenizer = AlbertModel.from_pretrained(path).eval(), load_tokenizer(path)
        tr = sentence_features(model, tokenizer, [e.text_a for e in train])
        dv = sentence_features(model, tokenizer, [e.text_a for e in dev])
        cells = [f"{probe_accuracy(tr[k], train_y, dv[k], dev_y):.3f} (cos {mean_cosine(dv[k][:300]):.2f})"
                 for k in FEATURES]
        print(f"| {path} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
