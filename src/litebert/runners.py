"""Runners: padded numpy inputs -> numpy float32 outputs under the head family's export names (litebert.heads'
`outputs`: logits, start_logits / end_logits, last_hidden_state, ...), for the prediction path
(litebert.families.base.Family.run).

Inputs: {"input_ids", "attention_mask", "token_type_ids"}: int64 [B, L], or [B, C, L] for multiple choice.
TorchRunner runs a model (a saved one made ready by device.for_inference, or fine-tuning's live model under
autocast); OnnxRunner an exported graph. torch is imported only by TorchRunner's methods: the ONNX path runs
without it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from litebert import heads
from litebert.errors import ConfigError, LitebertError


class TorchRunner:
    """A model's forward from numpy: `outputs` maps an export name to the model output field it reads (a family's
    outputs, heads.HeadFamily.fields). autocast: the precision to autocast at ("fp32": none; a saved model's
    weights are already in their precision)."""

    # A padded batch costs about its real tokens (device.for_inference: the encoder's matmuls skip the padding), so
    # a server need not cut a round into batches of similar length (`serving`); an ONNX graph pays for the padding.
    skips_padding = True

    def __init__(self, model, outputs: dict[str, str], device=None, autocast: str = "fp32"):
        import torch

        self.torch, self.model, self.fields = torch, model, outputs
        self.device = device if device is not None else next(model.parameters()).device
        self.precision = autocast
        self.vocab_size = model.config.vocab_size

    @classmethod
    def load(cls, weights_dir: Path, task: str, backend: str, threads: int | None,
             device: str | None = None) -> TorchRunner:
        """A saved directory's model for a pipeline task, on `device` (default cpu) at `backend` precision."""
        import torch

        import litebert.model as models
        from litebert.device import check_device, for_inference

        if threads:
            torch.set_num_threads(threads)
        family = heads.for_pipeline(task)
        model = models.MODEL_CLASSES[family.model_class].from_pretrained(weights_dir)
        fresh = [n for n in model.load_report.get("initialised", []) if "pooler" not in n or task != "embeddings"]
        if fresh:
            raise LitebertError(f"{weights_dir}: has no trained weights for {', '.join(fresh)}, which {task} "
                                f"needs; use a directory fine-tuned for {task}")
        return cls(for_inference(model, backend, check_device(device or "cpu")), family.fields)

    def encoder(self) -> TorchRunner:
        """A runner over this model's encoder alone (embeddings), sharing its weights."""
        return TorchRunner(getattr(self.model, "albert", self.model), heads.BY_NAME["base"].fields, self.device,
                           self.precision)

    def __call__(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        from litebert.device import autocast

        torch = self.torch
        self.model.eval()  # fine-tuning's live model is evaluated between training steps
        with torch.inference_mode(), autocast(self.precision, self.device):
            out = self.model(**{k: torch.from_numpy(v).to(self.device) for k, v in inputs.items()})
        return {name: getattr(out, attr).float().cpu().numpy() for name, attr in self.fields.items()
                if getattr(out, attr) is not None}


class OnnxRunner:
    skips_padding = False

    def __init__(self, path: Path, threads: int | None):
        try:
            import onnxruntime as ort
        except ImportError:
            raise ConfigError("backend 'onnx' needs onnxruntime (pip install litebert[onnx])") from None
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        try:
            self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own types for unreadable graphs
            raise LitebertError(f"{path}: onnxruntime cannot load it ({exc})") from None
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.outputs = [o.name for o in self.session.get_outputs()]
        self.vocab_size = None

    def __call__(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        values = self.session.run(self.outputs, {k: inputs[k] for k in self.inputs})
        return {name: np.asarray(v, dtype=np.float32) for name, v in zip(self.outputs, values)}
