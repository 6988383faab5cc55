"""Embeddings: the bare encoder's family (any directory has one), in one module. The model class is `AlbertModel`.

Result schema, at every door: per text, one vector (a list of H floats): the mean of the last layer over real
tokens ([CLS] and [SEP] included, padding not), or the last layer at [CLS] (pooling="cls"); normalize=True scales
it to unit L2 length."""

from __future__ import annotations

import numpy as np

from litebert.errors import ConfigError
from litebert.families.base import Family, need_text


class Embeddings(Family):
    task = "embeddings"
    params = ("pooling", "normalize")
    request = ("TextItem", "EmbedParams")
    results_count_truncation = False  # a result is a vector: cuts are warned about (check_truncation)

    def check(self, item, index):
        return need_text(item, "text", index)

    def example(self, text, index):
        from litebert.data.examples import Example

        return Example(str(index), text, None)

    def encode(self, examples):
        from litebert.data.tasks import encode_examples

        return encode_examples(examples, self.tokenizer, self.record.max_seq_length, None)

    def reduce(self, batch, outputs, pooling: str = "mean", normalize: bool = False):
        hidden = outputs["last_hidden_state"].astype(np.float64)  # [B, L, H]
        if pooling == "cls":
            vectors = hidden[:, 0]
        elif pooling == "mean":
            mask = batch["attention_mask"][..., None].astype(np.float64)  # [B, L, 1]
            vectors = (hidden * mask).sum(1) / mask.sum(1)
        else:
            raise ConfigError(f"pooling={pooling!r}: use 'mean' or 'cls'")
        if normalize:
            vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)
        return list(vectors)

    def decode(self, examples, feats, outputs, pooling: str = "mean", normalize: bool = False):
        return [v.tolist() for v in outputs]

    def similarity(self, a, b, pooling: str = "mean"):
        """Cosine similarity of texts' embeddings: a float for two texts, a list for a text and a list of texts,
        a len(a) x len(b) list of lists for two lists. Unit vectors (normalize=True) make it a dot product."""
        first, second = ([x] if not isinstance(x, list) else x for x in (a, b))
        vectors = np.asarray(self(first + second, pooling=pooling, normalize=True))  # [len(a) + len(b), H]
        sims = vectors[:len(first)] @ vectors[len(first):].T  # [len(a), len(b)]
        if not isinstance(b, list):
            sims = sims[:, 0]  # [len(a)]
        if not isinstance(a, list):
            sims = sims[0]  # [len(b)], or a scalar
        return sims.tolist()
