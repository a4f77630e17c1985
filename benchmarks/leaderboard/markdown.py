"""The text of ``leaderboard.md``: the cells of one scale (and their references) as markdown.

The file opens with the answer: the verdict in words, generated from the numbers
(:mod:`~dandelion.benchmarks.leaderboard.verdict`), then the headline table (:func:`headline_table`,
:mod:`~dandelion.benchmarks.leaderboard.headline`; one row per dataset, one column per model, next-step and 1:20
area-weighted VRMSE averaged over fields and seeds, the best model of each dataset and lead summary in **bold**,
judged with the Student-t intervals of :mod:`~dandelion.benchmarks.leaderboard.stats`). Then what a reader of the
numbers must know first (warnings, pending cells, links to the budget study and the decision record), the tables
with their spread over seeds (one per metric registered with a leaderboard title, :func:`dandelion.metrics.metric`;
per field, with each field's RMSE in our and WeatherBench 2's definitions,
:mod:`~dandelion.benchmarks.leaderboard.field_rmse`), each seed's values (:mod:`~dandelion.benchmarks.leaderboard.
seeds`), the extra sections (zero-shot transfer), the training details and the plots; provenance (datasets, data
versions, protocol, machine) and the exact commands that made every number come last. The job that writes it, and
the plots, is :mod:`dandelion.benchmarks.leaderboard.render`.
"""

from __future__ import annotations

import math

import numpy as np

from dandelion.benchmarks.grid.cells import REFERENCES, equivalence_path, equivalent
from dandelion.benchmarks.leaderboard import field_rmse
from dandelion.benchmarks.leaderboard.compute import budget_line, compute_section
from dandelion.benchmarks.leaderboard.headline import (
    best_within_spread,
    bold_best,
    columns,
    headline_table,
    horizon_table,
    reference_value,
)
from dandelion.benchmarks.leaderboard.seeds import per_seed_table
from dandelion.benchmarks.leaderboard.stats import OUTLIER_MARGIN, half_width, summary_leads
from dandelion.benchmarks.leaderboard.training_table import training_table
from dandelion.benchmarks.leaderboard.trend import trend_section
from dandelion.benchmarks.leaderboard.verdict import VERDICT, verdict_paragraph
from dandelion.metrics import METRICS, metric_names
from dandelion.reporting.numbers import fmt_mean_std, fmt_value

__all__ = [
    "REFERENCE_MODEL",
    "DIGEST_KEYS",
    "VERDICT",
    "HEADLINE",
    "PROVENANCE",
    "COMMANDS",
    "aggregate",
    "bold_best",
    "best_within_spread",
    "headline_table",
    "render_markdown",
]

#: Headings of the first parts (after the verdict, :data:`VERDICT`) and the last parts of the file.
HEADLINE = "## Headline: VRMSE, next step / 1:20"
PROVENANCE = "## Provenance"
COMMANDS = "## Commands"

REFERENCE_MODEL = "dandelion"


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


def _persistence(refs: dict, part: str, metric: str, field: str = "mean") -> float:
    """The persistence reference's ``metric`` of ``field`` for lead summary ``part`` (:func:`reference_value`)."""
    return reference_value(refs, "persistence", part, metric, field)


def _cell(s: dict, bold: bool, failed: int = 0) -> str:
    """``mean ± half-width of the 95 % t interval`` over seeds (``± n/a`` with one seed, and for a model whose every
    seed failed, centred on its median: :func:`~dandelion.benchmarks.leaderboard.stats.column_stats`), ✗k for k
    failed seeds; ``–`` without a value."""
    if not math.isfinite(s["mean"]):
        return "–"
    txt = fmt_mean_std(s["mean"], half_width(s["std"], s["n"])) + (f" ✗{failed}" if failed else "")
    return f"**{txt}**" if bold else txt


