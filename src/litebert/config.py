"""`AlbertConfig`: the one typed description of an ALBERT model, its named presets, and its JSON forms.

Three JSON dialects are read and written:
- ours (`to_json`/`from_json`): every field below, verbatim;
- the official `albert_config.json` of google-research/albert (`from_official_json`/`to_official_dict`);
- Hugging Face `config.json` with `model_type: "albert"` (`from_hf_dict`/`to_hf_dict`).

Naming of activations follows Hugging Face: "gelu_new" is the tanh approximation (what the official TF code
calls "gelu"), "gelu" is the exact erf form.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Callable

from litebert.errors import ConfigError
from litebert.files import read_json

ACTIVATIONS = ("gelu_new", "gelu", "relu", "tanh", "linear")
SHARING_MODES = ("all", "attention", "ffn", "none")
LAYER_NORM_POSITIONS = ("post", "pre")
PROBLEM_TYPES = ("single_label_classification", "regression", "multi_label_classification")
# Keys older config files carry that no longer describe the model; reading such a file ignores them. Activation
# checkpointing is a training option now (--gradient-checkpointing; model.set_gradient_checkpointing): it never
# changed the weights or the outputs, only memory and speed.
RETIRED_FIELDS = ("gradient_checkpointing",)
# Fields added after run records and cache keys were first written, with the value every earlier model had: a
# record without one ran at that value (pretrain's run.json check), and a key leaves one out at that value, so the
# names of earlier runs (`litebert ablate`'s digests) still match (`stable_dict`).
ADDED_FIELDS = {"layer_norm_position": "post", "distance_bias": None}
# What a litebert-format model directory's config.json holds beside the config fields (pretrained.model_files).
LITEBERT_DIR_KEYS = ("format", "architecture")


@dataclass
class AlbertConfig:
    vocab_size: int = 30000
    embedding_size: int = 128  # E: width of the token/position/type embeddings
    hidden_size: int = 768  # H: width of the transformer
    num_hidden_layers: int = 12  # L: how many times a layer is applied
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu_new"
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    # Cross-layer sharing. "all": G groups of K blocks, layer i runs group int(i*G/L) (the official schedule).
    # "attention"/"ffn": only that sub-layer follows the group schedule; the other has one copy per layer.
    # "none": every layer has its own parameters (BERT).
    sharing: str = "all"
    num_hidden_groups: int = 1  # G
    inner_group_num: int = 1  # K
    # The official code creates the E->H projection only when E != H; Hugging Face always has one. None = E != H.
    embedding_projection: bool | None = None
    classifier_dropout_prob: float = 0.1
    num_labels: int = 2
    problem_type: str | None = None
    label_names: list[str] | None = None
    qa_answerability: bool = False  # SQuAD v2.0: add a has-answer head on [CLS]
    pad_token_id: int = 0
    # Where each sub-layer's LayerNorm sits. "post" (ALBERT's, BERT's and the only form the official code, Hugging
    # Face's AlbertModel and TF checkpoints know): norm(x + f(x)). "pre" (not ALBERT's default; a lever for short
    # pretraining budgets): x + f(norm(x)), with one final LayerNorm after the last layer. A "pre" model has no
    # Hugging Face or official TF form, so it is saved in litebert's format (`hf_blocker`).
    layer_norm_position: str = "post"
    # One slope per attention head, or None (ALBERT's attention, the default). Head h's score for query i and key j
    # gets -slope_h x |i - j| added: ALiBi's bias (Press et al., 2022), symmetric for an encoder, on top of the
    # learned absolute positions; the [CLS] query (which the pooler reads) is exempt and sees the whole sequence.
    # Not ALBERT's (no Hugging Face or TF form): a lever for small budgets, where a model must find its neighbours
    # through position embeddings it learns from scratch, and at a few million tokens has not (docs/recipes.md,
    # "Session 19"). `distance_bias_slopes` gives the geometric set the demo uses.
    distance_bias: list[float] | None = None

    def __post_init__(self) -> None:
        self.validate()

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        ints = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                "intermediate_size", "max_position_embeddings", "type_vocab_size", "num_hidden_groups",
                "inner_group_num", "num_labels")
        for name in ints:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"config field '{name}' must be a positive integer, got {value!r}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout_prob"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise ConfigError(f"config field '{name}' must be in [0, 1), got {value!r}")
        for name in ("initializer_range", "layer_norm_eps"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not value > 0 or not math.isfinite(value):
                raise ConfigError(f"config field '{name}' must be a positive number, got {value!r}")
        if self.hidden_act not in ACTIVATIONS:
            raise ConfigError(f"config field 'hidden_act' is {self.hidden_act!r}; expected one of {ACTIVATIONS}")
        if self.layer_norm_position not in LAYER_NORM_POSITIONS:
            raise ConfigError(f"config field 'layer_norm_position' is {self.layer_norm_position!r}; expected one of "
                              f"{LAYER_NORM_POSITIONS}")
        if self.distance_bias is not None:
            slopes = self.distance_bias
            if not (isinstance(slopes, (list, tuple)) and all(
                    isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0
                    for x in slopes)):
                raise ConfigError(f"config field 'distance_bias' must be a list of slopes >= 0 (one per attention "
                                  f"head) or null, got {slopes!r}")
            if len(slopes) != self.num_attention_heads:
                raise ConfigError(f"config field 'distance_bias' has {len(slopes)} slopes for num_attention_heads "
                                  f"{self.num_attention_heads}: one per head")
        if self.sharing not in SHARING_MODES:
            raise ConfigError(f"config field 'sharing' is {self.sharing!r}; expected one of {SHARING_MODES}")
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                f"config: hidden_size {self.hidden_size} is not divisible by num_attention_heads "
                f"{self.num_attention_heads}")
        if self.num_hidden_groups > self.num_hidden_layers:
            raise ConfigError(
                f"config: num_hidden_groups {self.num_hidden_groups} > num_hidden_layers {self.num_hidden_layers}")
        if self.sharing == "none" and self.num_hidden_groups not in (1, self.num_hidden_layers):
            raise ConfigError("config: sharing 'none' gives every layer its own parameters, so num_hidden_groups "
                              f"must be 1 or num_hidden_layers ({self.num_hidden_layers}), got {self.num_hidden_groups}")
        if self.embedding_projection is False and self.embedding_size != self.hidden_size:
            raise ConfigError(f"config: embedding_projection is false but embedding_size {self.embedding_size} != "
                              f"hidden_size {self.hidden_size}")
        if self.problem_type is not None and self.problem_type not in PROBLEM_TYPES:
            raise ConfigError(f"config field 'problem_type' is {self.problem_type!r}; expected one of {PROBLEM_TYPES}")
        if self.label_names is not None and not (isinstance(self.label_names, (list, tuple))
                                                 and all(isinstance(n, str) for n in self.label_names)):
            raise ConfigError(f"config field 'label_names' must be a list of strings, got {self.label_names!r}")
        if self.label_names is not None and len(self.label_names) != self.num_labels:
            raise ConfigError(f"config: {len(self.label_names)} label_names for num_labels {self.num_labels}")
        if self.pad_token_id < 0 or self.pad_token_id >= self.vocab_size:
            raise ConfigError(f"config field 'pad_token_id' {self.pad_token_id} is outside the vocab")

    # ------------------------------------------------------------------ derived facts
    @property
    def has_projection(self) -> bool:
        if self.embedding_projection is None:
            return self.embedding_size != self.hidden_size
        return self.embedding_projection

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def hf_blocker(self) -> str | None:
        """Why Hugging Face's AlbertModel (and the official TF code) cannot express this config, naming the field;
        None when it can. HF shares whole blocks only ('none' is G == L) and puts LayerNorm after each sub-layer."""
        if self.sharing not in ("all", "none"):
            return (f"sharing {self.sharing!r} (Hugging Face's AlbertModel only shares whole blocks)")
        if self.layer_norm_position != "post":
            return (f"layer_norm_position {self.layer_norm_position!r} (Hugging Face's AlbertModel and the official "
                    "TF code are post-LayerNorm only)")
        if self.distance_bias is not None:
            return ("distance_bias (Hugging Face's AlbertModel and the official TF code have no bias on the attention "
                    "scores)")
        return None

    @property
    def hf_compatible(self) -> bool:
        return self.hf_blocker is None

    def replace(self, **changes: Any) -> AlbertConfig:
        return dataclasses.replace(self, **changes)

    # ------------------------------------------------------------------ presets
    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> AlbertConfig:
        if name not in PRESETS:
            raise ConfigError(f"unknown preset {name!r}; known presets: {', '.join(sorted(PRESETS))}")
        return cls(**{**PRESETS[name], **overrides})

    @classmethod
    def load(cls, spec: str | Path) -> AlbertConfig:
        """A preset name, a config JSON file (any dialect) or a model directory (its config.json)."""
        if str(spec) in PRESETS:
            return cls.from_preset(str(spec))
        path = Path(spec)
        if path.is_dir():
            path = path / "config.json"
        if path.is_file():
            return cls.from_json(path)
        raise ConfigError(f"{str(spec)!r} is neither a preset ({', '.join(sorted(PRESETS))}) nor a config file")

    # ------------------------------------------------------------------ our JSON
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def stable_dict(self) -> dict[str, Any]:
        """to_dict without the ADDED_FIELDS at their earlier value: a key that names a model the same way it did
        before those fields existed."""
        return {k: v for k, v in self.to_dict().items() if ADDED_FIELDS.get(k, object()) != v}

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "config") -> AlbertConfig:
        data = {k: v for k, v in data.items() if k not in RETIRED_FIELDS}
        return dataclass_from_dict(cls, data, source, what="config field")

    def to_json(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps({"format": "litebert", **self.to_dict()}, indent=2) + "\n")

    @classmethod
    def from_json(cls, path: str | Path) -> AlbertConfig:
        """Reads any of the three dialects, recognising each by its keys."""
        data = _read_json(path)
        if data.get("model_type") == "albert":
            return cls.from_hf_dict(data, source=str(path))
        if data.get("format") == "litebert":  # our own file, or a litebert model directory's config.json
            data = {k: v for k, v in data.items() if k not in LITEBERT_DIR_KEYS}
            return cls.from_dict(data, source=str(path))
        if "vocab_size" in data and "hidden_size" in data and not {"sharing", *ADDED_FIELDS} & set(data):
            return cls.from_official_dict(data, source=str(path))
        return cls.from_dict(data, source=str(path))

    # ------------------------------------------------------------------ official albert_config.json
    @classmethod
    def from_official_dict(cls, data: dict[str, Any], source: str = "albert_config.json") -> AlbertConfig:
        act = data.get("hidden_act", "gelu")
        if not isinstance(act, str):
            raise ConfigError(f"{source}: config field 'hidden_act' must be a string, got {act!r}")
        act = {"gelu": "gelu_new"}.get(act, act)  # official "gelu" is the tanh approximation
        fields = {name: data[name] for name in _OFFICIAL_FIELDS if name in data}
        missing = [name for name in ("vocab_size", "hidden_size") if name not in data]
        if missing:
            raise ConfigError(f"{source}: missing field(s) {missing}")
        return cls.from_dict({**fields, "hidden_act": act}, source=source)

    @classmethod
    def from_official_json(cls, path: str | Path) -> AlbertConfig:
        return cls.from_official_dict(_read_json(path), source=str(path))

    def to_official_dict(self) -> dict[str, Any]:
        if self.hf_blocker:
            raise ConfigError(f"config field {self.hf_blocker} has no official albert_config.json form")
        if self.hidden_act == "gelu":
            raise ConfigError("the official code has no exact-erf gelu; its 'gelu' is our 'gelu_new'")
        data = {name: getattr(self, name) for name in _OFFICIAL_FIELDS}
        data["hidden_act"] = {"gelu_new": "gelu"}.get(self.hidden_act, self.hidden_act)
        if self.sharing == "none":
            data["num_hidden_groups"] = self.num_hidden_layers
        return data

    # ------------------------------------------------------------------ Hugging Face config.json
    @classmethod
    def from_hf_dict(cls, data: dict[str, Any], source: str = "config.json") -> AlbertConfig:
        if data.get("layer_norm_position", "post") != "post":  # HF would ignore it and run post-LN: refuse
            raise ConfigError(f"{source}: config field 'layer_norm_position' is {data['layer_norm_position']!r}, "
                              "but a Hugging Face ALBERT config.json (model_type 'albert') is post-LayerNorm only; "
                              "a pre-LN model is saved in litebert's format")
        if data.get("distance_bias") is not None:  # HF would ignore it and drop the bias: refuse
            raise ConfigError(f"{source}: config field 'distance_bias' is set, but a Hugging Face ALBERT config.json "
                              "(model_type 'albert') has no attention bias; such a model is saved in litebert's "
                              "format")
        fields = {name: data[name] for name in _OFFICIAL_FIELDS + _HF_EXTRA_FIELDS if name in data}
        if "id2label" in data and isinstance(data["id2label"], dict):
            try:
                keys = sorted(data["id2label"], key=int)
            except ValueError:
                raise ConfigError(f"{source}: config field 'id2label' must map label ids (integers) to names, "
                                  f"got keys {sorted(data['id2label'])[:5]}") from None
            labels = [data["id2label"][k] for k in keys]
            fields["num_labels"] = len(labels)
            if labels != [f"LABEL_{i}" for i in range(len(labels))]:
                fields["label_names"] = labels
        elif "num_labels" in data:
            fields["num_labels"] = data["num_labels"]
        if fields.get("classifier_dropout_prob") is None:
            fields.pop("classifier_dropout_prob", None)
        fields.update({k: data[k] for k in _LITEBERT_HF_EXTRAS if k in data})
        return cls.from_dict(fields, source=source)

    def to_hf_dict(self, architecture: str | None = None) -> dict[str, Any]:
        if self.hf_blocker:
            raise ConfigError(f"config field {self.hf_blocker} cannot be expressed in Hugging Face's AlbertConfig; "
                              "save with format='litebert'")
        data: dict[str, Any] = {"model_type": "albert"}
        if architecture:
            data["architectures"] = [architecture]
        data.update({name: getattr(self, name) for name in _OFFICIAL_FIELDS + _HF_EXTRA_FIELDS})
        if self.sharing == "none":
            data["num_hidden_groups"] = self.num_hidden_layers
        labels = self.label_names or [f"LABEL_{i}" for i in range(self.num_labels)]
        data["id2label"] = {str(i): name for i, name in enumerate(labels)}
        data["label2id"] = {name: i for i, name in enumerate(labels)}
        data.update({"bos_token_id": 2, "eos_token_id": 3, "position_embedding_type": "absolute"})
        # Fields HF ignores but we need to round-trip a fine-tuned model.
        data.update({k: getattr(self, k) for k in _LITEBERT_HF_EXTRAS})
        return data


_OFFICIAL_FIELDS = ["vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_hidden_groups",
                    "num_attention_heads", "intermediate_size", "inner_group_num", "hidden_act",
                    "hidden_dropout_prob", "attention_probs_dropout_prob", "max_position_embeddings",
                    "type_vocab_size", "initializer_range"]
_HF_EXTRA_FIELDS = ["layer_norm_eps", "classifier_dropout_prob", "pad_token_id", "problem_type"]
_LITEBERT_HF_EXTRAS = ["qa_answerability"]


# ------------------------------------------------------------------ options dataclasses (FinetuneConfig, ...)
# A rule is (test, what the value must be): the one check of an option, applied to the dataclass field whatever
# the door (library call, command line, --config file), so all three refuse a value with the same message.
Rule = tuple[Callable[[float], bool], str]


def at_least(n: int) -> Rule:
    return (lambda v: v >= n), f"must be >= {n}"


def open_closed(lo: float, hi: float) -> Rule:
    return (lambda v: lo < v <= hi), f"must be in ({lo:g}, {hi:g}]"


def closed_open(lo: float, hi: float) -> Rule:
    return (lambda v: lo <= v < hi), f"must be in [{lo:g}, {hi:g})"


def open_open(lo: float, hi: float) -> Rule:
    return (lambda v: lo < v < hi), f"must be in ({lo:g}, {hi:g})"


def closed(lo: float, hi: float) -> Rule:
    return (lambda v: lo <= v <= hi), f"must be in [{lo:g}, {hi:g}]"


POSITIVE = at_least(1)
NON_NEGATIVE = at_least(0)
FRACTION = closed_open(0.0, 1.0)
ABOVE_ZERO: Rule = ((lambda v: v > 0), "must be > 0")
# a step size above 1 is never meaningful for LAMB or AdamW (1e300 overflows at once)
LEARNING_RATE = open_closed(0.0, 1.0)


def option(default: Any = dataclasses.MISSING, help: str = "", choices: tuple[str, ...] | None = None,
           check: Rule | None = None) -> Any:
    """A field of an options dataclass (fine-tuning, pretraining, serving) that carries its own help text,
    allowed values (`choices`) and rule (`check`). The command line builds one --flag per field from these
    (cli/_common.add_dataclass_args), and `check_options` enforces them on every instance, so what an option means
    and accepts is written once, beside the field, for library and CLI users alike."""
    metadata: dict[str, Any] = {"help": help}
    if choices is not None:
        metadata["choices"] = choices
    if check is not None:
        metadata["check"] = check
    return dataclasses.field(default=default, metadata=metadata)


def flag_of(name: str) -> str:
    """The command-line flag of an options field (its default spelling)."""
    return "--" + name.replace("_", "-")


_TYPE_NAMES = {bool: "true or false (a boolean)", int: "an integer", float: "a number", str: "a string"}


@functools.cache
def field_types(cls) -> dict[str, tuple[tuple[type, ...], bool]]:
    """{field: (the types it takes, whether None is allowed)} of an options dataclass, from its annotations."""
    import typing

    hints = typing.get_type_hints(cls)
    out = {}
    for f in dataclasses.fields(cls):
        args = typing.get_args(hints[f.name]) or (hints[f.name],)
        out[f.name] = (tuple(t for t in args if t is not type(None)), type(None) in args)
    return out


def check_value(value: Any, kinds: tuple[type, ...], nullable: bool, shown: str,
                choices: tuple | None = None, rule: Rule | None = None) -> Any:
    """`value` for an option of type `kinds` (None allowed when `nullable`), one of `choices`, passing `rule`; or a
    ConfigError "SHOWN VALUE: why". A whole number given for a float option comes back as a float."""
    if value is None:
        if nullable:
            return None
        raise ConfigError(f"{shown} null: expected {_TYPE_NAMES.get(kinds[0], kinds[0].__name__)}, not null")
    if not any(_is_a(value, kind) for kind in kinds):
        expected = " or ".join(_TYPE_NAMES.get(k, k.__name__) for k in kinds)
        raise ConfigError(f"{shown} {value!r}: expected {expected}, got {_describe(value)}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if float in kinds and int not in kinds:
            value = float(value)
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{shown} {value}: must be a finite number")
    if choices is not None and value not in choices:
        words = [str(c) for c in choices]
        listed = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]
        raise ConfigError(f"{shown} {value}: must be {listed}")
    if rule is not None and not isinstance(value, (bool, str)) and not rule[0](value):
        raise ConfigError(f"{shown} {value}: {rule[1]}")
    return value


def check_field(field: dataclasses.Field, types: tuple[tuple[type, ...], bool], value: Any,
                shown: str | None = None) -> Any:
    """check_value for an options-dataclass field (its type, choices and rule); `shown` names it (default: its
    flag)."""
    return check_value(value, types[0], types[1], shown or flag_of(field.name), field.metadata.get("choices"),
                       field.metadata.get("check"))


def _is_a(value: Any, kind: type) -> bool:
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def _describe(value: Any) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
             dict: "a mapping"}
    return names.get(type(value), type(value).__name__)


def check_options(obj: Any) -> None:
    """Check every field of options dataclass instance `obj` against its type, choices and rule (see `option`);
    called by each options class's __post_init__. Raises ConfigError "--flag VALUE: why"."""
    types = field_types(type(obj))
    for f in dataclasses.fields(obj):
        object.__setattr__(obj, f.name, check_field(f, types[f.name], getattr(obj, f.name)))


