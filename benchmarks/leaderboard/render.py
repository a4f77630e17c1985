"""The benchmark leaderboard: cell result JSONs of ``dandelion-benchmark`` -> markdown tables and plots.

``dandelion-report target=leaderboard scale=cpu`` (or :func:`leaderboard` from Python) reads every
``<results_dir>/<dataset>/<model>/seed<k>.json`` written by :mod:`dandelion.benchmarks.grid.benchmark` and
writes into ``results_dir``:

* ``leaderboard.md``: one table per metric registered with a leaderboard title
  (:func:`dandelion.metrics.metric`; by default the area-weighted VRMSE and the Well's unweighted
  VRMSE): per dataset, next-step and 1:20 rollout value (mean over leads 1..20) of every model,
  averaged over the fields, as ``mean ± std`` over seeds (sample standard deviation; "± n/a" with
  one seed), the best (lowest mean) of every column in **bold**; per-field tables; the training details (parameters, chosen learning rates,
  steps, minutes); the exact commands that made every number;
* ``error_vs_lead_<dataset>.png``: mean VRMSE (over fields and seeds) versus lead, one line per model;
* ``error_vs_resolution_<family>.png`` (families trained at two or more grids only): 1:20 and next-step VRMSE versus grid size for Dandelion and
  the best baseline (lowest 1:20 VRMSE averaged over that family's resolutions).

All metrics are those of :mod:`dandelion.metrics` as computed by ``dandelion-rollout``;
nothing is recomputed here.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from dandelion.benchmarks.grid.cells import (
    REFERENCES,
    data_equivalences,
    equivalence_path,
    equivalent,
    load_cells,
    reference_path,
)
from dandelion.benchmarks.leaderboard.curves import plot_training_curves
from dandelion.benchmarks.transfer.report import transfer_section
from dandelion.cli.common import compose_config as compose
from dandelion.metrics import METRICS, metric_names
from dandelion.reporting.plotting import plain_log_ticks, pyplot, save_figure
from dandelion.runtime import write_text_atomic

__all__ = ["load_cells", "aggregate", "render_markdown", "plot_error_vs_resolution", "leaderboard", "bold_best"]

REFERENCE_MODEL = "dandelion"
_LINE_STYLES = ("-", "--", ":", "-.")


def _stats(values) -> dict:
    v = np.asarray([x for x in values if x is not None and math.isfinite(x)], dtype=float)
    if v.size == 0:
        return {"mean": math.nan, "std": math.nan, "n": 0}
    return {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if v.size > 1 else math.nan, "n": int(v.size)}


def aggregate(cells: list[dict]) -> dict:
    """Group cells by dataset and model: ``{dataset_key: {model: {...}}}`` with mean/std/n over seeds of
    ``next_step`` and ``rollout_mean`` per variable of every metric with a leaderboard table
    (:func:`dandelion.metrics.metric_names` ``table=True``) that the cells hold, mean curves, and details."""
    out: dict = {}
    for c in cells:
        out.setdefault(c["dataset_key"], {}).setdefault(c["model"], []).append(c)
    agg: dict = {}
    for d, models in out.items():
        agg[d] = {}
        for m, cs in models.items():
            entry = {
                "seeds": [c["seed"] for c in cs],
                "n_parameters": cs[0]["n_parameters"],
                "preset": cs[0]["preset"],
                "lrs": [c["lr"] for c in cs],
                "steps": [c["steps"] for c in cs],
                "train_minutes": [(c.get("run") or {}).get("minutes", c["minutes"]["train_wall"]) for c in cs],
                "cells": cs,
                "nlat": cs[0]["nlat"],
                "nlon": cs[0]["nlon"],
                "dataset": cs[0]["dataset"],
                "reduced": cs[0].get("reduced"),
                "lead_time_hours": cs[0].get("lead_time_hours"),
                "lead_time": cs[0].get("lead_time"),
            }
            for part in ("next_step", "rollout_mean"):
                entry[part] = {}
                for metric in metric_names(table=True):
                    if not all(metric in c[part] for c in cs):
                        continue
                    variables = list(cs[0][part][metric])
                    entry[part][metric] = {v: _stats([c[part][metric].get(v) for c in cs]) for v in variables}
            entry["curves"] = {
                metric: {
                    v: np.mean([c["curves"][metric][v] for c in cs], axis=0).tolist() for v in cs[0]["curves"][metric]
                }
                for metric in cs[0]["curves"]
            }
            agg[d][m] = entry
    return agg


def bold_best(values: dict) -> set:
    """Keys of ``values`` (key -> float, lower is better) holding the minimum (ties all win; NaN never wins)."""
    finite = {k: v for k, v in values.items() if v is not None and math.isfinite(v)}
    if not finite:
        return set()
    best = min(finite.values())
    return {k for k, v in finite.items() if v <= best * (1 + 1e-12)}


def _cell(s: dict, bold: bool) -> str:
    if s["n"] == 0:
        return "–"
    txt = f"{s['mean']:.4f} ± " + (f"{s['std']:.4f}" if math.isfinite(s["std"]) else "n/a")
    return f"**{txt}**" if bold else txt


def _table(agg: dict, metric: str, datasets: list[str], models: list[str]) -> list[str]:
    head = ["model"]
    cols = []
    for d in datasets:
        for part, label in (("next_step", "next step"), ("rollout_mean", "1:20")):
            head.append(f"{d} {label}")
            cols.append((d, part))
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * len(cols)) + "|"]
    refs = {d: agg[d][next(iter(agg[d]))].get("references") or {} for d in datasets}
    for name, label in REFERENCES.items():  # reference lines (persistence, linear AR), never bold
        if any(name in r for r in refs.values()):
            lines.append(
                f"| *{label}* | "
                + " | ".join(
                    f"*{refs[d][name][part][metric]['mean']:.4f}*"
                    if name in refs[d] and metric in refs[d][name][part]
                    else "–"
                    for d, part in cols
                )
                + " |"
            )
    best = {}
    for d, part in cols:
        best[(d, part)] = bold_best(
            {m: agg[d][m][part][metric]["mean"]["mean"] for m in models if m in agg[d] and metric in agg[d][m][part]}
        )
    for m in models:
        row = [m]
        for d, part in cols:
            if m not in agg[d] or metric not in agg[d][m][part]:
                row.append("–")
                continue
            row.append(_cell(agg[d][m][part][metric]["mean"], m in best[(d, part)]))
        lines.append("| " + " | ".join(row) + " |")
    return lines


def _field_table(agg: dict, d: str, models: list[str], metric: str = "vrmse") -> list[str]:
    """One row per field (a dataset can have dozens: Held-Suarez has 41), one column per model and lead
    summary, the best (lowest mean) of each row and summary in bold."""
    variables = [v for v in next(iter(agg[d].values()))["next_step"][metric] if v != "mean"]
    have = [m for m in models if m in agg[d]]
    cols = [("next_step", m) for m in have] + [("rollout_mean", m) for m in have]
    head = ["field"] + [f"{m} {'next' if p == 'next_step' else '1:20'}" for p, m in cols]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    for v in variables:
        best = {p: bold_best({m: agg[d][m][p][metric][v]["mean"] for m in have}) for p in ("next_step", "rollout_mean")}
        lines.append("| " + " | ".join([v] + [_cell(agg[d][m][p][metric][v], m in best[p]) for p, m in cols]) + " |")
    return lines


#: The keys of a record's data digest: the current one (trajectory files and splits) and the earlier one (the whole
#: ``checksums.sha256``, ``dataset.yaml`` included), :func:`~dandelion.benchmarks.grid.cells.data_digest`. Digests are
#: compared within one definition only.
DIGEST_KEYS = ("data_files_sha256", "data_sha256")
_DIGEST_NAMES = {
    "data_files_sha256": "`data_files_sha256`",
    "data_sha256": "the earlier `data_sha256`, which also digested `dataset.yaml`",
}


def _data_digests(
    cells: list[dict], references: dict | None, d: str, key: str = "data_files_sha256"
) -> list[str | None]:
    """The digest ``key`` (:data:`DIGEST_KEYS`) of every cell and reference record of dataset key ``d`` (None: not recorded)."""
    recs = [c for c in cells if c["dataset_key"] == d] + list(((references or {}).get(d) or {}).values())
    return [r.get(key) for r in recs]


def _data_versions(cells: list[dict], references: dict | None, datasets: list[str]) -> list[str]:
    """Which version of each dataset its cells and references were scored on, per digest definition
    (:data:`DIGEST_KEYS`; a record can carry both, one made before either carries none)."""
    lines = []
    for d in datasets:
        for key in DIGEST_KEYS:
            digests = _data_digests(cells, references, d, key)
            seen = sorted(set(digests) - {None})
            if seen:
                lines.append(
                    f"- `{d}` ({_DIGEST_NAMES[key]}): {', '.join(f'`{x}`' for x in seen)} ({sum(x is not None for x in digests)} "
                    f"of {len(digests)} records)"
                )
    if not lines:
        return []
    return [
        "Data versions (`data_files_sha256`: digest of the trajectory files' and splits' checksums; the files are written "
        "without timestamps, so a dataset regenerated with the same configuration has the same digest; records without "
        "a digest predate the recording, and digests of different definitions are not compared):",
        "",
        *lines,
        "",
    ]


def _data_version_notes(d: str, cells: list[dict], references: dict | None, eq: list[dict]) -> list[str]:
    """A note (versions recorded as equivalent, citing the evidence) or a warning for each digest definition under
    which the records of ``d`` name more than one version of its data."""
    out = []
    for key in DIGEST_KEYS:
        versions = sorted(set(_data_digests(cells, references, d, key)) - {None})
        if len(versions) < 2:
            continue
        mine = [e for e in eq if e.get("definition", "data_sha256") == key]
        if equivalent(versions, mine):
            worst = max(x for e in mine for x in e["max_relative_difference"].values())
            out += [
                f"Note: the cells and references of {d} were scored on {len(versions)} versions of its data ({_DIGEST_NAMES[key]} "
                f"{versions}), regenerated on different machines; recomputed on each, the references differ by at most "
                f"{worst:.1e} relative (`{equivalence_path('.', d).as_posix()}`, made by `benchmarks/grid/verify_references.py`).",
                "",
            ]
        else:
            out += [
                f"**Warning**: the cells and references of {d} were scored on {len(versions)} different versions of "
                f"its data ({_DIGEST_NAMES[key]} {versions}); regenerate the dataset and rerun the cells that "
                "differ before comparing them (or, if they differ by round-off only, record it with "
                "`benchmarks/grid/verify_references.py --equivalent-within=TOL`).",
                "",
            ]
    return out


def render_markdown(
    cells: list[dict],
    scale: str,
    plots: dict | None = None,
    report_command: str | None = None,
    references: dict | None = None,
    pending: dict | None = None,
    equivalences: dict | None = None,
) -> str:
    """The ``leaderboard.md`` text for the cells of one scale (see the module docstring); ``references``:
    dataset key -> {reference name (:data:`~dandelion.benchmarks.grid.references.REFERENCES`) -> record} (reference
    lines in the tables); ``pending``: label (a dataset key, or a dataset key and model) -> why it has no
    finished cell yet (:func:`_pending`); ``equivalences``: dataset key -> its recorded data-version equivalences
    (:func:`~dandelion.benchmarks.grid.cells.data_equivalences`), which turn the warning about several data versions
    into a note that names the evidence."""
    agg = aggregate(cells)
    for d, refs in (references or {}).items():
        for e in agg.get(d, {}).values():
            e["references"] = refs
    datasets = sorted(agg, key=lambda d: (agg[d][next(iter(agg[d]))]["dataset"], agg[d][next(iter(agg[d]))]["nlat"], d))
    models = []
    for c in cells:
        if c["model"] not in models:
            models.append(c["model"])
    if REFERENCE_MODEL in models:
        models = [REFERENCE_MODEL] + [m for m in models if m != REFERENCE_MODEL]
    first = cells[0]
    n20 = first["evaluation"].get("n_steps", 20)
    L = [f"# Dandelion benchmark leaderboard, scale `{scale}`", ""]
    L.append(
        f"Test split; VRMSE averaged over the fields (scalar fields and the u, v components of vector fields); "
        f"'next step' = lead 1, '1:{min(20, n20)}' = mean over leads 1..{min(20, n20)} of autoregressive rollouts. "
        f"Each entry: mean ± sample std over seeds; **bold** = best (lowest mean) of the column. "
        f"Every number below comes from the cell files `<dataset>/<model>/seed<k>.json` beside this file, made by the "
        f"commands listed at the end."
    )
    L.append("")
    reduced = sorted({d for d in datasets if agg[d][next(iter(agg[d]))]["reduced"]})
    if reduced:
        L.append(
            f"Reduced datasets (solver band limit below the dataset card's; few short trajectories): {', '.join(reduced)}. "
            "They benchmark the models at small size; they are not the paper's numbers."
        )
        L.append("")
    if pending:
        L.append("Cells of the scale without results yet (pending; a '–' in the tables below):")
        L.append("")
        L += [f"- `{d}`: {why}" for d, why in pending.items()]
        L.append("")
    L += _data_versions(cells, references, datasets)
    if references:
        L.append(
            "*persistence (reference)*: the last input frame as every forecast (no training), same forecasts and metrics. "
            "*linear AR (reference)*: one pointwise linear map of the protocol's inputs to the increment, the same at every "
            "grid point, fitted by area-weighted least squares on the train split (`benchmarks/grid/references.py`)."
        )
        L.append("")
    for d in datasets:
        cell_hashes = {c.get("protocol_hash") for c in cells if c["dataset_key"] == d}
        for name, ref in ((references or {}).get(d) or {}).items():
            ref_hash = ref.get("protocol_hash")
            if ref_hash is not None and cell_hashes != {ref_hash}:
                L.append(
                    f"**Warning**: the {name} reference of {d} was made under protocol {ref_hash}, the cells under "
                    f"{sorted(map(str, cell_hashes))}; rerun `dandelion-benchmark` to refresh it."
                )
                L.append("")
        L += _data_version_notes(d, cells, references, (equivalences or {}).get(d) or [])
        hashes = cell_hashes
        if len(hashes) > 1:
            L.append(
                f"**Warning**: the cells of {d} were made under {len(hashes)} different protocols ({sorted(map(str, hashes))}); "
                f"rerun `dandelion-benchmark` so that they agree before comparing them."
            )
            L.append("")
    for metric in metric_names(table=True):  # one table per registered metric the cells hold
        if any(metric in e["next_step"] for d in datasets for e in agg[d].values()):
            L += [f"## {METRICS[metric].title}", ""] + _table(agg, metric, datasets, models) + [""]
    L += ["## Per field, area-weighted VRMSE", ""]
    for d in datasets:
        L += [f"### {d}", ""] + _field_table(agg, d, models) + [""]
    L += ["## Training", ""]
    L.append(
        "| dataset | model | preset | parameters | seeds | chosen lr per seed | sweep (lr: final valid loss) | inside | steps | wall min per run (mean) |"
    )
    L.append("|---|---|---|---:|---|---|---|---|---:|---:|")
    for d in datasets:
        for m in models:
            if m not in agg[d]:
                continue
            e = agg[d][m]
            L.append(
                f"| {d} | {m} | {e['preset']} | {e['n_parameters']:,} | {','.join(map(str, e['seeds']))} | "
                f"{', '.join(f'{lr:g}' for lr in e['lrs'])} | {_sweep_text(e['cells'])} | {_inside_text(e['cells'])} | "
                f"{max(e['steps'])} | {np.mean(e['train_minutes']):.1f} |"
            )
    L.append("")
    L.append(
        "'inside': the chosen rate has a tried rate on each side (the sweep was widened along the ladder until it had, "
        "or the ladder ended). A sweep shown once ran on the sweep seed and its rate was reused by the other seeds."
    )
    L.append("")
    c0 = cells[0]
    t = c0["trainer"]
    tr = c0.get("trainer_resolved") or t
    target = c0.get("target") or tr.get("target", "frame")
    inputs = tr.get("inputs", "frames")
    L.append(
        f"Protocol (scale `{scale}`): {t.get('n_in', 4)} frames in, 1 out; the network sees "
        f"{'the older frames as scaled differences to the newest' if inputs == 'differences' else 'the normalised frames'} and "
        f"predicts the {'normalised increment (x_t+1 = x_t + s * output; loss in units of the increment)' if target == 'increment' else 'next frame'}; "
        f"batch {t.get('batch_size')}; "
        f"pretrain {t.get('epochs')} x {t.get('max_batches_per_epoch')} steps, autoregressive fine-tune "
        f"{(t.get('finetune') or {}).get('epochs', 0)} x {t.get('max_batches_per_epoch')} steps of "
        f"{(t.get('finetune') or {}).get('n_out', 2)}-step windows; learning rate from the sweep "
        f"{sorted({r['lr'] for c in cells for r in c['sweep']})} by {c0['selection']}. Budgets are counted in optimiser steps, "
        "so the numbers do not depend on the machine's load; wall minutes are reported for information only "
        f"(machine: {c0['machine'].get('cpu')}, {c0['machine'].get('cores')} cores, GPU {c0['machine'].get('gpu')}; "
        f"torch {c0['versions'].get('torch')}, torch-harmonics {c0['versions'].get('torch_harmonics')})."
    )
    L.append("")
    if plots:
        L += ["## Plots", ""]
        for k, p in plots.items():
            L.append(f"- `{Path(p).name}`: {k.replace('_', ' ')}")
            L.append(f"  ![{k}]({Path(p).name})")
        L.append("")
    L += ["## Commands", "", "Made by:", "", "```"]
    for cmd in sorted({c["commands"]["benchmark"] for c in cells}):
        L.append(cmd)
    L.append(report_command or f"dandelion-report target=leaderboard scale={scale}")
    L += [
        "```",
        "",
        "<details><summary>The training and rollout commands of every cell (equivalent stand-alone form)</summary>",
        "",
    ]
    for c in cells:
        L.append(f"**{c['dataset_key']} / {c['model']} / seed {c['seed']}** (chosen lr {c['lr']:g})")
        L.append("```")
        L += c["commands"]["train"] + [c["commands"]["rollout"]]
        L.append("```")
    L += ["", "</details>", ""]
    return "\n".join(L)


def _sweep_text(cs: list[dict]) -> str:
    """The sweeps of a model's cells: once when every seed reused one sweep (``lr_selection.sweep_seed``), else per seed."""
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
    flags = {(c.get("lr_selection") or {}).get("inside") for c in cs}
    return "yes" if flags == {True} else "no (edge of the ladder)" if False in flags else "n/a"