def _table(agg: dict, metric: str, datasets: list[str], models: list[str], expected: dict | None = None) -> list[str]:
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
                    f"*{fmt_value(refs[d][name][part][metric]['mean'])}*"
                    if name in refs[d] and metric in refs[d][name][part]
                    else "–"
                    for d, part in cols
                )
                + " |"
            )
    ranked = columns(agg, datasets, models, metric, expected)  # as the headline: floors, failures, saturation
    for m in models:
        row = [m]
        for d, part in cols:
            if m not in agg[d] or metric not in agg[d][m][part]:
                row.append("–")
                continue
            col = ranked[(d, part)]  # print what the bold ranks: the kept seeds' mean, interval and ✗k
            row.append(_cell(col["stats"][m], m in col["best"], col["stats"][m].get("failed", 0)))
        lines.append("| " + " | ".join(row) + " |")
    return lines


def _field_table(agg: dict, d: str, models: list[str], metric: str = "vrmse", ranked: bool = True) -> list[str]:
    """One row per field (a dataset can have dozens: Held-Suarez has 41), one column per model and lead
    summary; bold as in the other tables (:func:`best_within_spread`), with persistence's score of that field as
    the floor; nothing bold unless ``ranked`` (an incomplete key, :func:`~dandelion.benchmarks.leaderboard.headline.
    completeness`)."""
    variables = [v for v in next(iter(agg[d].values()))["next_step"][metric] if v != "mean"]
    have = [m for m in models if m in agg[d]]
    refs = (agg[d][have[0]].get("references") or {}) if have else {}
    cols = [("next_step", m) for m in have] + [("rollout_mean", m) for m in have]
    head = ["field"] + [f"{m} {'next' if p == 'next_step' else '1:20'}" for p, m in cols]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    for v in variables:
        best = {
            p: best_within_spread({m: agg[d][m][p][metric][v] for m in have}, _persistence(refs, p, metric, v))
            if ranked
            else set()
            for p in ("next_step", "rollout_mean")
        }
        lines.append("| " + " | ".join([v] + [_cell(agg[d][m][p][metric][v], m in best[p]) for p, m in cols]) + " |")
    return lines


#: The keys of a record's data digest: ``data_files_sha256`` (trajectory files and splits,
#: :func:`~dandelion.benchmarks.grid.cells.data_digest`) and ``data_sha256`` (the whole ``checksums.sha256``,
#: ``dataset.yaml`` included), which 9 committed cpu cells and 6 references carry instead: it cannot be converted
#: into the other without their data. Digests are compared within one definition only.
DIGEST_KEYS = ("data_files_sha256", "data_sha256")
_DIGEST_NAMES = {
    "data_files_sha256": "`data_files_sha256`",
    "data_sha256": "the earlier `data_sha256`, which also digested `dataset.yaml`",
}


