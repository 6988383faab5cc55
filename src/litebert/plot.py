"""Training curves from a run dir's metrics.jsonl (needs the [plot] extra: matplotlib)."""

from __future__ import annotations

import json
from pathlib import Path

from litebert.errors import LitebertError

PANELS = [("loss", ["loss", "mlm_loss", "sop_loss"]), ("accuracy", ["mlm_acc", "sop_acc", "eval_mlm_acc",
                                                                    "eval_sop_acc", "eval_nsp_acc"]),
          ("learning rate", ["lr"]), ("throughput (tokens/s)", ["tokens_per_s"]),
          ("representation health", ["health_spread"])]


def read_metrics(run_dir: str | Path) -> list[dict]:
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        raise LitebertError(f"{path}: not found; is {run_dir} a run dir?")
    records = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise LitebertError(f"{path}:{n}: not valid JSON ({exc})") from None
    return records


def plot_run(run_dir: str | Path, out: str | Path | None = None) -> Path:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise LitebertError("plotting needs matplotlib: pip install 'litebert[plot]'") from None
    records = read_metrics(run_dir)
    fig, axes = plt.subplots(1, len(PANELS), figsize=(5 * len(PANELS), 3.6))
    for ax, (title, keys) in zip(axes, PANELS):
        for key in keys:
            points = [(r["step"], r[key]) for r in records if r.get(key) is not None]
            if points:
                ax.plot(*zip(*points), label=key, marker="o" if key.startswith("eval") else None, markersize=3)
        if "health_spread" in keys and ax.lines:  # below this line the model is called collapsed
            from litebert.health import COLLAPSE_SPREAD

            ax.axhline(COLLAPSE_SPREAD, color="red", linestyle="--", linewidth=1, label="collapsed below")
        ax.set_title(title)
        ax.set_xlabel("step")
        if ax.lines:
            ax.legend(fontsize=8)
    fig.suptitle(str(run_dir))
    fig.tight_layout()
    out = Path(out) if out else Path(run_dir) / "curves.png"
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
