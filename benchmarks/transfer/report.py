"""The leaderboard's "Zero-shot resolution transfer" section: transfer JSONs -> markdown table and plot.

Reads ``results_dir/transfer/<fine key>/<model>/seed<k>.json`` (written by ``dandelion-transfer``,
:mod:`dandelion.benchmarks.transfer.zero_shot`) and the cells they come from
(``results_dir/<dataset>/<model>/seed<k>.json``, the trained-resolution column). Per coarse dataset: a table, model x
{trained grid, each finer grid at the coarse band limit and at its own band limit}, next-step and 1:20 VRMSE
(area-weighted, mean over fields) as mean ± sample std over seeds; models that cannot run at another grid are listed
with the reason; a plot of error against resolution (``transfer_<dataset>.png``), the trained resolution marked. Nothing
is recomputed here.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from dandelion.reporting.numbers import fmt_mean_std, fmt_value
from dandelion.reporting.plotting import plain_log_ticks, pyplot, save_figure

__all__ = ["TRANSFER_SCHEMA", "VARIANTS", "load_transfers", "transfer_section", "plot_transfer", "HEADING"]

#: Schema tag of a transfer result JSON (written by :mod:`dandelion.benchmarks.transfer.zero_shot`).
TRANSFER_SCHEMA = "dandelion-transfer/1"
#: The two test sets made at every finer grid: the training data's band limit, and the finer grid's own.
VARIANTS = ("coarse_band", "fine_band")

#: The section heading in leaderboard.md.
HEADING = "## Zero-shot resolution transfer"
_PARTS = (("next_step", "next step"), ("rollout_mean", "1:{n}"))  # n: min(20, the cell's rollout steps)
_LABEL = {"coarse_band": "coarse band", "fine_band": "fine band"}
_FV_LABEL = {"coarse_band": "coarse cells", "fine_band": "fine cells"}  # finite volume: the solver's cells, not a band


def _label(variant: str, recs: list[dict]) -> str:
    fv = bool(recs) and not recs[0].get("band_limited", True)
    return (_FV_LABEL if fv else _LABEL).get(variant, variant)


def load_transfers(results_dir) -> list[dict]:
    """Every transfer JSON under ``results_dir/transfer`` (empty list when there is none)."""
    out = []
    for p in sorted((Path(results_dir) / "transfer").glob("*/*/seed*.json")):
        try:
            rec = json.loads(p.read_text())
        except json.JSONDecodeError:
            continue
        if rec.get("schema") == TRANSFER_SCHEMA:
            out.append(rec)
    return out


def _stats(values) -> tuple[float, float, int]:
    v = np.asarray([x for x in values if x is not None and math.isfinite(x)], dtype=float)
    if v.size == 0:
        return math.nan, math.nan, 0
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else math.nan, int(v.size)


def _fmt(values, seeds: int | None = None) -> str:
    """``mean ± std`` of the finite values; ``seeds``: the model's number of cells, named when fewer were scored."""
    m, s, n = _stats(values)
    if n == 0:
        return "–"
    return (
        fmt_mean_std(m, s)
        + ("" if n == len(values) else f" ({len(values) - n} non-finite)")
        + ("" if seeds is None or len(values) >= seeds else f" ({len(values)} of {seeds} seeds)")
    )


def _persistence(results_dir, key: str, recs: list[dict], cols) -> list[list[float] | None]:
    """Per column, ``{part: value}`` of persistence (the benchmark's reference at the trained grid, the transfer
    job's on each fine test set), or None where it is missing."""
    out = []
    for _label, variant, nlat in cols:
        if variant == "trained":
            p = Path(results_dir) / key / "persistence.json"
        else:
            fk = next((r["fine_key"] for r in recs if r["variant"] == variant and r["nlat"] == nlat), None)
            p = None if fk is None else Path(results_dir) / "transfer" / fk / "persistence.json"
        try:
            rec = json.loads(p.read_text())
            out.append({part: rec[part]["vrmse"]["mean"] for part, _ in _PARTS})
        except (AttributeError, OSError, KeyError, json.JSONDecodeError):
            out.append(None)
    return out