def _data_digests(
    cells: list[dict], references: dict | None, d: str, key: str = "data_files_sha256"
) -> list[str | None]:
    """The digest ``key`` (:data:`DIGEST_KEYS`) of every cell and reference record of dataset key ``d`` (None: not
    recorded)."""
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
                    f"- `{d}` ({_DIGEST_NAMES[key]}): {', '.join(f'`{x}`' for x in seen)} "
                    f"({sum(x is not None for x in digests)} of {len(digests)} records)"
                )
    if not lines:
        return []
    return [
        "Data versions (`data_files_sha256`: digest of the trajectory files' and splits' checksums; the files are "
        "written without timestamps, so a dataset regenerated with the same configuration has the same digest; "
        "records without a digest predate the recording, and digests of different definitions are not compared):",
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
        mine = [e for e in eq if e["definition"] == key]
        if equivalent(versions, mine):
            worst = max(x for e in mine for x in e["max_relative_difference"].values())
            out += [
                f"Note: the cells and references of {d} were scored on {len(versions)} versions of its data "
                f"({_DIGEST_NAMES[key]} {versions}), regenerated on different machines; recomputed on each, the "
                f"references differ by at most {worst:.1e} relative (`{equivalence_path('.', d).as_posix()}`, made by "
                "`benchmarks/grid/verify_references.py`).",
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


def _warnings(d: str, cells: list[dict], references: dict | None, eq: list[dict]) -> tuple[list[str], list[str]]:
    """``(warnings, notes)`` of dataset ``d``: references or cells made under other protocols, and its data versions
    (:func:`_data_version_notes`)."""
    warn = []
    cell_hashes = {c.get("protocol_hash") for c in cells if c["dataset_key"] == d}
    for name, ref in ((references or {}).get(d) or {}).items():
        ref_hash = ref.get("protocol_hash")
        if ref_hash is not None and cell_hashes != {ref_hash}:
            warn += [
                f"**Warning**: the {name} reference of {d} was made under protocol {ref_hash}, the cells under "
                f"{sorted(map(str, cell_hashes))}; rerun `dandelion-benchmark` to refresh it.",
                "",
            ]
    if len(cell_hashes) > 1:
        warn += [
            f"**Warning**: the cells of {d} were made under {len(cell_hashes)} different protocols "
            f"({sorted(map(str, cell_hashes))}); rerun `dandelion-benchmark` so that they agree before comparing them.",
            "",
        ]
    notes = []
    for line in _data_version_notes(d, cells, references, eq):
        if line:
            (warn if line.startswith("**Warning**") else notes).extend([line, ""])
    return warn, notes


def _paragraphs(lines: list[str]) -> list[str]:
    return [x for line in lines if line for x in (line, "")]


def _protocol_text(cells: list[dict], scale: str) -> str:
    c0 = cells[0]
    t = c0["trainer"]
    tr = c0.get("trainer_resolved") or t
    target = c0.get("target") or tr.get("target", "frame")
    inputs = tr.get("inputs", "frames")
    sees = (
        "the older frames as scaled differences to the newest" if inputs == "differences" else "the normalised frames"
    )
    predicts = (
        "normalised increment (x_t+1 = x_t + s * output; loss in units of the increment)"
        if target == "increment"
        else "next frame"
    )
    ft = t.get("finetune") or {}
    return (
        f"Protocol (scale `{scale}`): {t.get('n_in', 4)} frames in, 1 out; the network sees {sees} and predicts the "
        f"{predicts}; batch {t.get('batch_size')}; pretrain {t.get('epochs')} x {t.get('max_batches_per_epoch')} "
        f"steps, autoregressive fine-tune {ft.get('epochs', 0)} x {t.get('max_batches_per_epoch')} steps of "
        f"{ft.get('n_out', 2)}-step windows; learning rate from the sweep "
        f"{sorted({r['lr'] for c in cells for r in c['sweep']})} by {c0['selection']}. Budgets are counted in "
        "optimiser steps, so the numbers do not depend on the machine's load; wall minutes are reported for "
        f"information only (machine: {c0['machine'].get('cpu')}, {c0['machine'].get('cores')} cores, GPU "
        f"{c0['machine'].get('gpu')}; torch {c0['versions'].get('torch')}, torch-harmonics "
        f"{c0['versions'].get('torch_harmonics')})."
    )


def render_markdown(
    cells: list[dict],
    scale: str,
    plots: dict | None = None,
    report_command: str | None = None,
    references: dict | None = None,
    pending: dict | None = None,
    equivalences: dict | None = None,
    links: list[str] | None = None,
    sections: list[str] | None = None,
    trend_notes: dict | None = None,
    expected: dict | None = None,
    resolution: dict | None = None,
    budget: dict | None = None,
) -> str:
    """The ``leaderboard.md`` text for the cells of one scale, in the order of the module docstring.

    ``references``: dataset key -> {reference name (:data:`~dandelion.benchmarks.grid.cells.REFERENCES`) -> record}
    (reference lines in the tables); ``pending``: label (a dataset key, or a dataset key and model) -> why it has no
    finished cell yet; ``equivalences``: dataset key -> its recorded data-version equivalences
    (:func:`~dandelion.benchmarks.grid.cells.data_equivalences`), which turn the warning about several data versions
    into a note that names the evidence; ``links``: lines (markdown) shown under the headline; ``sections``: lines
    of further sections placed after the per-field tables (the zero-shot transfer); ``trend_notes``: dataset name ->
    caveat of its resolution trend (:func:`~dandelion.benchmarks.leaderboard.trend.trend_section`); ``expected``:
    dataset key -> {model: seeds} the scale trains there (a key missing any of them is not ranked,
    :func:`~dandelion.benchmarks.leaderboard.headline.completeness`; default: what the results hold at each grid);
    ``resolution``: the measured resolution content (:func:`~dandelion.benchmarks.leaderboard.qualify.load_content`;
    None: not measured), which decides the datasets the trend counts; ``budget``: the budget axis
    (:func:`~dandelion.benchmarks.leaderboard.budget_section.budget_section`: its section's lines, verdict sentence and
    provenance)."""
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
    n20 = summary_leads(e for d in datasets for e in agg[d].values())
    cols = columns(agg, datasets, models, expected=expected)
    L = [f"# Dandelion benchmark leaderboard, scale `{scale}`", ""]
    L += verdict_paragraph(agg, datasets, models, cols, trend_notes, resolution, (budget or {}).get("verdict"))
    L += [budget_line(cells), ""]
    L += [
        f"Test split; area-weighted VRMSE averaged over the fields (scalar fields and the u, v components of vector "
        f"fields) and over the seeds that did not fail (✗), lower is better. Each entry: next step (lead 1) / "
        f"1:{n20} (mean over leads "
        f"1..{n20} of autoregressive rollouts); **bold** = the best model of the dataset for that lead summary, and "
        "every model whose difference from it the 95 % Student-t interval over seeds does not separate (a tie; "
        "t_0.975,n-1 with n the fewer seeds of the two), unless worse than persistence (†, never bold); ‡ = not "
        "better than linear AR (still ranked, counted in the verdict); ✗k = k failed seeds, left out: the entry, "
        "its interval and its tie test are the mean, spread and count of the model's other seeds (every seed "
        "failed: their median, no interval); the other models of the column keep their own means (a failed seed: a "
        "rollout that blew up within the window, or an outlier, decided by the margin: more than "
        f"{OUTLIER_MARGIN:.0%} from the other seeds' median, and outside their t prediction interval; the rule was "
        "fixed on 2026-12-07 before any v3 cell, `benchmarks/leaderboard/stats.py`); `h P,V` = a saturated "
        f"1:{n20} column (every model past "
        f"persistence or VRMSE 1 by lead {n20 // 2}), not ranked: the model's skill horizon, the first lead where its "
        f"VRMSE exceeds persistence's (P) and 1 (V), '>{n20}' if never; (incomplete: k of n models) = a dataset "
        "where only k of the n models the scale trains there have a cell for every seed yet: its values are shown, "
        "nothing in it is ranked or bold; – = no cell (a model the scale does not "
        "train at that grid, or a pending cell). *persistence*: the last input frame as every forecast; *linear "
        "AR*: one pointwise linear map fitted on the train split (references, never bold). Seeds per cell: see the "
        "training table. Each seed's values, the intervals, the Well's unweighted VRMSE and the per-field values "
        "follow; how the numbers were made, at the end.",
        "",
        HEADLINE,
        "",
        *headline_table(agg, datasets, models, expected=expected),
        "",
    ]
    L += horizon_table(agg, cols)
    warnings, notes = [], []
    for d in datasets:
        w, n = _warnings(d, cells, references, (equivalences or {}).get(d) or [])
        warnings += w
        notes += n
    L += warnings
    if pending:
        L += ["Cells of the scale without results yet (pending; a '–' in the tables):", ""]
        L += [f"- `{d}`: {why}" for d, why in pending.items()]
        L.append("")
    L += _paragraphs(links or [])
    L += trend_section(
        agg, plots, trend_notes, resolution
    )  # the resolution trend (datasets at two or more grids; trend.py)
    L += (budget or {}).get("lines") or []  # the same datasets at a multiple of the step budget (budget_section.py)
    L += compute_section(agg, datasets, plots)  # equal compute (cells that recorded their cost; compute.py)
    L += per_seed_table(agg, datasets, models, cols)  # every seed's headline values (seeds.py)
    L += [
        'Below: mean ± the half-width of the 95 % Student-t interval over seeds (t_0.975,n-1 s / sqrt(n); "± n/a" '
        "with one seed), over the seeds that did not fail (✗k: k failed seeds left out, as in the headline); "
        "**bold** as in the headline (the t tie rule; a saturated 1:20 column of the area-weighted VRMSE not "
        "ranked); the per-field tables rank the means over all seeds.",
        "",
    ]
    if references:
        L += [
            "*persistence (reference)*: the last input frame as every forecast (no training), same forecasts and "
            "metrics. *linear AR (reference)*: one pointwise linear map of the protocol's inputs to the increment, the "
            "same at every grid point, fitted by area-weighted least squares on the train split "
            "(`benchmarks/grid/references.py`).",
            "",
        ]
    for metric in metric_names(table=True):  # one table per registered metric the cells hold
        if any(metric in e["next_step"] for d in datasets for e in agg[d].values()):
            L += [f"## {METRICS[metric].title}", ""] + _table(agg, metric, datasets, models, expected) + [""]
    L += ["## Per field, area-weighted VRMSE", "", field_rmse.NOTE, ""]
    for d in datasets:
        L += [f"### {d}", ""] + _field_table(agg, d, models, ranked=not cols[(d, "next_step")]["incomplete"]) + [""]
        rmse = field_rmse.field_rmse_table(agg, d, models)  # ours beside WeatherBench 2's (field_rmse.py)
        L += [field_rmse.CAPTION, "", *rmse, ""] if rmse else []
    L += list(sections or [])
    L += training_table(agg, datasets, models)
    if plots:
        L += ["## Plots", ""]
        for k, p in plots.items():
            name = str(p).replace("\\", "/").rsplit("/", 1)[-1]
            L += [f"- `{name}`: {k.replace('_', ' ')}", f"  ![{k}]({name})"]
        L.append("")
    L += [PROVENANCE, ""]
    elsewhere = (budget or {}).get("provenance")  # the budget section's other budgets (budget_section.py)
    L += [
        "Every number above comes from the cell files `<dataset>/<model>/seed<k>.json` beside this file (and the "
        "reference files `<dataset>/<reference>.json`), made by the commands below"
        + (f", except where said: {elsewhere}" if elsewhere else "")
        + "; nothing is recomputed here.",
        "",
    ]
    reduced = sorted({d for d in datasets if agg[d][next(iter(agg[d]))]["reduced"]})
    if reduced:
        L += [
            "Reduced datasets (resolved more coarsely than the dataset card's reference: a solver band limit, or "
            "finite-volume cells, below the card's; some also hold a part of the card's sweep, "
            "docs/datasets/README.md, 'Benchmark v2 sizes'): "
            f"{', '.join(reduced)}. They benchmark the models at small size; they are not the paper's numbers.",
            "",
        ]
    L += [_protocol_text(cells, scale), ""]
    L += _data_versions(cells, references, datasets)
    L += notes
    L += [COMMANDS, "", "Made by:", "", "```"]
    L += sorted({c["commands"]["benchmark"] for c in cells})
    L.append(report_command or f"dandelion-report target=leaderboard scale={scale}")
    L += [
        "```",
        "",
        "<details><summary>The training and rollout commands of every cell (equivalent stand-alone form)</summary>",
        "",
    ]
    for c in cells:
        L.append(f"**{c['dataset_key']} / {c['model']} / seed {c['seed']}** (chosen lr {c['lr']:g})")
        L += ["```", *c["commands"]["train"], c["commands"]["rollout"], "```"]
    L += ["", "</details>", ""]
    return "\n".join(L)
