"""Plots of rollouts (``dandelion-report``): maps, error versus lead time, power spectra.

Inputs are what ``dandelion-rollout`` writes in its output folder: ``metrics.json`` (per-lead metrics
and spectra, :func:`dandelion.benchmarks.rollout.rollout`) and ``sample_forecast.nc`` (one forecast
with its truth, CF layout of :mod:`dandelion.benchmarks.export`). Several rollout folders (one per
model) give one error-versus-lead figure with a line per model.

All figures are PNG files written atomically (temporary name, then rename).
"""

from __future__ import annotations

import json
from pathlib import Path

import hydra
import numpy as np
import xarray as xr
from matplotlib.ticker import ScalarFormatter

from dandelion.metrics import METRICS

from .leaderboard import leaderboard
from .plotting import pyplot, save_figure

__all__ = ["plot_maps", "plot_error_vs_lead", "plot_spectra", "report", "main"]


def _panel_grid(plt, n: int):
    """A figure with ``n`` panels in rows of at most 3 (unused cells hidden); returns ``(fig, axes)``."""
    ncols = min(3, n)
    nrows = -(-n // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols, 3.6 * nrows), squeeze=False)
    fig.subplots_adjust(left=0.1, right=0.97, bottom=0.15 / nrows, top=1 - 0.1 / nrows, hspace=0.4, wspace=0.3)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, axes


def _lead_label(lead) -> str:
    if isinstance(lead, np.timedelta64):
        hours = lead / np.timedelta64(1, "h")
        return f"+{hours:.3g} h" if hours < 48 else f"+{hours / 24:.3g} d"
    return f"+{float(lead):g}"


def plot_maps(sample, path, variables=None, leads=(1, 5, 20), trajectory: int = 0, init: int = 0, level: float = 500.0) -> Path:
    """Maps of truth, prediction and error at chosen leads, one row per (variable, lead).

    Parameters
    ----------
    sample : xarray.Dataset or path
        An exported forecast holding ``<var>`` and ``<var>_truth`` (``include_truth``), dims
        ``([trajectory,] init_time, lead_time, lat, lon)``.
    path : output PNG path.
    variables : list of variable names (default all with a ``_truth`` partner).
    leads : lead steps (1-based) to show; steps beyond the forecast are skipped.
    trajectory, init : which forecast of the file to show (index).
    level : for variables with a ``level`` axis (hPa), the map shows the level nearest to this one.

    Returns
    -------
    Path of the PNG.
    """
    plt = pyplot()
    ds = xr.open_dataset(sample) if not isinstance(sample, xr.Dataset) else sample
    if variables is None:
        variables = [v for v in ds.data_vars if not v.endswith("_truth") and f"{v}_truth" in ds]
    if not variables:
        raise ValueError("the forecast file has no '<var>_truth' variables: export it with include_truth=true")
    sel = {"init_time": init}
    if "trajectory" in ds.dims:
        sel["trajectory"] = trajectory
    n_lead = ds.sizes["lead_time"]
    leads = [k for k in leads if 1 <= k <= n_lead] or [1]
    rows = [(v, k) for v in variables for k in leads]
    fig, axes = plt.subplots(len(rows), 3, figsize=(14, 2.7 * len(rows) + 0.4), squeeze=False)
    fig.subplots_adjust(left=0.06, right=0.98, bottom=0.35 / (2.7 * len(rows) + 0.4) + 0.04, top=1 - 0.3 / (2.7 * len(rows) + 0.4),
                        hspace=0.45, wspace=0.18)
    lon, lat = ds.lon.values, ds.lat.values
    for r, (var, k) in enumerate(rows):
        lsel, ltag = {}, ""
        if "level" in ds[var].dims:  # leveled data: one level per map
            i = int(np.argmin(np.abs(ds.level.values - float(level))))
            lsel, ltag = {"level": i}, f" {float(ds.level.values[i]):g} {ds.level.attrs.get('units', '')}".rstrip()
        pred = ds[var].isel(**sel, **lsel, lead_time=k - 1).values
        true = ds[f"{var}_truth"].isel(**sel, **lsel, lead_time=k - 1).values
        err = pred - true
        vmin, vmax = float(np.nanmin(true)), float(np.nanmax(true))
        emax = float(np.nanmax(np.abs(err))) or 1.0
        units = ds[var].attrs.get("units", "")
        label = _lead_label(ds.lead_time.values[k - 1])
        for c, (data, title, kw) in enumerate([
            (true, "truth", dict(cmap="viridis", vmin=vmin, vmax=vmax)),
            (pred, "prediction", dict(cmap="viridis", vmin=vmin, vmax=vmax)),
            (err, "prediction - truth", dict(cmap="RdBu_r", vmin=-emax, vmax=emax)),
        ]):
            ax = axes[r, c]
            im = ax.pcolormesh(lon, lat, data, shading="nearest", **kw)
            ax.set_title(f"{var}{ltag} {title}, lead {label}", fontsize=9)
            ax.set_xlim(0, 360)
            ax.set_ylim(-90, 90)
            ax.set_xticks([0, 90, 180, 270, 360])
            ax.set_yticks([-90, -45, 0, 45, 90])
            if c == 0:
                ax.set_ylabel("latitude [deg N]")
            if r == len(rows) - 1:
                ax.set_xlabel("longitude [deg E]")
            fig.colorbar(im, ax=ax, shrink=0.9, label=units)
    return save_figure(fig, path)


def _load_metrics(m):
    if isinstance(m, dict):
        return m
    p = Path(m)
    if p.is_dir():
        p = p / "metrics.json"
    if not p.exists():
        raise FileNotFoundError(f"{p} not found: run dandelion-rollout first (it writes metrics.json in its output folder)")
    return json.loads(p.read_text())


def plot_error_vs_lead(results: dict, path, metric: str = "vrmse", variables=None) -> Path:
    """Error versus lead time, one panel per variable, one line per model.

    Parameters
    ----------
    results : dict model label -> metrics dict (``metrics.json`` content) or its path/folder.
    path : output PNG path.
    metric : a metric of the rollout's ``metrics.json`` (a name registered in :data:`dandelion.metrics.METRICS`).
    variables : variables to show (default: those of the first model).

    Raises
    ------
    ValueError
        If the first model's metrics hold no ``metric`` (the message lists those they hold).
    """
    plt = pyplot()
    results = {k: _load_metrics(v) for k, v in results.items()}
    first = next(iter(results.values()))
    if metric not in first["metrics"]:
        raise ValueError(f"metric {metric!r} not in the rollout metrics {sorted(first['metrics'])}")
    variables = variables or list(first["metrics"][metric])
    spec = METRICS.get(metric)  # None for a metric of an older metrics.json that is no longer registered
    fig, axes = _panel_grid(plt, len(variables))
    for ax, var in zip(axes.flat, variables):
        for label, res in results.items():
            vals = res["metrics"][metric].get(var)
            if vals is None:
                continue
            steps = np.arange(1, len(vals) + 1)
            x = np.asarray(res.get("lead_time_hours") or steps, dtype=float)
            ax.plot(x, vals, marker="o", ms=3, label=label)
        units = first.get("units", {}).get(var, "") if spec is not None and spec.units else ""
        ax.set_title(f"{metric}, " + ("mean over the fields" if var == "mean" else var) + (f" [{units}]" if units else ""), fontsize=10)
        ax.set_xlabel("lead time [h]" if first.get("lead_time_hours") else "lead step")
        ax.grid(alpha=0.3)
        if spec is not None and spec.reference is not None:
            ax.axhline(spec.reference, color="0.5", lw=0.8, ls="--")
    axes[0, 0].legend(fontsize=8)
    return save_figure(fig, path)


def plot_spectra(result, path, variables=None) -> Path:
    """Angular power spectra of truth and prediction at the rollout's spectrum leads.

    Parameters
    ----------
    result : metrics dict (``metrics.json``) or its path/folder, with a ``spectra`` entry.
    path : output PNG path.
    """
    plt = pyplot()
    res = _load_metrics(result)
    spec = res.get("spectra")
    if not spec:
        raise ValueError("the rollout metrics hold no spectra: run dandelion-rollout with spectra_leads set")
    variables = variables or list(spec["true"])
    fig, axes = _panel_grid(plt, len(variables))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, var in zip(axes.flat, variables):
        top = max(float(np.max(spec["true"][var][i][1:] or [1.0])) for i in range(len(spec["leads"])))
        for i, lead in enumerate(spec["leads"]):
            c = colors[i % len(colors)]
            t = np.asarray(spec["true"][var][i])
            p = np.asarray(spec["pred"][var][i])
            deg = np.arange(len(t))
            ax.loglog(deg[1:], np.maximum(t[1:], 1e-300), color=c, ls="-", label=f"truth, step {lead}")
            ax.loglog(deg[1:], np.maximum(p[1:], 1e-300), color=c, ls="--", label=f"prediction, step {lead}")
        ax.set_ylim(max(top * 1e-10, 1e-300), top * 3)
        n_deg = len(spec["true"][var][0])
        ax.set_xticks([t for t in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000) if t < n_deg])
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(plt.NullFormatter())
        ax.set_title(f"power spectrum of {var}", fontsize=10)
        ax.set_xlabel("degree l")
        ax.set_ylabel("P(l)")
        ax.grid(alpha=0.3, which="both")
    axes[0, 0].legend(fontsize=7)
    return save_figure(fig, path)


