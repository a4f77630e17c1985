"""The benchmark leaderboard job: cell result JSONs of ``dandelion-benchmark`` -> ``leaderboard.md`` and plots.

``dandelion-report target=leaderboard scale=cpu`` (or :func:`leaderboard` from Python) reads every
``<results_dir>/<dataset>/<model>/seed<k>.json`` written by :mod:`dandelion.benchmarks.grid.benchmark` and
writes into ``results_dir``:

* ``leaderboard.md`` (:mod:`dandelion.benchmarks.leaderboard.markdown`): the headline table first (datasets as rows,
  models as columns, next-step and 1:20 VRMSE), then the tables per metric and per field with their spread over
  seeds, the zero-shot transfer (:mod:`dandelion.benchmarks.transfer.report`), the training details and the plots;
  provenance and the exact commands that made every number last;
* ``error_vs_lead_<dataset>.png``: mean VRMSE (over fields and seeds) versus lead, one line per model;
* ``training_curves_<dataset>.png``: validation loss against step (:mod:`dandelion.benchmarks.leaderboard.curves`);
* ``error_vs_resolution_<family>.png`` (families trained at two or more grids only): next-step and 1:20 VRMSE
  against grid for every model trained at two or more grids (:mod:`dandelion.benchmarks.leaderboard.trend`, whose
  table and verdicts open the leaderboard after the headline);
* ``score_vs_cost_<dataset>.png``: test VRMSE against training CPU-seconds, one point per model and seed
  (:mod:`dandelion.benchmarks.leaderboard.compute`).

The resolution trend counts only the datasets whose finer grid adds resolved content, as measured in
``resolution_content.json`` beside the results (:mod:`dandelion.benchmarks.leaderboard.qualify`; absent: every
dataset, and the section says so).

All metrics are those of :mod:`dandelion.metrics` as computed by ``dandelion-rollout``; nothing is recomputed here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from omegaconf import OmegaConf

from dandelion.benchmarks.grid.cells import (
    REFERENCES,
    data_equivalences,
    load_cells,
    model_architecture,
    protocol_hash,
    record_state,
    reference_path,
    resolved_trainer,
)
from dandelion.benchmarks.leaderboard.budget_section import budget_section
from dandelion.benchmarks.leaderboard.compute import budget_steps, plot_score_vs_cost
from dandelion.benchmarks.leaderboard.curves import plot_training_curves
from dandelion.benchmarks.leaderboard.markdown import aggregate, bold_best, render_markdown
from dandelion.benchmarks.leaderboard.qualify import load_content
from dandelion.benchmarks.leaderboard.trend import families, plot_trend
from dandelion.benchmarks.paths import checkout_root, resolve_scale_dirs
from dandelion.benchmarks.transfer.report import transfer_section
from dandelion.cli.common import compose_config as compose
from dandelion.metrics import METRICS, metric_names
from dandelion.reporting.plotting import plain_log_ticks, pyplot, save_figure
from dandelion.runtime import write_text_atomic

__all__ = [
    "load_cells",
    "aggregate",
    "render_markdown",
    "plot_error_vs_resolution",
    "leaderboard",
    "bold_best",
    "trend_notes",
    "TREND_NOTES",
]

#: Hand-written caveats of the resolution trend, beside the results (:func:`trend_notes`).
TREND_NOTES = "trend_notes.yaml"

_LINE_STYLES = ("-", "--", ":", "-.")


def _scale_results_dir(scale_cfg) -> Path:
    """The scale's configured ``results_dir``, read against the checkout (:func:`resolve_scale_dirs`)."""
    holder = OmegaConf.create({"scale": {"results_dir": str(scale_cfg.get("results_dir"))}})
    resolve_scale_dirs(holder, keys=("results_dir",))
    return Path(holder.scale.results_dir)


def _pending(scale_cfg, results_dir: Path, agg: dict, stale_cells: list[dict] = ()) -> dict:
    """What the composed scale ``scale_cfg`` asks for and ``results_dir`` does not hold yet: label -> reason.

    A dataset key without any cell maps to its ``pending_reason`` (else "not run yet"); a dataset with some
    cells but models or seeds missing gets one label ``"<key>: <model> (seeds ...)"`` per missing model
    with the same reason, so that a "–" in the tables is explained; where one of ``stale_cells`` (results of an
    earlier protocol, :func:`_current_cells`) fills the gap, the reason says a rerun is pending instead. Empty
    when ``results_dir`` is not the scale's own folder (a test or custom grid), whose datasets the scale does not
    describe."""
    if scale_cfg is None or _scale_results_dir(scale_cfg).resolve() != Path(results_dir).resolve():
        return {}
    old = {(c["dataset_key"], c["model"], int(c["seed"])) for c in stale_cells}
    out = {}
    plan = _expected(scale_cfg, results_dir)
    for key, spec in scale_cfg.datasets.items():
        why = str(spec.get("pending_reason") or "not run yet")
        if key not in agg:
            out[key] = why
            continue
        for m, key_seeds in plan[key].items():
            missing = [s for s in key_seeds if s not in (agg[key].get(m) or {}).get("seeds", [])]
            if missing:
                rerun = all((key, m, k) in old for k in missing)
                out[f"{key}: {m} (seed{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))})"] = (
                    "rerun pending (the committed result is stale, listed below)" if rerun else why
                )
    return out


