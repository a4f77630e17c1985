"""``dandelion-report``: figures of rollouts (maps, error against lead time, spectra).

The hydra job around :mod:`dandelion.reporting.figures` (configs/report.yaml).
"""

from __future__ import annotations

import json
from importlib.metadata import entry_points
from pathlib import Path

import xarray as xr
from omegaconf import OmegaConf

from dandelion.cli.common import UsageError, check_choice, require, run
from dandelion.reporting.figures import (
    _load_metrics,
    plot_error_vs_lead,
    plot_maps,
    plot_spectra,
)
from dandelion.runtime import DamagedFileError

#: Entry-point group through which an installed package adds a ``target=`` to ``dandelion-report`` (the benchmark
#: protocol adds ``leaderboard``, :func:`dandelion.benchmarks.leaderboard.render.leaderboard`), so that the job
#: needs no import of the package that renders it.
TARGET_GROUP = "dandelion.report_targets"


def report_targets() -> dict:
    """Targets of ``dandelion-report`` other than ``rollouts``: name -> entry point (group :data:`TARGET_GROUP`)."""
    return {ep.name: ep for ep in entry_points(group=TARGET_GROUP)}


def report(cfg) -> dict:
    """The ``dandelion-report`` job: plots for one or more rollout folders.

    Config keys (configs/report.yaml): ``rollouts`` (list of rollout output folders, or a mapping
    label -> folder), ``output_dir``, ``metric``, ``map_leads``.

    Returns
    -------
    dict name -> path of each PNG written.
    """
    target = str(cfg.get("target", "rollouts"))
    if target != "rollouts":
        return report_targets()[target].load()(cfg)
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
            paths[f"maps_{safe}"] = plot_maps(
                sample, out / f"maps_{safe}.png", leads=tuple(cfg.get("map_leads", (1, 5, 20)))
            )
    for k, v in paths.items():
        print(f"{k}: {v}")
    return {k: str(v) for k, v in paths.items()}


def check(cfg, overrides=()) -> None:
    """What ``dandelion-report`` checks before plotting: the target, and that every rollout folder holds a
    ``metrics.json`` (target=rollouts) or that the results folder exists (target=leaderboard).
    Raises :class:`dandelion.cli.common.UsageError`."""
    target = check_choice(cfg.get("target", "rollouts"), ("rollouts", *sorted(report_targets())), "target")
    if target == "leaderboard":
        results = cfg.get("results_dir") or OmegaConf.select(cfg, "scale.results_dir")
        if not results or not Path(str(results)).is_dir():
            raise UsageError(
                f"results_dir={results} does not exist: run dandelion-benchmark first, or pass results_dir=DIR"
            )
        return
    rollouts = require(cfg, "rollouts", "pass rollouts=[DIR,...] (folders written by dandelion-rollout)")
    folders = (
        [rollouts]
        if isinstance(rollouts, str)
        else list(rollouts.values())
        if hasattr(rollouts, "values")
        else list(rollouts)
    )
    if not folders:
        raise UsageError("rollouts=[] is empty: pass rollouts=[DIR,...] (folders written by dandelion-rollout)")
    for d in folders:
        if not (Path(str(d)) / "metrics.json").is_file():
            what = "does not exist" if not Path(str(d)).exists() else "holds no metrics.json"
            raise UsageError(
                f"rollout folder {d} {what}: pass the output_dir of a dandelion-rollout run "
                "(by default RUN_DIR/rollout_test)"
            )
        _check_readable(Path(str(d)))


def _check_readable(folder: Path) -> None:
    """Refuse a rollout folder whose ``metrics.json`` or ``sample_forecast.nc`` cannot be read, naming the file.

    Raises :class:`dandelion.runtime.DamagedFileError` (one line, exit status 2)."""
    fix = "rerun the dandelion-rollout that wrote the folder (with overwrite=true)"
    metrics = folder / "metrics.json"
    try:
        json.loads(metrics.read_text())
    except (ValueError, UnicodeDecodeError) as err:
        raise DamagedFileError(f"{metrics} is not readable JSON (truncated or corrupt: {err}): {fix}") from None
    sample = folder / "sample_forecast.nc"
    if sample.exists():
        try:
            xr.open_dataset(sample).close()
        except Exception as err:  # netCDF4/h5netcdf raise several types for a damaged file
            raise DamagedFileError(
                f"{sample} is not a readable netCDF file (truncated or corrupt: {type(err).__name__}): {fix}"
            ) from None


def main(argv: list[str] | None = None) -> None:
    """``dandelion-report 'rollouts=[DIR,...]' [output_dir=DIR]`` or ``target=leaderboard scale=cpu`` (``--help``)."""
    run("dandelion-report", "report", report, check=check, argv=argv)


if __name__ == "__main__":
    main()
