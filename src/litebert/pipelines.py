"""Inference from strings: `litebert.pipeline(task, model_dir)` -> a callable that returns plain Python.

    clf = litebert.pipeline("text-classification", "runs/sst2")      # the task may be left out: None
    clf("a gripping, funny film")            -> {"label": "1", "score": 0.93, "scores": {"0": 0.07, "1": 0.93}}
    clf(["one text", ("a", "pair")])         -> [ {...}, {...} ]

Tasks and their inputs (one item, or a list of items -> a list of results):
- text-classification: str, (text, pair) tuple, or {"text", "text_pair"}; single-label, regression or
  multi-label as the directory's head says.
- token-classification: str; words are \\w+ runs and single punctuation marks (CoNLL-style), entities come
  back with character offsets into the input.
- question-answering: {"question", "context"}; long contexts go through the fine-tuning code's doc-stride
  windows; SQuAD v2 heads may answer "" (no answer).
- multiple-choice: {"context", "question", "options": [...]}.
- fill-mask: str with one or more "[MASK]".
- embeddings: str; pooling "mean" (over real tokens) or "cls", optional L2 normalisation;
  `emb.similarity(a, b)`: their cosine similarity.

What the model is (task, head, labels, max length, doc stride) comes from the directory's records
(`litebert.records`). Features come from the fine-tuning code (data/tasks.py, squad.py, ner.py, race.py), so
inference tokenizes exactly as training did. Lists are run in batches of similar length (little padding).

backend: "fp32" or "bf16" (PyTorch, weights cast to bfloat16) or "onnx" (onnxruntime; a directory written by
`export-onnx`, or `onnx_file=` beside a model directory). The ONNX backend does not import torch.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from collections.abc import Sequence

import numpy as np

from litebert import heads
from litebert.errors import ConfigError, LitebertError
from litebert.records import ModelRecord, read_record

TASKS = heads.PIPELINE_TASKS
BACKENDS = ("auto", "fp32", "bf16", "onnx")  # auto: device.py's probe, as training uses (bf16 where faster)
TRUNCATIONS = ("longest_first", "error")  # error: refuse an input longer than the model's max_seq_length
ONNX_FILE = "model.onnx"
WORD_RE = re.compile(r"\w+|[^\w\s]")


def pipeline(task: str | None, model: str | Path, backend: str = "auto", *, batch_size: int = 32,
             onnx_file: str | Path | None = None, threads: int | None = None,
             truncation: str = "longest_first", device: str | None = None) -> Pipeline:
    """A ready pipeline for `model` (a model directory, a fine-tuning run directory, or an `export-onnx`
    directory). task None: the directory's own task. backend "auto": the precision the start-up probe picks
    (`pipe.precision` says which answered). truncation "error": an input over the model's max_seq_length is
    refused instead of cut (results always say how many tokens were cut: `truncated_tokens`). device: where the
    PyTorch backends run ("cpu", "cuda", "cuda:N"; default cpu); inputs go there and results come back to the
    host, so the results' form does not depend on it."""
    if backend not in BACKENDS:
        raise ConfigError(f"backend {backend!r} is not one of {', '.join(BACKENDS)}")
    if truncation not in TRUNCATIONS:
        raise ConfigError(f"truncation {truncation!r} is not one of {', '.join(TRUNCATIONS)}")
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
    weights_dir, record = read_record(model)
    task = task or record.task
    family = heads.for_pipeline(task)
    if task != "embeddings" and task != record.task:
        trained = f" fine-tuned for {record.finetune_task}" if record.finetune_task else ""
        raise ConfigError(f"{model} is a {record.head} model ({record.architecture}){trained}: it serves "
                          f"{record.task!r} (and 'embeddings'), not {task!r}, which needs a trained "
                          f"{family.model_class}")
    from litebert.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(weights_dir)
    if backend == "onnx":
        if device not in (None, "cpu"):
            raise ConfigError(f"device {device!r}: the onnx backend runs on the CPU (onnxruntime's CPU provider)")
        runner = OnnxRunner(_onnx_path(weights_dir, onnx_file, task, record), threads)
    else:
        backend = inference_precision(backend, device)
        runner = TorchRunner.load(weights_dir, task, backend, threads, device)
    if runner.vocab_size is not None and runner.vocab_size != tokenizer.vocab_size:
        raise LitebertError(f"{weights_dir}: the model's vocab_size {runner.vocab_size} does not match its "
                            f"tokenizer's {tokenizer.vocab_size}")
    pipe = family.pipeline_class()(record, tokenizer, runner, batch_size)
    pipe.precision, pipe.truncation, pipe.source = backend, truncation, str(model)
    return pipe