def _expected(scale_cfg, results_dir: Path) -> dict | None:
    """Dataset key -> {model: seeds} the composed scale ``scale_cfg`` trains (a key may narrow the scale's models
    and seeds, :func:`dandelion.benchmarks.grid.cells.cells`): what a key must hold to be ranked
    (:func:`~dandelion.benchmarks.leaderboard.headline.completeness`). None when ``results_dir`` is not the scale's
    own folder (as :func:`_pending`)."""
    if scale_cfg is None or _scale_results_dir(scale_cfg).resolve() != Path(results_dir).resolve():
        return None
    models, seeds = list(scale_cfg.get("models") or []), list(scale_cfg.get("seeds") or [])
    return {
        key: {str(m): [int(k) for k in (spec.get("seeds") or seeds)] for m in (spec.get("models") or models)}
        for key, spec in scale_cfg.datasets.items()
    }


_STALE_WHY = {
    "protocol": "made under another protocol of the scale (its dataset or settings changed since): left out of the "
    "tables until `dandelion-benchmark` reruns them",
    "network": "made with another network of its model than the scale's preset builds now (`architecture`, the "
    "preset changed since): left out of the tables until `dandelion-benchmark` reruns them",
    "key": "its dataset key is no longer in the scale: left out of the tables",
}


def _current_cells(scale_cfg, results_dir: Path, cells: list[dict]) -> tuple[list[dict], dict]:
    """Split ``cells`` into those made under the scale's current protocol and the others (``stale``).

    Only for the scale's own ``results_dir`` (as :func:`_pending`): a cell whose ``protocol_hash`` or resolved
    trainer differs from what ``dandelion-benchmark`` would make now (e.g. its dataset key was resized), whose
    ``architecture`` is not the network its model's preset builds now
    (:func:`~dandelion.benchmarks.grid.cells.model_architecture`, once per model; a model that cannot be built here
    is judged without it, as ``dandelion-benchmark`` does), or whose key the scale no longer lists, is left out of
    every table and listed as ``label -> reason`` instead, so that no number of a superseded protocol or network is
    shown as current."""
    if scale_cfg is None or _scale_results_dir(scale_cfg).resolve() != Path(results_dir).resolve():
        return cells, {}
    holder = OmegaConf.create({"scale": OmegaConf.to_container(scale_cfg, resolve=False)})
    trainer = resolved_trainer(holder)
    hashes = {key: protocol_hash(holder, key) for key in scale_cfg.datasets}
    archs: dict[str, str | None] = {}
    kept, old = [], {}
    for c in cells:
        key, m = c["dataset_key"], c["model"]
        if m not in archs:
            archs[m] = model_architecture(m, str(scale_cfg.preset))
        if key not in hashes:
            why = "key"
        elif record_state(c, hashes[key], trainer) != "finished":
            why = "protocol"
        elif record_state(c, hashes[key], trainer, archs[m]) != "finished":
            why = "network"
        else:
            kept.append(c)
            continue
        old.setdefault((key, why), {}).setdefault(m, []).append(int(c["seed"]))
    stale = {}
    for (key, why), models in old.items():
        n = sum(map(len, models.values()))
        label = f"{key}: {n} stale cell{'s' if n > 1 else ''} ({', '.join(sorted(models))})"
        stale[label + (" of another network" if why == "network" else "")] = _STALE_WHY[why]
    return kept, stale


def plot_error_vs_resolution(agg: dict, family: str, path) -> Path | None:
    """Next-step and 1:20 VRMSE against grid for every model of ``family`` trained at two or more of its grids
    (:func:`dandelion.benchmarks.leaderboard.trend.plot_trend`). Returns the PNG path, or None when the family was
    trained at one grid only (one point per curve says nothing about resolution; zero-shot transfer has its own
    plot, ``transfer_<cell>.png``)."""
    keys = families(agg).get(family)
    return None if not keys else plot_trend(agg, keys, path, family)


_REFERENCE_STYLES = {"persistence": ":", "linear_ar": "-.", "oracle": "--"}