def report(cfg) -> dict:
    """The ``dandelion-report`` job: plots for one or more rollout folders.

    Config keys (configs/report.yaml): ``rollouts`` (list of rollout output folders, or a mapping
    label -> folder), ``output_dir``, ``metric``, ``map_leads``.

    Returns
    -------
    dict name -> path of each PNG written.
    """
    if cfg.get("target", "rollouts") == "leaderboard":  # the benchmark leaderboard (benchmarks/leaderboard.py)
        return leaderboard(cfg)
    rollouts = cfg.rollouts
    if isinstance(rollouts, str):
        rollouts = [rollouts]
    if hasattr(rollouts, "items"):
        runs = {str(k): Path(v) for k, v in rollouts.items()}
    else:
        runs = {}
        for r in rollouts:
            label = _load_metrics(r).get("model", Path(r).name)
            runs[label if label not in runs else f"{label} ({Path(r).name})"] = Path(r)
    if not runs:
        raise ValueError("no rollout folders given: pass rollouts=[DIR, ...] (folders written by dandelion-rollout)")
    out = Path(cfg.get("output_dir") or next(iter(runs.values())))
    paths = {}
    metric = cfg.get("metric", "vrmse")
    paths["error_vs_lead"] = plot_error_vs_lead(runs, out / f"{metric}_vs_lead.png", metric=metric)
    for label, d in runs.items():
        safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in label)
        if _load_metrics(d).get("spectra"):
            paths[f"spectra_{safe}"] = plot_spectra(d, out / f"spectra_{safe}.png")
        sample = d / "sample_forecast.nc"
        if sample.exists():
            paths[f"maps_{safe}"] = plot_maps(sample, out / f"maps_{safe}.png", leads=tuple(cfg.get("map_leads", (1, 5, 20))))
    for k, v in paths.items():
        print(f"{k}: {v}")
    return {k: str(v) for k, v in paths.items()}


def main():  # pragma: no cover - thin hydra wrapper
    @hydra.main(config_path="pkg://dandelion.configs", config_name="report", version_base="1.3")
    def _main(cfg):
        report(cfg)

    _main()
