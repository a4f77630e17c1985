"""Training curves of the benchmark cells: validation loss against optimiser step.

:func:`plot_training_curves` draws, for one dataset, one panel per model: the final-model validation loss
(the trainer's ``metrics.jsonl``, recorded in each cell's ``sweep`` and ``run`` entries by
:mod:`dandelion.benchmarks.grid.benchmark`) of every learning rate of the sweep (thin lines) and of every
seed at the chosen rate (thick), on a log axis, with the start of the autoregressive fine-tune marked.
It shows whether the budget lets the validation loss flatten.
"""

from __future__ import annotations

import math
from pathlib import Path

from dandelion.reporting.plotting import plain_log_ticks, pyplot, save_figure

__all__ = ["plot_training_curves"]


def _xy(curve: list[dict]) -> tuple[list, list]:
    pts = [(r["step"], r["val_loss"]) for r in curve if r.get("val_loss") is not None and math.isfinite(r["val_loss"])]
    return [p[0] for p in pts], [p[1] for p in pts]


def plot_training_curves(models: dict, path, title: str) -> Path | None:
    """Validation loss against step, one panel per model of ``models`` (model -> aggregated entry of
    :func:`dandelion.benchmarks.leaderboard.render.aggregate`, whose ``cells`` carry the curves).

    Returns the PNG path, or None when no cell recorded a curve (cells made before curves were kept).
    """
    have = {
        m: e
        for m, e in models.items()
        if any(r.get("curve") for c in e["cells"] for r in [*c.get("sweep", []), c.get("run") or {}])
    }
    if not have:
        return None
    plt = pyplot()
    n = len(have)
    fig, axes = plt.subplots(1, n, figsize=(3.2 * n, 3.0), squeeze=False, sharey=True)
    for ax, (m, e) in zip(axes[0], have.items()):
        shown = set()
        finetune_step = None
        for c in e["cells"]:
            for r in c.get("sweep", []):
                if r["lr"] in shown or not r.get("curve"):
                    continue
                shown.add(r["lr"])
                x, y = _xy(r["curve"])
                ax.semilogy(
                    x,
                    y,
                    lw=0.8,
                    alpha=0.6,
                    label=f"lr {r['lr']:g} (seed {(c.get('lr_selection') or {}).get('sweep_seed', c['seed']):d})",
                )
            run = c.get("run") or {}
            if run.get("curve"):
                x, y = _xy(run["curve"])
                ax.semilogy(
                    x,
                    y,
                    lw=2.0,
                    color="k",
                    alpha=0.35 + 0.2 * (c["seed"] % 3),
                    label=f"seed {c['seed']} at lr {run['lr']:g}",
                )
                pre = [r["step"] for r in run["curve"] if r.get("phase") == "pretrain"]
                if pre and len(pre) < len(run["curve"]):
                    finetune_step = max(pre)
        if finetune_step is not None:
            ax.axvline(finetune_step, color="0.5", ls=":", lw=0.8)
        plain_log_ticks(ax)
        ax.set_title(m, fontsize=9)
        ax.set_xlabel("optimiser step")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=6)
    tops = [
        max(_xy(c["run"]["curve"])[1] or [math.nan])
        for e in have.values()
        for c in e["cells"]
        if (c.get("run") or {}).get("curve")
    ]
    tops = [t for t in tops if math.isfinite(t)]
    if (
        tops
    ):  # a diverging sweep rate would stretch the shared axis over orders of magnitude: keep the chosen runs readable
        axes[0][0].set_ylim(top=10 * max(tops))
    axes[0][0].set_ylabel("valid loss (final model)")
    fig.suptitle(f"{title}: validation loss during training (dotted: fine-tune starts)", fontsize=9)
    fig.subplots_adjust(left=0.07, right=0.99, bottom=0.16, top=0.84, wspace=0.08)
    return save_figure(fig, path)