def plot_error_vs_lead_log(models: dict, path, title: str, references: dict | None = None) -> Path:
    """Error versus lead, one colour per model, one line style per metric registered with ``curve=True``
    (area-weighted VRMSE solid, the Well's dashed), log y axis (an unstable rollout grows by orders of
    magnitude and would flatten every other curve). ``references``: name -> reference record (persistence, linear
    AR, the oracle; :data:`~dandelion.benchmarks.grid.cells.REFERENCES`), whose area-weighted VRMSE curves are drawn
    in black, one line style each."""
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
    for name, rec in (references or {}).items():
        y = ((rec.get("curves") or {}).get("vrmse") or {}).get("mean")
        if y:
            x = list(range(1, len(y) + 1))
            if next(iter(models.values()))["lead_time_hours"]:
                x = next(iter(models.values()))["lead_time_hours"][: len(y)]
            ax.semilogy(x, y, ls=_REFERENCE_STYLES.get(name, ":"), color="k", lw=1.0, label=REFERENCES[name])
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
        scale_cfg, scale = scale, str(scale.get("name"))
    else:
        scale = str(scale)
        try:
            scale_cfg = compose("benchmark", [f"scale={scale}"]).scale
        except Exception:  # noqa: BLE001 - a results folder of a scale with no config: no pending list
            scale_cfg = None
    results_dir = cfg.get("results_dir")  # given by the user: read against the current directory
    if not results_dir:
        if scale_cfg is None:
            raise ValueError(f"scale={scale} has no configs/scale/{scale}.yaml: pass results_dir=DIR")
        results_dir = _scale_results_dir(scale_cfg)
    results_dir = Path(str(results_dir))
    loaded = load_cells(results_dir)
    cells, stale = _current_cells(scale_cfg, results_dir, loaded)
    kept = {id(c) for c in cells}
    stale_cells = [c for c in loaded if id(c) not in kept]
    if not cells:
        raise FileNotFoundError(
            f"every cell result under {results_dir} was made under another protocol of scale={scale}: "
            "rerun `dandelion-benchmark` first"
        )
    agg = aggregate(cells)
    references = _references(results_dir, agg)  # written by dandelion-benchmark
    plots = {}
    if cfg.get("plots", True):
        for d, models in agg.items():
            plots[f"error_vs_lead_{d}"] = str(
                plot_error_vs_lead_log(models, results_dir / f"error_vs_lead_{d}.png", d, references.get(d))
            )
            p = plot_training_curves(models, results_dir / f"training_curves_{d}.png", d)
            if p is not None:
                plots[f"training_curves_{d}"] = str(p)
            p = plot_score_vs_cost(models, results_dir / f"score_vs_cost_{d}.png", d)
            if p is not None:
                plots[f"score_vs_cost_{d}"] = str(p)
        for fam in families(agg):
            p = plot_error_vs_resolution(agg, fam, results_dir / f"error_vs_resolution_{fam}.png")
            if p is not None:
                plots[f"error_vs_resolution_{fam}"] = str(p)
    budget = _budget_axis(scale_cfg, results_dir, cells, stale_cells, references, plots=bool(cfg.get("plots", True)))
    plots.update((budget or {}).get("plots") or {})
    cmd = cfg.get("_command") or f"dandelion-report target=leaderboard scale={scale}"
    section, transfer_plots = transfer_section(results_dir, cells, plots=bool(cfg.get("plots", True)))
    plots.update(transfer_plots)
    md = render_markdown(
        cells,
        scale,
        plots=plots,
        report_command=cmd,
        references=references,
        pending={**_pending(scale_cfg, results_dir, agg, stale_cells), **stale},
        equivalences={d: data_equivalences(results_dir, d) for d in agg},
        links=_links(results_dir),
        sections=section,
        trend_notes=_checked_notes(trend_notes(results_dir), agg, results_dir),
        expected=_expected(scale_cfg, results_dir),
        resolution=load_content(results_dir),  # resolution_content.json: which datasets the trend counts
        budget=budget,  # the same datasets at a multiple of the step budget (budget_axis.py)
    )
    out = results_dir / "leaderboard.md"
    write_text_atomic(out, md)
    print(f"leaderboard: {out} ({len(cells)} cells)")
    for k, v in plots.items():
        print(f"{k}: {v}")
    return {"markdown": str(out), "plots": plots, "n_cells": len(cells)}


def _references(results_dir: Path, keys) -> dict:
    """Dataset key -> reference name -> record, for every reference file of ``keys`` under ``results_dir``."""
    return {
        d: {
            name: json.loads(reference_path(results_dir, d, name).read_text())
            for name in REFERENCES
            if reference_path(results_dir, d, name).exists()
        }
        for d in keys
    }


