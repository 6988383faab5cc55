"""litebert: ALBERT (A Lite BERT) — pretrain from scratch, fine-tune, evaluate, convert and serve.

Public API (see README.md): configs, models, tokenizers, `pipeline` (inference from strings). Sub-modules load lazily so `import litebert` is cheap.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "AlbertConfig": "litebert.config",
    "PRESETS": "litebert.config",
    "AlbertOutput": "litebert.model",
    "AlbertModel": "litebert.model",
    "AlbertForPreTraining": "litebert.model",
    "AlbertForMaskedLM": "litebert.model",
    "AlbertForSequenceClassification": "litebert.model",
    "AlbertForTokenClassification": "litebert.model",
    "AlbertForQuestionAnswering": "litebert.model",
    "AlbertForMultipleChoice": "litebert.model",
    "AlbertTokenizer": "litebert.tokenizer",
    "WordPieceTokenizer": "litebert.tokenizer",
    "load_tokenizer": "litebert.tokenizer",
    "LitebertError": "litebert.errors",
    "pipeline": "litebert.pipelines",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'litebert' has no attribute {name!r}")
