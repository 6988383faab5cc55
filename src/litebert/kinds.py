"""What every head family's training code provides: `Kind`, the base class a litebert.heads row names.

No torch here: a family's module (e.g. litebert.families.choice) imports this next to its pipeline, and the ONNX
inference path imports that module without torch. The fine-tuning loop (finetune.py) calls these methods.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from litebert.data.tasks import TaskSpec
    from litebert.finetune import FinetuneConfig


class Kind:
    """How one head family (a litebert.heads row names its Kind) turns examples into features and model outputs
    into metrics/predictions."""
    input_keys: tuple[str, ...] = ("input_ids", "attention_mask", "token_type_ids")
    label_names: list[str] | None = None  # the model's names for its labels (config.json), when scoring a model

    def __init__(self, cfg: FinetuneConfig):
        self.cfg = cfg

    def num_labels(self, label_list) -> int:
        return len(label_list)

    def encode(self, examples, tokenizer, spec: TaskSpec, cfg: FinetuneConfig, label_list) -> list[dict]:
        raise NotImplementedError

    def targets(self, batch: dict) -> dict:
        return {}

    def collect(self, out, batch: dict) -> list:
        """Per-feature outputs (numpy), in feature order."""
        return list(out.logits.float().cpu().numpy())

    def score(self, examples, features, outputs, spec: TaskSpec, label_list) -> dict[str, float]:
        raise NotImplementedError

    def predictions(self, examples, features, outputs, spec: TaskSpec, label_list) -> list[dict]:
        raise NotImplementedError

    def collapse(self, examples, features, outputs, spec: TaskSpec, label_list) -> dict:
        """{"collapse": what, ...its detail} when every prediction is the same degenerate answer (one class, a
        constant, one tag, no answer, one option); {} otherwise. `collapse_warning` words it."""
        return {}