def _budget_axis(
    scale_cfg, results_dir: Path, cells: list[dict], stale_cells: list[dict], references: dict, plots: bool
) -> dict | None:
    """The budget axis (:func:`~dandelion.benchmarks.leaderboard.budget_section.budget_section`) of the scale's own
    results: its current ``cells`` (and ``stale_cells``, the others) beside those of each scale its ``budget_axis``
    names (``configs/scale/cpu.yaml``: ``[cpu_4x]``), each read from that scale's ``results_dir`` and kept only when
    made under that scale's protocol and network (:func:`_current_cells`; the others listed as pending reruns),
    labelled by its step budget over this one's (``4x``). The keys and models compared are the last scale's. None
    when the scale names none, or ``results_dir`` is not the scale's own (as :func:`_pending`)."""
    names = [str(n) for n in (scale_cfg.get("budget_axis") or [])] if scale_cfg is not None else []
    expected = _expected(scale_cfg, results_dir)
    if not names or expected is None:
        return None

    def budget(cfg, folder: Path, cells, stale_cells, refs, expected):
        return {
            "scale": str(cfg.name),
            "results_dir": str(cfg.get("results_dir")),  # as configured (a checkout-relative path), for provenance
            "cells": cells,
            "stale_cells": stale_cells,
            "references": refs,
            "equivalences": {key: data_equivalences(folder, key) for key in expected},
            "expected": expected,
            "steps": budget_steps(OmegaConf.to_container(cfg.trainer, resolve=True)),
        }

    budgets = [budget(scale_cfg, results_dir, cells, stale_cells, references, expected)]
    for name in names:
        other = compose("benchmark", [f"scale={name}"]).scale
        other_dir = _scale_results_dir(other)
        try:
            loaded = load_cells(other_dir)
        except FileNotFoundError:  # none of its cells is run yet: every one is pending
            loaded = []
        current, _ = _current_cells(other, other_dir, loaded)  # the stale ones: pending reruns of the section
        kept = {id(c) for c in current}
        old = [c for c in loaded if id(c) not in kept]
        refs = _references(other_dir, other.datasets)
        budgets.append(budget(other, other_dir, current, old, refs, _expected(other, other_dir)))
    for b in budgets:
        b["label"] = f"{b['steps'] / budgets[0]['steps']:g}x"
    models = [str(m) for m in other.models]  # the last scale's
    return budget_section(budgets, list(budgets[-1]["expected"]), models, results_dir, plots=plots)


def _links(results_dir: Path) -> list[str]:
    """Documents shown under the headline: the budget study beside the results, and the decision record of the
    checkout (``docs/decisions.md``) when the results are the checkout's own."""
    out = []
    if (results_dir / "budget" / "budget.md").exists():  # dandelion-budget's study of longer budgets
        out.append(
            "Whether the step budget is a plateau: [budget/budget.md](budget/budget.md) (cells retrained at "
            "multiples of their budget, and a saturation fit of where the validation loss would flatten)."
        )
    root = checkout_root()
    if root is not None and (root / "docs" / "decisions.md").exists():
        try:
            Path(results_dir).resolve().relative_to(root)
        except ValueError:
            return out
        rel = Path(os.path.relpath(root / "docs" / "decisions.md", Path(results_dir).resolve())).as_posix()
        out.append(f"What was tried and learned, with the numbers that matter: [docs/decisions.md]({rel}).")
    return out


def trend_notes(results_dir: Path) -> dict:
    """Caveats of the resolution trend, dataset name -> sentence, from ``trend_notes.yaml`` beside the results
    (written by hand, committed with them; {} when absent).

    Raises:
        ValueError: the file is not a mapping of dataset names to strings."""
    path = Path(results_dir) / TREND_NOTES
    if not path.exists():
        return {}
    data = OmegaConf.to_container(OmegaConf.load(path))
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise ValueError(
            f"{path}: expected a mapping of dataset names (e.g. held_suarez) to one caveat string each; fix the file"
        )
    return data


def _checked_notes(notes: dict, agg: dict, results_dir: Path) -> dict:
    """``notes`` when each names a dataset of the results (a caveat for a dataset trained at one grid so far is
    kept for when the second grid comes); else ValueError naming the unknown names."""
    known = {e["dataset"] for models in agg.values() for e in models.values()}
    unknown = sorted(set(notes) - known)
    if unknown:
        raise ValueError(
            f"{Path(results_dir) / TREND_NOTES} names {unknown}, not datasets of these results (known: "
            f"{sorted(known)}); use the dataset name without the grid suffix, e.g. held_suarez"
        )
    return notes