def dataclass_from_dict(cls, data: dict[str, Any], source: str, error: type = ConfigError, what: str = "field"):
    """cls(**data), where an unknown key or a bad value is an `error` naming `source` (a file, usually)."""
    unknown = sorted(set(data) - {f.name for f in dataclasses.fields(cls)})
    if unknown:
        raise error(f"{source}: unknown {what}(s) {unknown}")
    try:
        return cls(**data)
    except (ConfigError, TypeError) as exc:
        raise error(f"{source}: {exc}") from None


def _read_json(path: str | Path) -> dict[str, Any]:
    return read_json(path, ConfigError, "config file not found", expect=dict, what="a JSON object at the top level")


def _albert(hidden: int, layers: int, heads: int, v2: bool, **extra: Any) -> dict[str, Any]:
    dropout = 0.0 if v2 else 0.1
    return dict(vocab_size=30000, embedding_size=128, hidden_size=hidden, num_hidden_layers=layers,
                num_attention_heads=heads, intermediate_size=4 * hidden, hidden_act="gelu_new",
                hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout, **extra)


def _bert(hidden: int, layers: int, heads: int) -> dict[str, Any]:
    return dict(vocab_size=30000, embedding_size=hidden, hidden_size=hidden, num_hidden_layers=layers,
                num_attention_heads=heads, intermediate_size=4 * hidden, hidden_act="gelu",
                hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, sharing="none")


