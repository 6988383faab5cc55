"""Training curves from a run dir's metrics.jsonl (needs the [plot] extra: matplotlib).

A pretraining run: training and held-out MLM loss side by side, accuracies, learning rate, throughput.
A fine-tuning run (a record with "split"): training loss, the dev scores, learning rate. Legends sit below
their panel, never over a curve.
"""

from __future__ import annotations

from pathlib import Path

from litebert.errors import LitebertError
from litebert.files import parse_json
from litebert.rundir import resolve_run_dir

PRETRAIN_PANELS = [
    ("loss", ["loss", "mlm_loss", "sop_loss", "eval_mlm_loss"]),
    ("accuracy", ["mlm_acc", "sop_acc", "eval_mlm_acc", "eval_sop_acc", "eval_nsp_acc"]),
    # litebert.mlm_scores: the fill-in figure at [MASK] positions beside the guesses that need no model
    ("held-out MLM at [MASK] positions", ["eval_mlm_acc_mask", "eval_base_mask_commonest", "eval_base_mask_bigram",
                                          "eval_mlm_acc", "eval_base_copy_commonest"]),
    ("learning rate", ["lr"]),
    ("throughput (tokens/s)", ["tokens_per_s"]),
    ("representation health", ["health_spread"]),
]
LABELS = {"eval_mlm_loss": "held-out mlm_loss", "eval_mlm_acc": "held-out mlm_acc",
          "eval_sop_acc": "held-out sop_acc", "eval_nsp_acc": "held-out nsp_acc",
          "eval_mlm_acc_mask": "model at [MASK]", "eval_base_mask_commonest": "commonest piece at [MASK]",
          "eval_base_mask_bigram": "bigram table at [MASK]", "eval_base_copy_commonest": "copy-else-commonest (all)"}
NOT_SCORES = {"step", "split", "examples", "truncated_words", "single_class_prediction"}


def read_metrics(run_dir: str | Path) -> list[dict]:
    path = resolve_run_dir(run_dir) / "metrics.jsonl"
    if not path.is_file():
        raise LitebertError(f"{path}: not found; is {run_dir} a run dir?")
    records = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            records.append(parse_json(line, path, LitebertError, line=n))
    return records


def panels_for(records: list[dict]) -> list[tuple[str, list[tuple[str, list]]]]:
    """[(title, [(label, [(step, value), ...]), ...]), ...] for the kind of run the records come from."""
    def series(key, rows, label=None):
        points = [(r["step"], r[key]) for r in rows if isinstance(r.get(key), (int, float)) and r.get(key) is not None]
        return (label or LABELS.get(key, key), points)

    evals = [r for r in records if "split" in r]
    if evals:  # fine-tuning: train records carry "loss", dev records carry "split" and the scores
        train = [r for r in records if "split" not in r]
        scores = sorted({k for r in evals for k, v in r.items() if k not in NOT_SCORES and isinstance(v, float)})
        return [("training loss", [series("loss", train)]),
                (f"{evals[0]['split']} scores", [series(k, evals, f"{evals[0]['split']} {k}") for k in scores]),
                ("learning rate", [series("lr", train)])]
    return [(title, [series(k, records) for k in keys]) for title, keys in PRETRAIN_PANELS]


def build_figure(records: list[dict], title: str):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = panels_for(records)
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 4.2), squeeze=False)
    for ax, (name, lines) in zip(axes[0], panels):
        for label, points in lines:
            if points:
                sparse = len(points) <= 20  # evaluations: a handful of points, shown as markers
                ax.plot(*zip(*points), label=label, marker="o" if sparse else None, markersize=3)
        if name == "representation health" and ax.lines:  # below this line the model is called collapsed
            from litebert.health import COLLAPSE_SPREAD

            ax.axhline(COLLAPSE_SPREAD, color="red", linestyle="--", linewidth=1, label="collapsed below")
        ax.set_title(name)
        ax.set_xlabel("step")
        if ax.lines:  # below the panel, outside the plotting area: it cannot hide a curve
            ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_run(run_dir: str | Path, out: str | Path | None = None) -> Path:
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise LitebertError("plotting needs matplotlib: pip install 'litebert[plot]'") from None
    fig = build_figure(read_metrics(run_dir), str(run_dir))
    out = Path(out) if out else Path(run_dir) / "curves.png"
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return out