def _parts(cell: dict) -> list[tuple[str, str]]:
    n = min(20, int(cell["evaluation"]["n_steps"]))
    return [(part, label.format(n=n)) for part, label in _PARTS]


def _columns(recs: list[dict], cell: dict) -> list[tuple[str, str, int]]:
    """``(column label, variant, nlat)``, the trained grid first, then by grid and variant."""
    cols = {(r["nlat"], r["nlon"], r["variant"]) for r in recs}
    out = [(f"{cell['nlat']}x{cell['nlon']} (trained)", "trained", int(cell["nlat"]))]
    for nlat, nlon, v in sorted(cols, key=lambda c: (c[0], VARIANTS.index(c[2]) if c[2] in VARIANTS else 9)):
        r = next(r for r in recs if (r["nlat"], r["nlon"], r["variant"]) == (nlat, nlon, v))
        res = f"l<{r['lmax']}" if r.get("band_limited", True) else f"solver {r.get('solver_resolution')}"
        out.append((f"{nlat}x{nlon} {_label(v, recs)} ({res})", v, int(nlat)))
    return out


def _values(recs, cells, model, col, part) -> list[float]:
    label, variant, nlat = col
    if variant == "trained":
        return [c[part]["vrmse"]["mean"] for c in cells if c["model"] == model]
    return [
        r[part]["vrmse"]["mean"]
        for r in recs
        if r["model"] == model and r["variant"] == variant and r["nlat"] == nlat and r["transferable"]
    ]


def transfer_section(results_dir, cells: list[dict], plots: bool = True) -> tuple[list[str], dict]:
    """The markdown lines of the section (none when there is no transfer JSON) and ``{name: png path}``.

    ``cells``: the benchmark's cell records (:func:`dandelion.benchmarks.grid.cells.load_cells`), for the
    trained-resolution column.
    """
    recs = load_transfers(results_dir)
    if not recs:
        return [], {}
    L = [
        HEADING,
        "",
        "Models trained at the benchmark grid, evaluated WITHOUT retraining on test data made at finer grids by the "
        "same solver from the same initial states (the same test trajectory ids), normalised with the checkpoint's own "
        "statistics. *coarse band*: the solver at the training data's band limit, the fields stored at the training "
        "data's band limit (the same fields, sampled finer: discretisation consistency); *fine band*: the band limit "
        "the finer grid supports (new small scales), diffusion held fixed in physical units. Finite-volume datasets "
        "(no band limit): *coarse cells*: the solver on the training data's cells, its cell means remapped "
        "conservatively onto the finer grid (the same solver run, stored finer); *fine cells*: the solver's cells "
        "refined with the grid. VRMSE (area-weighted, mean over fields), mean ± sample std over seeds. Protocol and "
        "each model's treatment: docs/datasets/README.md (Zero-shot resolution transfer). Made by `dandelion-transfer "
        "scale=<scale>`.",
        "",
    ]
    pngs = {}
    for key in sorted({r["dataset_key"] for r in recs}):
        rs = [r for r in recs if r["dataset_key"] == key]
        cs = [c for c in cells if c["dataset_key"] == key]
        if not cs:
            continue
        done = _load_retrained(results_dir, key)
        cs = _own_trained_scores(done, rs, cs)
        cols = _columns(rs, cs[0])
        models = list(dict.fromkeys([c["model"] for c in cs]))
        L += [
            f"### {key}",
            "",
            "| model | lead | " + " | ".join(c[0] for c in cols) + " |",
            "|---|---|" + "---:|" * len(cols),
        ]
        refused = {}
        ref = _persistence(results_dir, key, rs, cols)
        if any(ref):
            for part, lead in _parts(cs[0]):
                L.append(
                    f"| *persistence (reference)* | {lead} | "
                    + " | ".join(f"*{fmt_value(r[part])}*" if r else "–" for r in ref)
                    + " |"
                )
        for m in models:
            no = [r for r in rs if r["model"] == m and not r["transferable"]]
            if no:
                refused[m] = no[0]["reason"]
            seeds = sum(c["model"] == m for c in cs)
            for part, lead in _parts(cs[0]):
                L.append(
                    f"| {m} | {lead} | "
                    + " | ".join(
                        _fmt(_values(rs, cs, m, col, part), seeds)
                        if col[1] == "trained" or m not in refused
                        else "not transferable"
                        for col in cols
                    )
                    + " |"
                )
        L.append("")
        treatments = {r["model"]: r["treatment"] for r in rs if r["transferable"]}
        for m in models:
            if m in refused:
                L.append(f"- {m}: not transferable: {refused[m]}")
            elif m in treatments:
                L.append(f"- {m}: {treatments[m]}")
        L.append("")
        retrained = _retrained_note(done, rs)
        L += [retrained, ""] if retrained else []
        L += ["| test set | grid | solver | stored lmax | generation wall min (CPU min) |", "|---|---|---:|---:|---:|"]
        for fk in sorted(
            {r["fine_key"] for r in rs}, key=lambda k: next((r["nlat"], r["variant"]) for r in rs if r["fine_key"] == k)
        ):
            r = next(r for r in rs if r["fine_key"] == fk)
            g = r.get("generation") or {}
            cost = f"{g['wall_s'] / 60:.1f} ({g['cpu_s'] / 60:.1f})" if g.get("wall_s") else "–"
            solver = r.get("solver_resolution") or f"lmax {r.get('solver_lmax')}"
            L.append(
                f"| {fk} | {r['nlat']}x{r['nlon']} | {solver} | "
                f"{r.get('lmax') if r.get('lmax') is not None else '–'} | {cost} |"
            )
        L.append("")
        if plots:
            p = plot_transfer(rs, cs, cols, models, Path(results_dir) / f"transfer_{key}.png", key)
            pngs[f"transfer_{key}"] = str(p)
            L += [f"![transfer {key}]({p.name})", ""]
    return L, pngs