def inference_precision(precision: str, device: str | None = None) -> str:
    """The precision an inference door runs at: "auto" is device.py's rule, the one training uses (on a CPU the
    start-up probe: bf16 where this host runs it faster, else fp32; on a GPU bf16 where it has bf16, else fp32,
    since fp16 weights without a loss scale can overflow)."""
    if precision != "auto":
        return precision
    import torch

    from litebert.device import resolve_precision

    resolved = resolve_precision("auto", torch.device(device or "cpu"))
    return resolved if resolved in ("fp32", "bf16") else "fp32"


def _onnx_path(weights_dir: Path, onnx_file, task: str, record: ModelRecord) -> Path:
    path = Path(onnx_file) if onnx_file else weights_dir / (record.onnx_file or ONNX_FILE)
    if not path.is_file():
        raise ConfigError(f"{path}: no ONNX file; export one with `litebert export-onnx {weights_dir} "
                          f"--task {heads.for_pipeline(task).export_task} --out DIR` or pass onnx_file=")
    if task == "embeddings" and record.task != "embeddings" and not onnx_file:
        raise ConfigError(f"{path} is the {record.task} graph; embeddings need the 'base' export (onnx_file=)")
    return path


# --------------------------------------------------------------------------------------------- runners
# A runner maps padded numpy inputs ({"input_ids", "attention_mask", "token_type_ids"}: int64 [B, L], or
# [B, C, L] for multiple choice) to numpy float32 outputs under transformers' names: logits,
# start_logits / end_logits, last_hidden_state.