def _pending(scale_cfg, results_dir: Path, agg: dict) -> dict:
    """What the composed scale ``scale_cfg`` asks for and ``results_dir`` does not hold yet: label -> reason.

    A dataset key without any cell maps to its ``pending_reason`` (else "not run yet"); a dataset with some
    cells but models or seeds missing gets one label ``"<key>: <model> (seeds ...)"`` per missing model
    with the same reason, so that a "–" in the tables is explained. Empty when ``results_dir`` is not the
    scale's own folder (a test or custom grid), whose datasets the scale does not describe."""
    if scale_cfg is None or Path(str(scale_cfg.get("results_dir"))).resolve() != Path(results_dir).resolve():
        return {}
    models, seeds = list(scale_cfg.get("models") or []), list(scale_cfg.get("seeds") or [])
    out = {}
    for key, spec in scale_cfg.datasets.items():
        why = str(spec.get("pending_reason") or "not run yet")
        if key not in agg:
            out[key] = why
            continue
        for m in models:
            missing = [s for s in seeds if s not in (agg[key].get(m) or {}).get("seeds", [])]
            if missing:
                out[f"{key}: {m} (seed{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))})"] = why
    return out


def _family(entry) -> str:
    return entry["dataset"]


def plot_error_vs_resolution(agg: dict, family: str, path, reference: str = REFERENCE_MODEL) -> Path | None:
    """1:20 (solid) and next-step (dashed) VRMSE versus grid size, Dandelion and the best baseline.

    The best baseline: lowest 1:20 VRMSE averaged over the resolutions where it was run. Returns the
    PNG path, or None when the family has no model to show or was trained at one resolution only (one
    point per curve says nothing about resolution; zero-shot transfer has its own plot, ``transfer_<cell>.png``).
    """
    keys = [d for d in agg if _family(next(iter(agg[d].values()))) == family]
    keys.sort(key=lambda d: next(iter(agg[d].values()))["nlat"])
    if len({next(iter(agg[d].values()))["nlat"] for d in keys}) < 2:
        return None
    models = {m for d in keys for m in agg[d]}
    baselines = {
        m: np.mean([agg[d][m]["rollout_mean"]["vrmse"]["mean"]["mean"] for d in keys if m in agg[d]])
        for m in models
        if m != reference
    }
    show = ([reference] if reference in models else []) + ([min(baselines, key=baselines.get)] if baselines else [])
    if not show:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 3.8))
    for m in show:
        ks = [d for d in keys if m in agg[d]]
        x = [next(iter(agg[d].values()))["nlat"] for d in ks]
        for part, ls in (("rollout_mean", "-"), ("next_step", "--")):
            y = [agg[d][m][part]["vrmse"]["mean"]["mean"] for d in ks]
            e = [agg[d][m][part]["vrmse"]["mean"]["std"] for d in ks]
            e = [0.0 if not math.isfinite(v) else v for v in e]
            ax.errorbar(
                x,
                y,
                yerr=e,
                ls=ls,
                marker="o",
                ms=4,
                capsize=3,
                label=f"{m}, {'1:20' if part == 'rollout_mean' else 'next step'}",
            )
    xs = sorted({next(iter(agg[d].values()))["nlat"] for d in keys})
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{n}x{2 * n}" for n in xs])
    ax.set_xlabel("grid (nlat x nlon)")
    ax.set_ylabel("VRMSE (area-weighted, mean over fields)")
    ax.set_title(f"{family}: error vs resolution", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.subplots_adjust(left=0.14, right=0.97, bottom=0.14, top=0.9)
    return save_figure(fig, path)


def plot_error_vs_lead_log(models: dict, path, title: str) -> Path:
    """Error versus lead, one colour per model, one line style per metric registered with ``curve=True``
    (area-weighted VRMSE solid, the Well's dashed), log y axis (an unstable rollout grows by orders of
    magnitude and would flatten every other curve)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.6, 3.8))
    fig.subplots_adjust(left=0.13, right=0.97, bottom=0.14, top=0.9)
    top = 0.0
    for i, (m, e) in enumerate(models.items()):
        c = f"C{i}"
        for j, metric in enumerate(metric_names(curve=True)):
            ls = _LINE_STYLES[j % len(_LINE_STYLES)]
            y = e["curves"].get(metric, {}).get("mean")
            if y is None:
                continue
            x = e["lead_time_hours"] or list(range(1, len(y) + 1))
            ax.semilogy(
                x, y, ls=ls, color=c, marker="o" if ls == "-" else None, ms=3, label=f"{m}, {METRICS[metric].label}"
            )
            top = max([top, *(v for v in y if v == v)])
    for ref in sorted({METRICS[m].reference for m in metric_names(curve=True)} - {None}):
        if (
            top > 0.3 * ref
        ):  # a reference line (VRMSE 1: forecasting the spatial mean) only when the curves come near it
            ax.axhline(ref, color="0.5", lw=0.8, ls=":")
    plain_log_ticks(ax)
    ax.set_xlabel("lead time [h]" if next(iter(models.values()))["lead_time_hours"] else "lead step")
    ax.set_ylabel("VRMSE, mean over fields and seeds")
    ax.set_title(f"{title}: error vs lead (solid area-weighted, dashed the Well's)", fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, ncol=2)
    return save_figure(fig, path)


def leaderboard(cfg) -> dict:
    """The leaderboard mode of ``dandelion-report`` (``target=leaderboard``).

    Config keys: ``scale`` (``cpu`` | ``full``; its ``results_dir`` comes from configs/scale/<scale>.yaml),
    ``results_dir`` (overrides it), ``plots`` (default true).

    Returns
    -------
    dict with ``markdown`` (path of leaderboard.md), ``plots`` (name -> PNG path), ``n_cells``.
    """
    scale = cfg.get("scale") or "cpu"
    if hasattr(scale, "get"):  # the composed protocol (configs/scale/<scale>.yaml, a group of report.yaml)
        scale_cfg = scale
        results_dir = cfg.get("results_dir") or scale.get("results_dir")
        scale = str(scale.get("name"))
    else:
        scale, results_dir = str(scale), cfg.get("results_dir")
        try:
            scale_cfg = compose("benchmark", [f"scale={scale}"]).scale
        except Exception:  # noqa: BLE001 - a results folder of a scale with no config: no pending list
            scale_cfg = None
    if not results_dir:
        results_dir = scale_cfg.results_dir
    results_dir = Path(str(results_dir))
    cells = load_cells(results_dir)
    agg = aggregate(cells)
    references = {
        d: {
            name: json.loads(reference_path(results_dir, d, name).read_text())
            for name in REFERENCES
            if reference_path(results_dir, d, name).exists()
        }
        for d in agg
    }  # written by dandelion-benchmark
    plots = {}
    if cfg.get("plots", True):
        for d, models in agg.items():
            plots[f"error_vs_lead_{d}"] = str(plot_error_vs_lead_log(models, results_dir / f"error_vs_lead_{d}.png", d))
            p = plot_training_curves(models, results_dir / f"training_curves_{d}.png", d)
            if p is not None:
                plots[f"training_curves_{d}"] = str(p)
        for fam in sorted({_family(next(iter(m.values()))) for m in agg.values()}):
            p = plot_error_vs_resolution(agg, fam, results_dir / f"error_vs_resolution_{fam}.png")
            if p is not None:
                plots[f"error_vs_resolution_{fam}"] = str(p)
    cmd = cfg.get("_command") or f"dandelion-report target=leaderboard scale={scale}"
    md = render_markdown(
        cells,
        scale,
        plots=plots,
        report_command=cmd,
        references=references,
        pending=_pending(scale_cfg, results_dir, agg),
        equivalences={d: data_equivalences(results_dir, d) for d in agg},
    )
    section, transfer_plots = transfer_section(
        results_dir, cells, plots=bool(cfg.get("plots", True))
    )  # dandelion-transfer's results
    if section:
        md = md.replace("\n## Training\n", "\n" + "\n".join(section) + "\n## Training\n", 1)
        plots.update(transfer_plots)
    links = []  # documents kept beside the table, linked before the first metric table
    if (results_dir / "NOTES.md").exists():  # a hand-written discussion of the numbers
        links.append("Discussion of these numbers: [NOTES.md](NOTES.md).")
    if (results_dir / "budget" / "budget.md").exists():  # dandelion-budget's study of longer budgets
        links.append(
            "Whether the step budget is a plateau: [budget/budget.md](budget/budget.md) (cells retrained at "
            "multiples of their budget, and a saturation fit of where the validation loss would flatten)."
        )
    first = next(
        (f"\n## {METRICS[m].title}\n" for m in metric_names(table=True) if f"\n## {METRICS[m].title}\n" in md), None
    )
    if links and first is not None:
        md = md.replace(first, "".join(f"\n{line}\n" for line in links) + first, 1)
    out = results_dir / "leaderboard.md"
    write_text_atomic(out, md)
    print(f"leaderboard: {out} ({len(cells)} cells)")
    for k, v in plots.items():
        print(f"{k}: {v}")
    return {"markdown": str(out), "plots": plots, "n_cells": len(cells)}