def _load_retrained(results_dir, key: str) -> list[dict]:
    """The retrain records of dataset ``key`` (``results_dir/transfer/retrained/<key>/<model>/seed<k>.json``)."""
    out = []
    for p in sorted((Path(results_dir) / "transfer" / "retrained" / key).glob("*/seed*.json")):
        try:
            out.append(json.loads(p.read_text()))
        except json.JSONDecodeError:
            continue
    return out


def _by_seed(recs: list[dict]) -> dict[tuple[str, int], list[dict]]:
    """Transfer results grouped by (model, seed)."""
    out: dict[tuple[str, int], list[dict]] = {}
    for r in recs:
        out.setdefault((r["model"], int(r["seed"])), []).append(r)
    return out


def _from(done: dict, rec: dict) -> bool:
    """Whether transfer result ``rec`` was made from the checkpoint retrain record ``done`` describes (same SHA-256)."""
    return rec.get("checkpoint_sha256") is not None and rec.get("checkpoint_sha256") == done.get("checkpoint_sha256")


def _all_from(done: dict, recs: list[dict]) -> bool:
    """Whether every transferable result of ``recs`` (one model and seed) comes from the retrained checkpoint."""
    recs = [r for r in recs if r.get("transferable")]
    return bool(recs) and all(_from(done, r) for r in recs)


def _own_trained_scores(records: list[dict], recs: list[dict], cells: list[dict]) -> list[dict]:
    """``cells`` with the trained-grid scores of each (model, seed) whose transfer results ``recs`` all come from a
    retrained checkpoint replaced by that checkpoint's own (its retrain record in ``records``), so that a row compares
    one model with itself."""
    done, grouped = {(d["model"], int(d["seed"])): d for d in records}, _by_seed(recs)
    out = []
    for c in cells:
        d = done.get((c["model"], int(c["seed"])))
        if d is None or not _all_from(d, grouped.get((c["model"], int(c["seed"])), [])):
            out.append(c)
            continue
        out.append(
            {
                **c,
                **{
                    part: {**c[part], "vrmse": {**c[part]["vrmse"], "mean": d["retrained"][part]}} for part, _ in _PARTS
                },
            }
        )
    return out