class TorchRunner:
    OUTPUTS = {"logits": "logits", "start_logits": "start_logits", "end_logits": "end_logits",
               "last_hidden_state": "sequence_output"}
    # A padded batch costs about its real tokens (device.for_inference: the encoder's matmuls skip the padding), so
    # a server need not cut a round into batches of similar length (`serving`); an ONNX graph pays for the padding.
    skips_padding = True

    def __init__(self, model, mlm: bool = False):
        import torch

        self.torch, self.model, self.mlm = torch, model.eval(), mlm
        self.vocab_size = model.config.vocab_size
        self.device = next(model.parameters()).device

    @classmethod
    def load(cls, weights_dir: Path, task: str, backend: str, threads: int | None,
             device: str | None = None) -> TorchRunner:
        import torch

        import litebert.model as models

        if threads:
            torch.set_num_threads(threads)
        model = models.MODEL_CLASSES[heads.for_pipeline(task).model_class].from_pretrained(weights_dir)
        fresh = [n for n in model.load_report.get("initialised", []) if "pooler" not in n or task != "embeddings"]
        if fresh:
            raise LitebertError(f"{weights_dir}: has no trained weights for {', '.join(fresh)}, which {task} "
                                f"needs; use a directory fine-tuned for {task}")
        from litebert.device import check_device, for_inference

        return cls(for_inference(model, backend, check_device(device or "cpu")), mlm=task == "fill-mask")

    def encoder(self) -> TorchRunner:
        """A runner over this model's encoder alone (embeddings), sharing its weights."""
        return TorchRunner(getattr(self.model, "albert", self.model))

    def __call__(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        torch = self.torch
        with torch.inference_mode():
            out = self.model(**{k: torch.from_numpy(v).to(self.device) for k, v in inputs.items()})
        if self.mlm:
            return {"logits": out.mlm_logits.float().cpu().numpy()}  # [B, L, V]
        return {name: getattr(out, attr).float().cpu().numpy() for name, attr in self.OUTPUTS.items()
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


# --------------------------------------------------------------------------------------------- pipelines


class Pipeline:
    """Items -> features -> batched runs -> per-item results. Subclasses say how items become features
    (`features`) and how per-feature outputs become results (`decode`)."""

    task: str
    params: tuple[str, ...] = ()  # keyword options of __call__
    model_keys = ("input_ids", "attention_mask", "token_type_ids")
    # `serve`: the request item and parameter models (serving.request_models names), and one warm-up input
    request: tuple[str, str] = ("TextItem", "NoParams")
    warmup: Any = "warm up"

    @classmethod
    def from_request(cls, item: dict):
        """A validated `serve` request item -> this pipeline's input form (default: its text)."""
        return item["text"]

    precision = "fp32"  # the precision that answers (pipeline() sets it)
    truncation = "longest_first"
    source = "the model"

    def __init__(self, record: ModelRecord, tokenizer, runner, batch_size: int):
        self.record, self.tokenizer, self.runner, self.batch_size = record, tokenizer, runner, batch_size
        self.labels = record.labels

    def what(self) -> str:
        """What the model is, for messages that refuse a request it was not made for."""
        r = self.record
        return (f"{self.source} is a {r.head} model" + (f" fine-tuned for {r.finetune_task}" if r.finetune_task
                                                        else "")
                + (f" on {r.input} inputs" if r.input else "") + f", max_seq_length {r.max_seq_length}")

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(task={self.task!r}, head={self.record.head!r}, "
                f"runner={type(self.runner).__name__})")

    def __call__(self, inputs, **params):
        single = not isinstance(inputs, list)
        items = [inputs] if single else inputs
        if not items:
            raise ConfigError(f"{self.task}: an empty list of inputs")
        unknown = sorted(set(params) - set(self.params))
        if unknown:
            raise ConfigError(f"{self.task}: unknown option {unknown[0]!r} (options: {', '.join(self.params) or 'none'})")
        items = [self.check(item, i) for i, item in enumerate(items)]
        results = self.predict(items, **params)
        return results[0] if single else results

    def embeddings(self) -> Embeddings:
        """An embeddings pipeline over this model's encoder (same weights, no second copy); PyTorch backends."""
        if self.task == "embeddings":
            return self
        if not isinstance(self.runner, TorchRunner):
            raise ConfigError("embeddings from a task's ONNX graph need the 'base' export (pipeline('embeddings', "
                              "dir, 'onnx', onnx_file=...))")
        return Embeddings(self.record, self.tokenizer, self.runner.encoder(), self.batch_size)

    def predict(self, items: list, **params) -> list:
        feats = self.features(items)
        self.check_truncation(feats)
        return self.decode(items, feats, self.run(feats, **params), **params)

    # Results carry `truncated_tokens` (sentence tasks) or `truncated_words` (tagging); a family whose results are
    # bare vectors cannot, so its cuts are announced with a warning instead.
    results_count_truncation = True

    def check_truncation(self, feats: list[dict]) -> None:
        """truncation="error": refuse inputs that max_seq_length would cut (features count what they dropped);
        otherwise a family whose results cannot say so warns."""
        cut = [(i, f["truncated_tokens"]) for i, f in enumerate(feats) if f.get("truncated_tokens", 0) > 0]
        if cut and self.truncation != "error" and not self.results_count_truncation:
            import warnings

            warnings.warn(f"{self.task}: {len(cut)} of {len(feats)} input(s) cut to the model's max_seq_length "
                          f"{self.record.max_seq_length} ({sum(n for _, n in cut)} tokens dropped; "
                          "truncation='error' refuses instead)", stacklevel=3)
        if self.truncation != "error":
            return
        if cut:
            i, n = cut[0]
            raise ConfigError(f"input {i}: {n} tokens over the model's max_seq_length "
                              f"{self.record.max_seq_length} (truncation='error'; {len(cut)} input(s) too long)")

    def check(self, item, index: int):
        return item

    def run(self, feats: list[dict], **params) -> list[dict[str, np.ndarray]]:
        """Per feature, its outputs (sliced out of the padded batch), in feature order. Batches hold features of
        similar length (sorted), so padding stays small."""
        from litebert.data.tasks import feature_length, pad_features

        order = sorted(range(len(feats)), key=lambda i: self.group_key(feats[i], feature_length(feats[i])))
        out: list[Any] = [None] * len(feats)
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            groups = [idx]
            keys = [self.group_key(feats[i], 0) for i in idx]
            if len(set(keys)) > 1:  # multiple choice: one batch per number of options
                groups = [[i for i, k in zip(idx, keys) if k == key] for key in dict.fromkeys(keys)]
            for group in groups:
                batch = pad_features([{k: feats[i][k] for k in self.model_keys} for i in group],
                                     self.tokenizer.pad_id, return_tensors="np")
                outputs = self.runner(batch)
                for _j, (i, o) in enumerate(zip(group, self.reduce(batch, outputs, **params))):
                    out[i] = o
        return out

    def group_key(self, feat: dict, length: int):
        return length

    def reduce(self, batch: dict, outputs: dict, **params) -> list:
        """Batch outputs -> one entry per row (default: each output's row)."""
        n = len(batch["input_ids"])
        return [{k: v[i] for k, v in outputs.items()} for i in range(n)]

    def features(self, items: list) -> list[dict]:
        raise NotImplementedError

    def decode(self, items: list, feats: list[dict], outputs: list, **params) -> list:
        raise NotImplementedError


def _need_text(value, field: str, index: int) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"input {index}: {field!r} should be a string, got {type(value).__name__}")
    if not value.strip():
        raise ConfigError(f"input {index}: {field!r} is empty")
    return value


def _need_dict(item, fields: Sequence[str], index: int, optional: Sequence[str] = ()) -> dict:
    if not isinstance(item, dict):
        raise ConfigError(f"input {index}: expected an object with {', '.join(fields)}, got {type(item).__name__}")
    unknown = sorted(set(item) - set(fields) - set(optional))
    if unknown:
        raise ConfigError(f"input {index}: unknown field {unknown[0]!r} (expected {', '.join(fields)})")
    missing = [f for f in fields if f not in item]
    if missing:
        raise ConfigError(f"input {index}: missing field {missing[0]!r}")
    return item


def _softmax(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


class TextClassification(Pipeline):
    task = "text-classification"
    request = ("PairItem", "NoParams")

    @classmethod
    def from_request(cls, item):
        return item["text"] if item.get("text_pair") is None else (item["text"], item["text_pair"])

    def check(self, item, index):
        if isinstance(item, dict):
            item = _need_dict(item, ("text",), index, optional=("text_pair",))
            pair = item.get("text_pair")
            text = _need_text(item["text"], "text", index), None if pair is None else _need_text(pair, "text_pair",
                                                                                                  index)
        elif isinstance(item, tuple):
            if len(item) != 2:
                raise ConfigError(f"input {index}: a pair is a (text, text_pair) tuple, got {len(item)} items")
            text = _need_text(item[0], "text", index), _need_text(item[1], "text_pair", index)
        else:
            text = _need_text(item, "text", index), None
        given = "pair" if text[1] is not None else "single"
        if self.record.input not in (None, given):  # None: an old directory that does not say
            raise ConfigError(f"input {index}: " + ("a text pair" if given == "pair" else "one text")
                              + f", but {self.what()}; send " + ("one text" if given == "pair" else "a pair"))
        return text

    def features(self, items):
        from litebert.data.examples import Example
        from litebert.data.tasks import encode_examples

        feats: list[Any] = [None] * len(items)
        for paired in (False, True):  # encode_examples takes all-single or all-pair lists
            idx = [i for i, (_, b) in enumerate(items) if (b is not None) == paired]
            examples = [Example(str(i), items[i][0], items[i][1]) for i in idx]
            for i, f in zip(idx, encode_examples(examples, self.tokenizer, self.record.max_seq_length, None)):
                feats[i] = f
        return feats

    def decode(self, items, feats, outputs):
        return [{**decode_sentence(self.record.head, o["logits"], self.labels),
                 "truncated_tokens": f.get("truncated_tokens", 0)} for f, o in zip(feats, outputs)]


def decode_sentence(head: str, logits, labels: Sequence[str] | None) -> dict:
    """One sentence's logits [num_labels] -> its answer, in the one schema every door uses:
    classification {"label", "label_id", "score", "scores": {label: p}}; multi-label {"labels", "label_ids",
    "scores"}; regression {"score"}. Labels are the model's names (config.json id2label)."""
    logits = np.asarray(logits, dtype=np.float64)
    if head == "regression":
        return {"score": float(logits[0])}
    if head == "multilabel":
        probs = 1 / (1 + np.exp(-logits))
        ids = [int(i) for i in np.flatnonzero(probs > 0.5)]
        return {"labels": [labels[i] for i in ids], "label_ids": ids, "scores": dict(zip(labels, probs.tolist()))}
    probs = _softmax(logits)
    best = int(probs.argmax())
    return {"label": labels[best], "label_id": best, "score": float(probs[best]),
            "scores": dict(zip(labels, probs.tolist()))}


class TokenClassification(Pipeline):
    """Entities (aggregate="entities", the default) or one tag per word (aggregate="words"), with character
    offsets into the input. A word's tag and score come from its first sub-token, as in training."""

    task = "token-classification"
    params = ("aggregate",)
    request = ("TextItem", "TokenParams")

    def check(self, item, index):
        text = _need_text(item, "text", index)
        return text, [(m.group(), m.start(), m.end()) for m in WORD_RE.finditer(text)]

    def features(self, items):
        from litebert.data.ner import TokenExample, encode_token_examples

        examples = [TokenExample(str(i), [w for w, _, _ in words], None) for i, (_, words) in enumerate(items)]
        return encode_token_examples(examples, self.tokenizer, self.record.max_seq_length, None)

    def decode(self, items, feats, outputs, aggregate: str = "entities"):
        if aggregate not in ("entities", "words"):
            raise ConfigError(f"aggregate={aggregate!r}: use 'entities' or 'words'")
        results = []
        for (text, words), feat, o in zip(items, feats, outputs):
            probs = _softmax(o["logits"][: len(feat["input_ids"])])  # [L, num_labels]
            tagged = []
            for pos, w in enumerate(feat["word_ids"]):
                if w >= 0:
                    best = int(probs[pos].argmax())
                    word, start, end = words[w]
                    tagged.append({"word": word, "start": start, "end": end, "tag": self.labels[best],
                                   "score": float(probs[pos, best])})
            # Words past max_seq_length have no position: they are left out, and counted.
            results.append(tagged if aggregate == "words" else
                           {"entities": entities(text, tagged), "truncated_words": len(words) - len(tagged)})
        return results


def entities(text: str, tagged: list[dict]) -> list[dict]:
    """Group word tags into entity spans with conlleval's chunk rules (IOB1, IOB2 and IOBES alike)."""
    from litebert.metrics import _split_tag, chunk_end, chunk_start

    spans: list[dict] = []
    prev, prev_type, current = "O", "", None
    for word in [*tagged, None]:
        tag, type_ = _split_tag(word["tag"]) if word else ("O", "")
        if current is not None and chunk_end(prev, tag, prev_type, type_):
            spans.append(current)
            current = None
        if word and chunk_start(prev, tag, prev_type, type_):
            current = {"entity": type_, "start": word["start"], "end": word["end"], "scores": []}
        if current is not None and word:
            current["end"] = word["end"]
            current["scores"].append(word["score"])
        prev, prev_type = tag, type_
    return [{"entity": s["entity"], "text": text[s["start"]:s["end"]], "start": s["start"], "end": s["end"],
             "score": float(np.mean(s["scores"]))} for s in spans]


class QuestionAnswering(Pipeline):
    task = "question-answering"
    params = ("null_threshold",)
    request = ("QAItem", "QAParams")
    warmup = {"question": "what?", "context": "warm up"}
    from_request = classmethod(lambda cls, item: item)

    def check(self, item, index):
        item = _need_dict(item, ("question", "context"), index)
        return _need_text(item["question"], "question", index), _need_text(item["context"], "context", index)

    def features(self, items):
        from litebert.data.squad import SquadExample, convert_examples_to_features

        r = self.record
        # is_impossible: no gold answer to look for (it only shapes training targets, which are unused here)
        self._examples = [SquadExample(str(i), q, c, [], [], True) for i, (q, c) in enumerate(items)]
        return convert_examples_to_features(self._examples, self.tokenizer, r.max_seq_length, r.doc_stride,
                                            r.max_query_length)

    def predict(self, items, null_threshold: float = 0.0):
        from litebert.data.squad import decode_answers

        feats = self.features(items)
        self.check_truncation(feats)
        outputs = self.run(feats)
        r = self.record
        answers = decode_answers(self._examples, feats, [o["start_logits"] for o in outputs],
                                 [o["end_logits"] for o in outputs], r.n_best, r.max_answer_length,
                                 null_threshold, r.version_2)
        cut = {f["example_index"]: f["truncated_tokens"] for f in feats}  # per question (its windows agree)
        return [{"answer": a.text, "start": a.start, "end": a.end, "score": a.score, "null_odds": a.null_odds,
                 "truncated_tokens": cut.get(i, 0)}
                for i, a in enumerate(answers[ex.qid] for ex in self._examples)]


class FillMask(Pipeline):
    """Per text, per [MASK] in it: the top_k tokens with their probabilities."""

    task = "fill-mask"
    params = ("top_k",)
    request = ("TextItem", "MaskParams")
    warmup = "warm [MASK]"

    def check(self, item, index):
        return _need_text(item, "text", index)

    def features(self, items):
        from litebert.inference import encode_with_masks

        feats = []
        for text in items:
            ids = encode_with_masks(self.tokenizer, text)
            if len(ids) > self.record.max_seq_length:
                raise ConfigError(f"fill-mask: {len(ids)} tokens, more than the model's {self.record.max_seq_length}")
            feats.append({"input_ids": ids, "attention_mask": [1] * len(ids), "token_type_ids": [0] * len(ids)})
        return feats

    def reduce(self, batch, outputs, **params):
        ids, logits = batch["input_ids"], outputs["logits"]  # [B, L], [B, L, V]
        return [logits[i][ids[i] == self.tokenizer.mask_id] for i in range(len(ids))]  # [P, V] each

    def decode(self, items, feats, outputs, top_k: int = 5):
        from litebert.inference import top_predictions

        vocab = self.tokenizer.vocab_size
        proposable = vocab - len(self.tokenizer.special_ids)
        if not 1 <= top_k <= proposable:
            raise ConfigError(f"--top-k {top_k}: must be in [1, {proposable}] (the vocabulary of {self.source} has "
                              f"{vocab} tokens, {len(self.tokenizer.special_ids)} of them special)")

        return [[[{"token": p.token, "token_id": p.token_id, "score": p.score} for p in row]
                 for row in top_predictions(o, self.tokenizer, top_k)] for o in outputs]


class Embeddings(Pipeline):
    """One vector per text: the mean of the last layer over real tokens ([CLS] and [SEP] included, padding not),
    or the last layer at [CLS]; normalize=True scales it to unit L2 length."""

    task = "embeddings"
    params = ("pooling", "normalize")
    request = ("TextItem", "EmbedParams")

    def check(self, item, index):
        return _need_text(item, "text", index)

    results_count_truncation = False  # a result is a vector: cuts are warned about (check_truncation)

    def features(self, items):
        from litebert.data.examples import Example
        from litebert.data.tasks import encode_examples

        examples = [Example(str(i), text, None) for i, text in enumerate(items)]
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

    def decode(self, items, feats, outputs, pooling: str = "mean", normalize: bool = False):
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

