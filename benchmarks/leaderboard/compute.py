"""Equal compute in the leaderboard: the step budget every cell shares, each run's training cost, and which model
is best for the cost of the cheapest model's run.

Each cell records the process CPU-seconds of its selected training run (``train_cpu_seconds``,
:mod:`dandelion.benchmarks.grid.records`). :func:`plot_score_vs_cost` draws, per dataset key, the test VRMSE
(next step and 1:20) against that cost, one point per model and seed. :func:`best_at_cheapest` answers the
question of a user with a fixed budget: take the cheapest model (lowest mean cost per run), and for every model the
validation loss its runs had reached when they had spent that much CPU time (read off the kept validation curve,
each step's cost taken as the run's mean cost per step-window, so a fine-tune step of ``n_out`` windows costs
``n_out`` pretraining steps). A model that reaches that cost mid-schedule is not annealed yet, so its value is an
upper bound of what a run planned for that budget would reach; the cheapest model's is its final loss.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from dandelion.benchmarks.grid.records import cell_cpu_seconds, cell_sweep_cpu_seconds, cell_valid_over_train
from dandelion.reporting.plotting import pyplot, save_figure

__all__ = [
    "GAP_FLAG",
    "trainer_steps",
    "budget_steps",
    "budget_line",
    "loss_at_cost",
    "best_at_cheapest",
    "plot_score_vs_cost",
    "compute_section",
]

GAP_FLAG = 1.5  # valid_over_train above this marks a cell that memorises (the v2 datasets are sized to stay below)


def trainer_steps(trainer: dict) -> tuple[int, int]:
    """``(pretraining, fine-tune)`` optimiser steps of one run under ``trainer`` (a scale's ``trainer`` settings, or a
    cell's ``trainer_resolved``): ``epochs * max_batches_per_epoch`` and ``finetune.epochs * max_batches_per_epoch``
    (``configs/scale/cpu.yaml``: 1,000 and 200)."""
    ft = trainer.get("finetune") or {}
    per_epoch = int(trainer.get("max_batches_per_epoch") or 0)
    return int(trainer.get("epochs", 0)) * per_epoch, int(ft.get("epochs", 0)) * per_epoch


def budget_steps(trainer: dict) -> int:
    """Optimiser steps of one run under ``trainer``: pretraining plus fine-tune (:func:`trainer_steps`)."""
    return sum(trainer_steps(trainer))


def _trainer(cell: dict) -> dict:
    return cell.get("trainer_resolved") or cell.get("trainer") or {}


def budget_line(cells: list[dict]) -> str:
    """One sentence naming the step budget the cells share (or, when they differ, every budget found)."""
    budgets = set()
    for c in cells:
        t = _trainer(c)
        ft = t.get("finetune") or {}
        pre, fine = trainer_steps(t)
        frac = t.get("warmup_fraction")
        warm = f"warm-up {t.get('warmup_steps')} steps" if frac is None else f"warm-up {float(frac):.0%} of the steps"
        budgets.add((pre, fine, int(ft.get("n_out", 1)), int(t.get("batch_size", 0)), warm))
    text = "; ".join(
        f"{p:,} pretraining steps + {f:,} autoregressive fine-tune steps of {n}-step windows, batch {b}, {w}"
        for p, f, n, b, w in sorted(budgets)
    )
    same = "the same for every model, dataset and grid" if len(budgets) == 1 else "NOT the same for every cell"
    return f"**Budget**: {text} ({same}, fixed before the runs)."


def _step_weights(cell: dict) -> tuple[int, int]:
    t = _trainer(cell)
    return trainer_steps(t)[0], int((t.get("finetune") or {}).get("n_out", 1))


def loss_at_cost(cell: dict, seconds: float) -> float | None:
    """The validation loss the cell's selected run had reached after ``seconds`` CPU-seconds (the last validation
    at or before that cost; its final loss when the run cost less); None without a recorded cost or curve."""
    total = cell_cpu_seconds(cell)
    curve = [r for r in (cell.get("run") or {}).get("curve") or [] if r.get("val_loss") is not None]
    if total is None or not curve:
        return None
    pre, n_out = _step_weights(cell)
    last = max(r["step"] for r in curve)

    def windows(step):  # step-windows trained by ``step``: a fine-tune step trains n_out windows
        return min(step, pre) + n_out * max(0, step - pre)

    per_window = total / max(windows(last), 1)
    reached = [r for r in curve if windows(r["step"]) * per_window <= seconds * (1 + 1e-9)]
    if not reached:
        return None
    v = float(reached[-1]["val_loss"])
    return v if math.isfinite(v) else None


def best_at_cheapest(models: dict) -> dict | None:
    """For one dataset key (model -> aggregated entry): ``{"cheapest", "seconds", "losses": {model: mean valid
    loss at that cost}, "best"}``; None when fewer than two models have recorded costs."""
    cost = {}
    for m, e in models.items():
        secs = [cell_cpu_seconds(c) for c in e["cells"]]
        secs = [s for s in secs if s is not None]
        if secs:
            cost[m] = float(np.mean(secs))
    if len(cost) < 2:
        return None
    cheapest = min(cost, key=cost.get)
    seconds = cost[cheapest]
    losses = {}
    for m in cost:
        vals = [loss_at_cost(c, seconds) for c in models[m]["cells"]]
        vals = [v for v in vals if v is not None]
        if vals:
            losses[m] = float(np.mean(vals))
    if not losses:
        return None
    return {"cheapest": cheapest, "seconds": seconds, "losses": losses, "best": min(losses, key=losses.get)}


def plot_score_vs_cost(models: dict, path, title: str) -> Path | None:
    """Test VRMSE (next step left, 1:20 right) against training CPU-seconds, one point per model and seed; None
    when no cell recorded its cost."""
    pts = {
        m: [(cell_cpu_seconds(c), c) for c in e["cells"] if cell_cpu_seconds(c) is not None] for m, e in models.items()
    }
    if not any(pts.values()):
        return None
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.6))
    for ax, (part, label) in zip(axes, (("next_step", "next step"), ("rollout_mean", "1:20"))):
        for i, (m, p) in enumerate(pts.items()):
            xy = [(s, c[part]["vrmse"]["mean"]) for s, c in p if "vrmse" in c[part]]
            if xy:
                ax.scatter(*zip(*xy), s=18, color=f"C{i}", label=m)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("training cost [process CPU-s]")
        ax.set_title(label, fontsize=9)
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("test VRMSE (area-weighted, mean over fields)")
    axes[1].legend(fontsize=7)
    fig.suptitle(f"{title}: score against training cost (one point per model and seed)", fontsize=10)
    fig.subplots_adjust(left=0.1, right=0.98, bottom=0.16, top=0.86, wspace=0.25)
    return save_figure(fig, path)


def compute_section(agg: dict, datasets: list[str], plots: dict | None = None) -> list[str]:
    """The markdown of the equal-compute section: per dataset key, the mean cost per run of each model, its
    generalisation ratio, and the model best at the cheapest model's cost (empty when no cell recorded a cost)."""
    rows, notes = [], []
    for d in datasets:
        for m, e in agg[d].items():
            secs = [s for s in (cell_cpu_seconds(c) for c in e["cells"]) if s is not None]
            gaps = [g for g in (cell_valid_over_train(c) for c in e["cells"]) if g is not None]
            threads = sorted({str(c.get("train_threads")) for c in e["cells"] if c.get("train_threads") is not None})
            if not secs:
                continue
            gap = f"{max(gaps):.2f}" + (" (over 1.5)" if max(gaps) > GAP_FLAG else "") if gaps else "–"
            rows.append(f"| {d} | {m} | {np.mean(secs):,.0f} | {len(secs)} | {','.join(threads) or '?'} | {gap} |")
        b = best_at_cheapest(agg[d])
        if b is not None:
            others = ", ".join(f"{m} {v:.4g}" for m, v in sorted(b["losses"].items(), key=lambda kv: kv[1]))
            notes.append(
                f"- `{d}`: at {b['seconds']:,.0f} CPU-s (a run of {b['cheapest']}, the cheapest), the lowest "
                f"validation loss is **{b['best']}**'s (valid next-step loss at that cost: {others})."
            )
    if not rows:
        return []
    cells = [c for d in datasets for e in agg[d].values() for c in e["cells"]]
    sweeps = [s for s in (cell_sweep_cpu_seconds(c) for c in cells) if s is not None]
    swept = {id(c) for c in cells if cell_sweep_cpu_seconds(c) is not None}  # their selected run is in the sweep
    others = [s for s in (cell_cpu_seconds(c) for c in cells if id(c) not in swept) if s is not None]
    L = [
        "## Equal compute",
        "",
        "Training cost of the selected run of each cell (process CPU-seconds of the training, summed over resumes; "
        "the machine is named in each cell), and the largest generalisation ratio over seeds (valid over train "
        "next-step loss, mean over the last 5 pretraining epochs, each validating the windows trainer.val_subset "
        "picks (cpu v2: spread over the whole valid split); over 1.5 flags a cell that memorises). The cost is one "
        "run at the chosen rate: the learning-rate sweep (the other rates tried on the sweep seed, recorded as "
        "`sweep_cpu_seconds` in that seed's cell only, null in the cells of the seeds that reused its rate) is not "
        "counted."
        + (
            f" In all: {sum(sweeps) / 3600:.1f} CPU-hours of sweeps ({len(sweeps)} sweeps, each counted once, "
            f"each including its seed's selected run) and {sum(others) / 3600:.1f} CPU-hours of the {len(others)} "
            f"runs of the seeds that reused a sweep's rate: {(sum(sweeps) + sum(others)) / 3600:.1f} CPU-hours of "
            "training."
            if sweeps
            else ""
        ),
        "",
        "| dataset | model | CPU-s per run (mean) | seeds | threads | valid/train (max) |",
        "|---|---|---:|---:|---|---:|",
        *rows,
        "",
        "Best for the cost of the cheapest model's run (the others' validation loss when their runs had spent as "
        "much; mid-schedule, so an upper bound of a run planned for that budget; `benchmarks/leaderboard/compute.py`):",
        "",
        *notes,
        "",
    ]
    for d in datasets:
        png = (plots or {}).get(f"score_vs_cost_{d}")
        if png:
            L += [f"![{d}: score against training cost]({Path(png).name})", ""]
    return L
