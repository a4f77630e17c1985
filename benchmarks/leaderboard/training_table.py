"""The leaderboard's training table: per dataset and model, the preset, parameter count, seeds, chosen learning
rates, the sweep, whether the chosen rate is inside the rates tried, the steps, the wall minutes per run and the
generalisation ratio (:func:`dandelion.benchmarks.grid.records.valid_over_train`, flagged over 1.5)."""

from __future__ import annotations

import numpy as np

from dandelion.benchmarks.grid.records import cell_valid_over_train
from dandelion.benchmarks.leaderboard.compute import GAP_FLAG

__all__ = ["training_table"]


def _gap_text(cs: list[dict]) -> str:
    gaps = [g for g in (cell_valid_over_train(c) for c in cs) if g is not None]
    if not gaps:
        return "–"
    txt = ", ".join(f"{g:.2f}" for g in gaps)
    return f"**{txt}** (over {GAP_FLAG})" if max(gaps) > GAP_FLAG else txt


def training_table(agg: dict, datasets: list[str], models: list[str]) -> list[str]:
    """The markdown lines of the training section."""
    L = [
        "## Training",
        "",
        "| dataset | model | preset | parameters | seeds | chosen lr per seed | sweep (lr: final valid loss) | inside "
        "| steps | wall min per run (mean) | valid/train per seed |",
        "|---|---|---|---:|---|---|---|---|---:|---:|---|",
    ]
    for d in datasets:
        for m in models:
            if m not in agg[d]:
                continue
            e = agg[d][m]
            L.append(
                f"| {d} | {m} | {e['preset']} | {e['n_parameters']:,} | {','.join(map(str, e['seeds']))} | "
                f"{', '.join(f'{lr:g}' for lr in e['lrs'])} | {_sweep_text(e['cells'])} | {_inside_text(e['cells'])} | "
                f"{max(e['steps'])} | {np.mean(e['train_minutes']):.1f} | {_gap_text(e['cells'])} |"
            )
    L += [
        "",
        "'inside': the chosen rate has a tried rate on each side (the sweep was widened along the ladder until it had, "
        "or the ladder ended; a 64x128 key keeps its bracket around the 32x64 rate, so 'no' there says the best was at "
        "an edge). A sweep shown once ran on the sweep seed and its rate was reused by the other seeds. 'valid/train': "
        "the next-step loss on the valid split over the training loss, means over the last 5 pretraining epochs; "
        f"over {GAP_FLAG} (bold) the cell memorises its training trajectories.",
        "",
    ]
    return L


def _sweep_text(cs: list[dict]) -> str:
    """The sweeps of a model's cells: once when every seed reused one sweep (``lr_selection.sweep_seed``), else
    per seed."""
    seen, parts = set(), []
    for c in cs:
        sel = c.get("lr_selection") or {}
        tag = sel.get("sweep_seed", c["seed"])
        if tag in seen:
            continue
        seen.add(tag)
        parts.append(f"s{tag}: " + ", ".join(f"{r['lr']:g}: {r['val_loss']:.4g}" for r in c["sweep"]))
    return "; ".join(parts)


def _inside_text(cs: list[dict]) -> str:
    sel = [c.get("lr_selection") or {} for c in cs]
    if any(s.get("source") for s in sel) and all(len(s.get("tried") or []) == 1 for s in sel):
        return "n/a (the rate of " + str(sel[0]["source"]["key"]) + ", not swept)"
    flags = {s.get("inside") for s in sel}
    if flags == {True}:
        return "yes"
    if False in flags:
        return "no (edge of the bracket, kept)" if any(s.get("source") for s in sel) else "no (edge of the ladder)"
    return "n/a"
