"""`convert_checkpoint`: a foreign ALBERT checkpoint -> our model directory (HF layout, tokenizer included).

Sources:
- "tf" / "tfhub" / "albert_zh": TensorFlow checkpoints, read by `tf_map.load_tf_albert` (no TensorFlow);
- "hf": a Hugging Face ALBERT directory (config.json + model.safetensors, or sharded safetensors). Pickled
  `pytorch_model.bin` files are never loaded: unpickling can run arbitrary code.

Either way the weights end up in Hugging Face names, go through `hf_map.hf_to_ours` into the litebert class
that matches the heads present, and that model writes the directory with its own `save_pretrained`. So the
output is exactly what litebert itself saves (an E == H identity projection is dropped and written back as an
exact identity, tied decoder copies are stored once) and stock `transformers` loads it too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from litebert import heads
from litebert.config import AlbertConfig
from litebert.convert.hf_map import HF_REDUNDANT, choose_model_class, hf_to_ours, needs_projection, rows_for
from litebert.convert.tf_map import TF_SOURCES, ConversionReport, load_tf_albert
from litebert.errors import ConversionError
from litebert.files import check_output, read_json
from litebert.hub_cache import resolve_model_path
from litebert.memory import check_model_memory
from litebert.model import MODEL_CLASSES
from litebert.tokenizer import AlbertTokenizer, WordPieceTokenizer, load_tokenizer

SOURCES = (*TF_SOURCES, "hf")
CHOICE = heads.family("choice")  # the one head a TF checkpoint cannot tell apart by its shapes (run_race's [1, H])
HEADS = ("auto", CHOICE.pipeline_task)
REPORT_NAME = "conversion_report.txt"
SPM_NAMES = ("spiece.model", "30k-clean.model")  # official SentencePiece models, in order of preference


@dataclass
class HFDirReport(ConversionReport):
    """The same report for a Hugging Face directory: `mapped` rows are (HF name, litebert name, shape)."""

    def format_report(self) -> str:
        lines = super().format_report().split("\n")
        lines[0] = f"Hugging Face directory: {self.checkpoint}  (source hf, {self.layout})"
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------- entry point


def convert_checkpoint(
    src: str | Path,
    out: str | Path,
    source: str = "auto",
    allow_unused: bool = False,
    config: str | Path | dict | None = None,
    vocab: str | Path | None = None,
    head: str = "auto",
) -> ConversionReport:
    """Convert `src` into a litebert model directory `out` (config.json, model.safetensors, tokenizer files).

    source: "tf" | "tfhub" | "albert_zh" | "hf" | "auto" (a directory with config.json and no TF checkpoint is
        "hf"; otherwise the TF flavour is told from the tensor names).
    allow_unused: drop tensors that map to nothing (listed in report.unused) instead of raising.
    config: the official albert_config.json for a TF checkpoint (default: found beside it).
    vocab: a tokenizer file (`*.model` SentencePiece or `vocab.txt` WordPiece); default: the one beside `src`.
    head: "auto", or "multiple-choice" for a TF checkpoint whose one-row `output_weights` [1, H] is the official
        run_race head (one score per choice), which the names alone cannot tell from a one-label regressor.
    Returns the report; `report.format_report()` lists every tensor mapped, synthesized, skipped or unused.
    """
    src, out = resolve_model_path(src, ConversionError), Path(out)  # a Hub id reads the local Hub cache
    check_output(out)
    if source not in SOURCES:
        raise ConversionError(f"source {source!r} is not one of {', '.join(SOURCES)} (--from)")
    if head not in HEADS:
        raise ConversionError(f"head {head!r} is not one of {', '.join(HEADS)} (--head)")
    if source == "auto":
        source = "hf" if _looks_like_hf_dir(src) else "auto"
    if source == "hf":
        if config is not None or head != "auto":
            raise ConversionError(f"{src}: --config and --head are for TF checkpoints; a Hugging Face directory "
                                  "brings its own config.json and architecture")
        if out.resolve() == src.resolve():
            raise ConversionError(f"{out}: the output directory is the source directory; choose another --out")
        hf_config, hf_state, report = load_hf_albert(src, allow_unused=allow_unused)
        tokenizer_candidates = _hf_tokenizer_files(src)
    else:
        hf_config, hf_state, report = load_tf_albert(src, source, allow_unused, config=config)
        tokenizer_candidates = [Path(p) for p in report.tokenizer_files]
        if head == CHOICE.pipeline_task:
            _as_multiple_choice(hf_config, hf_state, report)

    tokenizer = pick_tokenizer(vocab, tokenizer_candidates, report)
    if tokenizer is not None:
        check_tokenizer(tokenizer, hf_config, report)
    model = build_model(hf_config, hf_state, report)
    model.save_pretrained(out, format="hf", tokenizer=tokenizer)
    report.notes.append(f"wrote {out}: {type(model).__name__} in Hugging Face layout"
                        + (f" + {type(tokenizer).__name__}" if tokenizer is not None else ""))
    (out / REPORT_NAME).write_text(report.format_report() + "\n", encoding="utf-8")
    return report


def _as_multiple_choice(hf_config: dict, hf_state: dict, report: ConversionReport) -> None:
    """The official run_race head: pooled [B*C, H] @ output_weights[1, H]^T + output_bias -> [B, C] scores."""
    weight = hf_state.get("classifier.weight")
    if weight is None or weight.shape[0] != 1:
        found = "no output_weights" if weight is None else f"output_weights {list(weight.shape)}"
        raise ConversionError(f"{report.checkpoint}: --head multiple-choice needs the official run_race head, "
                              f"output_weights [1, H]; the checkpoint has {found}")
    hf_config["architectures"] = [CHOICE.model_class]
    report.notes.append(f"output_weights [1, H] read as the official run_race head: {CHOICE.model_class}")


# ---------------------------------------------------------------------------------------------------- HF directories


def _looks_like_hf_dir(path: Path) -> bool:
    return (path.is_dir() and (path / "config.json").is_file() and not any(path.glob("*.index"))
            and not (path / "variables").is_dir())


def _read_safetensors(folder: Path) -> tuple[dict[str, torch.Tensor], str]:
    """All tensors of model.safetensors or of the shards its index names; never a pickle."""
    from litebert.pretrained import load_tensors  # here, not above: pretrained imports this package (hf_map)


    single, index = folder / "model.safetensors", folder / "model.safetensors.index.json"
    if single.is_file():
        return load_tensors(single), single.name
    if index.is_file():
        weight_map = read_json(index, ConversionError, expect=dict, what="a safetensors index").get("weight_map")
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise ConversionError(f"{index}: not a safetensors index (weight_map should map tensor names to shard "
                                  "file names)")
        shards = sorted(set(weight_map.values()))
        tensors: dict[str, torch.Tensor] = {}
        for shard in shards:
            tensors.update(load_tensors(folder / shard))
        return tensors, f"{len(shards)} safetensors shard(s)"
    pickles = sorted(p.name for p in (*folder.glob("pytorch_model*.bin"), *folder.glob("*.pt"), *folder.glob("*.pth")))
    if pickles:
        raise ConversionError(
            f"{folder}: only pickled weights ({', '.join(pickles)}); litebert never unpickles files (loading a pickle "
            "can run code). Convert it to safetensors with transformers first: "
            "AlbertForPreTraining.from_pretrained(DIR).save_pretrained(NEW_DIR, safe_serialization=True)")
    raise ConversionError(f"{folder}: no model.safetensors (or model.safetensors.index.json) in this directory")


def load_hf_albert(folder: str | Path, allow_unused: bool = False
                   ) -> tuple[dict[str, Any], dict[str, torch.Tensor], HFDirReport]:
    """(HF config dict, HF state dict, report) of a stock Hugging Face ALBERT directory."""
    folder = Path(folder)
    config_path = folder / "config.json"
    hf_config = read_json(config_path, ConversionError, f"not found; is {folder} a Hugging Face model directory?")
    if not isinstance(hf_config, dict) or hf_config.get("model_type") != "albert":
        kind = hf_config.get("format") or hf_config.get("model_type") if isinstance(hf_config, dict) else None
        hint = (" (it is already a litebert directory: load it with from_pretrained)" if kind == "litebert"
                else "; for a TF checkpoint use --from tf|tfhub|albert_zh")
        raise ConversionError(f"{config_path}: model_type is {kind!r}, not 'albert'{hint}")
    config = AlbertConfig.from_hf_dict(hf_config, source=str(config_path))
    check_model_memory(config, str(config_path))  # absurd sizes are refused before any tensor is read
    state, weights = _read_safetensors(folder)
    report = HFDirReport(checkpoint=str(folder), source="hf", layout=weights, config_file=str(config_path))
    state = _sort_hf_tensors(state, config, allow_unused, report)
    return hf_config, state, report


def _sort_hf_tensors(state: dict[str, torch.Tensor], config: AlbertConfig, allow_unused: bool,
                     report: HFDirReport) -> dict[str, torch.Tensor]:
    """List what each HF tensor becomes; tied copies and buffers are skipped, unknown names are unused."""
    prefix = "albert." if any(k.startswith("albert.") for k in state) else ""
    ours_of = {hf: row.ours for row in rows_for(config, prefix) for hf in row.hf}
    kept: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        if name in ours_of:
            kept[name] = tensor
            report.mapped.append((name, ours_of[name], tuple(tensor.shape)))
        elif name.endswith(HF_REDUNDANT):
            report.skipped.append((name, "tied copy or buffer (rebuilt by the model)"))
        else:
            report.unused.append((name, "no litebert parameter for this name and config"))
    if report.unused and not allow_unused:
        shown = "\n  ".join(f"{n} {list(state[n].shape)}" for n, _ in report.unused[:25])
        raise ConversionError(f"{report.checkpoint}: {len(report.unused)} tensor(s) map to no litebert "
                              f"parameter:\n  {shown}\npass allow_unused=True (--allow-unused) to drop them")
    return kept


def _hf_tokenizer_files(folder: Path) -> list[Path]:
    found = [folder / name for name in ("spiece.model", "vocab.txt") if (folder / name).is_file()]
    # transformers 5 saves tokenizer.json alone; load_tokenizer rebuilds the vocab file from it.
    return found or [folder / "tokenizer.json"] * (folder / "tokenizer.json").is_file()


# ---------------------------------------------------------------------------------------------------- the model


def build_model(hf_config: dict[str, Any], hf_state: dict[str, torch.Tensor], report: ConversionReport):
    """The litebert model holding these HF weights, loaded strictly; tensors its class lacks go in the notes."""
    hint = next(iter(hf_config.get("architectures") or []), None)
    name = choose_model_class(hf_state, hint)
    config = AlbertConfig.from_hf_dict(hf_config, source=report.config_file or "converted config")
    check_model_memory(config, report.config_file or "converted config")
    if "classifier.weight" in hf_state and name != CHOICE.model_class:  # [num_labels, H]; choices: [1, H]
        n = int(hf_state["classifier.weight"].shape[0])
        config = config if config.num_labels == n else config.replace(num_labels=n, label_names=None)
    if config.embedding_size == config.hidden_size:
        config = config.replace(embedding_projection=needs_projection(hf_state, config))
        if not config.embedding_projection:
            report.notes.append("embedding_hidden_mapping_in is the identity (E == H): litebert runs without a "
                                "projection and writes it back as an exact identity")
    ours, _ = hf_to_ours(hf_state, config, source=report.checkpoint)
    cls = MODEL_CLASSES[name]
    model = cls(config).eval()
    if not hasattr(model, "albert"):  # the bare encoder keeps its tensors without the `albert.` prefix
        ours = {k.removeprefix("albert."): v for k, v in ours.items()}
    expected = model.state_dict()
    dropped = sorted(k for k in ours if k not in expected)
    missing = sorted(k for k in expected if k not in ours)
    if missing:
        raise ConversionError(f"{report.checkpoint}: {name} needs tensor(s) the checkpoint lacks: {missing[:10]}")
    for k in expected:
        if tuple(ours[k].shape) != tuple(expected[k].shape):
            raise ConversionError(f"{report.checkpoint}: {k} has shape {list(ours[k].shape)}, {name} with this "
                                  f"config expects {list(expected[k].shape)}")
    model.load_state_dict({k: ours[k] for k in expected}, strict=True)
    dtypes = {t.dtype for t in hf_state.values() if t.is_floating_point()}
    if len(dtypes) == 1 and dtypes != {torch.float32}:
        model.to(dtypes.pop())  # keep the source precision on disk
    report.architecture = name
    if dropped:
        report.notes.append(f"dropped {', '.join(dropped)}: litebert's {name} has no such parameter (the Hugging "
                            "Face class has none either)")
    return model


# ---------------------------------------------------------------------------------------------------- tokenizer


def pick_tokenizer(vocab: str | Path | None, candidates: list[Path], report: ConversionReport):
    """--vocab, else the one SentencePiece model or WordPiece vocab found beside the checkpoint, else None.

    A Hugging Face directory's tokenizer is read with its own tokenizer_config.json (lower-casing, accents).
    """
    if vocab is not None:
        path = Path(vocab)
        if not path.is_file():
            raise ConversionError(f"{path}: --vocab file not found")
        report.tokenizer_files = [str(path)]
        return WordPieceTokenizer(path) if path.suffix == ".txt" else AlbertTokenizer(path)
    spm = [p for p in candidates if p.suffix == ".model"]
    wordpiece = [p for p in candidates if p.suffix == ".txt"]
    if report.source == "albert_zh" and wordpiece:
        spm = []  # albert_zh models use BERT's Chinese WordPiece vocab, even with a stray .model beside them
    pool = [p for p in spm if p.name in SPM_NAMES] or spm or wordpiece or [p for p in candidates
                                                                          if p.name == "tokenizer.json"]
    if not pool:
        report.notes.append("no tokenizer file beside the checkpoint, so none in the output "
                            "(pass --vocab spiece.model|vocab.txt)")
        return None
    if len(pool) > 1:
        raise ConversionError(f"several tokenizer files ({', '.join(map(str, pool))}); pick one with --vocab")
    report.tokenizer_files = [str(pool[0])]
    if report.source == "hf":
        return load_tokenizer(pool[0].parent)
    return WordPieceTokenizer(pool[0]) if pool[0].suffix == ".txt" else AlbertTokenizer(pool[0])


def check_tokenizer(tokenizer, hf_config: dict[str, Any], report: ConversionReport) -> None:
    """The tokenizer must fit the embedding table; the config takes its pad id (the embedding's padding_idx)."""
    V = int(hf_config["vocab_size"])
    if tokenizer.vocab_size > V:
        raise ConversionError(f"{tokenizer.vocab_file}: {tokenizer.vocab_size} tokens, but the model's embedding "
                              f"table has {V} rows, so ids past {V - 1} would crash; pass the model's own --vocab")
    if tokenizer.vocab_size < V:
        report.notes.append(f"the tokenizer has {tokenizer.vocab_size} tokens, the embedding table {V} rows (the "
                            "extra rows are never produced)")
    if tokenizer.pad_id != hf_config.get("pad_token_id", 0):
        report.notes.append(f"pad_token_id {hf_config.get('pad_token_id', 0)} -> {tokenizer.pad_id}, the "
                            "tokenizer's pad")
        hf_config["pad_token_id"] = tokenizer.pad_id
    report.notes.append(f"tokenizer: {type(tokenizer).__name__} from {tokenizer.vocab_file}")