def _retrained_note(done: list[dict], recs: list[dict]) -> str:
    """A line on the checkpoints ``dandelion-transfer retrain_missing=true`` retrained for a dataset (their records
    ``done``; the cells' own were not on the machine): which, how far their trained-grid scores are from the cells',
    and how many of the transfer results ``recs`` come from them (by checkpoint SHA-256); '' if none."""
    if not done:
        return ""

    def dev(part):
        v = [abs(r["retrained"][part] / r["cell"][part] - 1.0) for r in done if r["cell"].get(part)]
        v = [x for x in v if math.isfinite(x)]
        return f"{100 * max(v):.1f} %" if v else "n/a"

    by_cell = {(d["model"], int(d["seed"])): d for d in done}
    mine = [r for r in recs if (r["model"], int(r["seed"])) in by_cell and r.get("transferable")]
    n_from = sum(_from(by_cell[(r["model"], int(r["seed"]))], r) for r in mine)
    grouped = _by_seed(mine)
    mixed = [f"{m} seed {k}" for (m, k), d in by_cell.items() if not _all_from(d, grouped.get((m, k), []))]
    n = min(20, int(done[0].get("n_steps", 20)))
    who = ", ".join(f"{d['model']} seed {d['seed']}" for d in done)
    return (
        "Retrained checkpoints (the cells' own were not on the machine: `retrain_missing=true`, the cell's seed, "
        f"rate and training protocol): {who}. "
        f"At the trained grid their VRMSE differs from the cell's by at most {dev('next_step')} (next step) and "
        f"{dev('rollout_mean')} (1:{n}); {n_from} of these seeds' {len(mine)} transfer results come from the "
        "retrained models (by checkpoint SHA-256, `transfer/retrained/`), and where all of a seed's do, the "
        "trained-grid column shows the retrained model's own score (the cells' are in the tables above)"
        + (
            f"; not for {', '.join(mixed)}, whose results come from another checkpoint in part or in whole"
            if mixed
            else ""
        )
        + "."
    )


def plot_transfer(recs, cells, cols, models, path, title: str) -> Path:
    """1:20 VRMSE (left) and next-step VRMSE (right) against grid, one colour per model; fine band solid,
    coarse band dashed, from the trained point (marked by a vertical line and a star)."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.8))
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.2, top=0.88, wspace=0.25)
    trained = cols[0][2]
    grids = sorted({c[2] for c in cols})
    for ax, (part, lead) in zip(axes, reversed(_parts(cells[0]))):
        for i, m in enumerate(models):
            t = _stats(_values(recs, cells, m, cols[0], part))[0]
            ax.plot([trained], [t], marker="*", ms=10, color=f"C{i}", ls="none")
            for variant, ls in (("fine_band", "-"), ("coarse_band", "--")):
                pts = [(c[2], _stats(_values(recs, cells, m, c, part))) for c in cols if c[1] == variant]
                pts = [(x, s) for x, s in pts if s[2] > 0]
                if not pts:
                    continue
                x = [trained] + [p[0] for p in pts]
                y = [t] + [p[1][0] for p in pts]
                e = [0.0] + [p[1][1] if math.isfinite(p[1][1]) else 0.0 for p in pts]
                ax.errorbar(
                    x,
                    y,
                    yerr=e,
                    ls=ls,
                    marker="o",
                    ms=4,
                    capsize=3,
                    color=f"C{i}",
                    label=f"{m}, {_label(variant, recs)}",
                )
        ax.axvline(trained, color="0.5", lw=0.8, ls=":")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        plain_log_ticks(ax)
        ax.set_xticks(grids)
        ax.set_xticklabels([f"{n}x{2 * n}" + ("\n(trained)" if n == trained else "") for n in grids])
        ax.set_xlabel("grid (nlat x nlon)")
        ax.set_ylabel(f"VRMSE {lead} (area-weighted)")
        ax.grid(alpha=0.3, which="both")
    if axes[0].get_legend_handles_labels()[0]:  # (a name starting with "_" is not shown by matplotlib)
        axes[0].legend(fontsize=6, ncol=2)
    fig.suptitle(
        f"{title}: zero-shot transfer (solid: {_label('fine_band', recs)}, dashed: {_label('coarse_band', recs)})",
        fontsize=9,
    )
    return save_figure(fig, path)