def distance_bias_slopes(heads: int, steepest: float = 2.0, ratio: float = 0.25) -> list[float]:
    """`distance_bias` slopes from `steepest` down by `ratio` per head: 2, 0.5, 0.125, ... The first head starts
    out reading its nearest neighbours (a token two away weighs e^-2 of one next door), the last is close to
    ALBERT's own. For 2 heads on the demo store, 1.2M tokens: (2, 0.5) 13.7% at [MASK], (1, 0.25) 12.6%, against
    7.7% without the bias and a bigram table's 12.3% (docs/recipes.md, "Session 19")."""
    return [steepest * ratio**h for h in range(heads)]


# The released configs (google-research/albert, TF-Hub assets). v1 xxlarge already had dropout 0.
PRESETS: dict[str, dict[str, Any]] = {
    "albert-base-v1": _albert(768, 12, 12, v2=False),
    "albert-base-v2": _albert(768, 12, 12, v2=True),
    "albert-large-v1": _albert(1024, 24, 16, v2=False),
    "albert-large-v2": _albert(1024, 24, 16, v2=True),
    "albert-xlarge-v1": _albert(2048, 24, 16, v2=False),
    "albert-xlarge-v2": _albert(2048, 24, 16, v2=True),
    "albert-xxlarge-v1": _albert(4096, 12, 64, v2=True),
    "albert-xxlarge-v2": _albert(4096, 12, 64, v2=True),
    "bert-base": _bert(768, 12, 12),
    "bert-large": _bert(1024, 24, 16),
    # Small enough to pretrain in a few minutes on a laptop CPU: the demo's model, and the tests'.
    "albert-tiny": dict(vocab_size=30000, embedding_size=64, hidden_size=128, num_hidden_layers=4,
                        num_attention_heads=2, intermediate_size=512, hidden_act="gelu_new"),
}
PRESETS["albert-base"] = PRESETS["albert-base-v2"]
PRESETS["albert-large"] = PRESETS["albert-large-v2"]
PRESETS["albert-xlarge"] = PRESETS["albert-xlarge-v2"]
PRESETS["albert-xxlarge"] = PRESETS["albert-xxlarge-v2"]
