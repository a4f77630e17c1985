"""``dandelion-rollout``: roll a checkpoint out on a dataset split, score every metric per lead, write plots.

The hydra job around :func:`dandelion.evaluation.scoring.evaluate` (configs/rollout.yaml).
"""

from __future__ import annotations

from pathlib import Path

from dandelion.checkpoint import load_model
from dandelion.cli.common import (
    UsageError,
    check_checkpoint,
    check_dataset_folder,
    check_device,
    check_positive,
    explicit_choice,
    require,
    run,
)
from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.evaluation.definitions import DEFINITIONS, check_definitions
from dandelion.evaluation.scoring import (
    evaluate,
    write_results,
)
from dandelion.export.forecasts import write_forecast
from dandelion.registry import import_plugins
from dandelion.reporting import figures as report
from dandelion.runtime import check_writable


def rollout(cfg) -> dict:
    """The ``dandelion-rollout`` job (configs/rollout.yaml).

    Returns
    -------
    dict with ``results`` (metrics.json content), ``output_dir`` and ``paths`` of every file written.

    Raises
    ------
    ValueError
        If the checkpoint's grid, resolution or fields do not match the data (unless
        ``allow_resolution_change`` for a resolution-free model), or no forecast fits.
    FileExistsError
        If ``output_dir`` holds the results of an earlier rollout (``metrics.json``; with ``save_forecasts``
        ``forecasts.nc``) and ``overwrite`` is false.
    """
    import_plugins(cfg.get("plugins"))
    if cfg.get("checkpoint") in (None, "???"):
        raise ValueError("no checkpoint given: pass checkpoint=RUN_DIR/best.pt")
    device = cfg.get("device", "cpu")
    data = WindowDataset(cfg.dataset.path, cfg.get("split", "test"), n_in=4, n_out=1)
    model = load_model(
        cfg.checkpoint,
        device=device,
        dataset=data,
        allow_resolution_change=bool(cfg.get("allow_resolution_change", False)),
    )
    out_dir = Path(cfg.get("output_dir") or Path(cfg.checkpoint).parent / f"rollout_{data.split}")
    fc_path = out_dir / "forecasts.nc"
    save_fc = bool(cfg.get("save_forecasts", False))
    _check_output(out_dir, save_fc, bool(cfg.get("overwrite", False)))
    ev = evaluate(
        model,
        data,
        n_steps=int(cfg.get("n_steps", 20)),
        init_stride=int(cfg.get("init_stride", 1)),
        max_inits=cfg.get("max_inits"),
        trajectories=cfg.get("trajectories"),
        max_trajectories=cfg.get("max_trajectories"),
        batch_size=int(cfg.get("batch_size", 8)),
        spectra_leads=list(cfg.get("spectra_leads", [1, 5, 20]) or []),
        keep_forecasts=save_fc,
        sample=bool(cfg.get("sample", True)),
        progress=bool(cfg.get("progress", False)),
        amp=bool(cfg.get("amp", False)),
        definitions=_definitions(cfg),
    )
    results = ev["results"]
    paths = write_results(results, out_dir)
    if save_fc:
        paths["forecasts"] = write_forecast(
            ev["forecast"],
            fc_path,
            overwrite=bool(cfg.get("overwrite", False)),
            include_truth=bool(cfg.get("include_truth", False)),
        )
    if "sample" in ev:
        paths["sample"] = write_forecast(
            ev["sample"], out_dir / "sample_forecast.nc", overwrite=True, include_truth=True
        )
    if cfg.get("plots", True):
        label = results["model"]
        paths["error_vs_lead"] = report.plot_error_vs_lead(
            {label: results}, out_dir / "vrmse_vs_lead.png", metric="vrmse"
        )
        if results.get("spectra"):
            paths["spectra_png"] = report.plot_spectra(results, out_dir / "spectra.png")
        if "sample" in paths:
            paths["maps"] = report.plot_maps(
                paths["sample"], out_dir / "maps.png", leads=tuple(cfg.get("map_leads", [1, 5, 20]))
            )
    s = results["summary"]
    n20 = next(k for k in s if k.startswith("mean_1_"))
    print(
        f"{results['model']}: {results['n_forecasts']} forecasts x {results['n_steps']} steps; VRMSE "
        f"(area-weighted / Well) next step {s['next_step']['vrmse']['mean']:.4f} / "
        f"{s['next_step']['vrmse_well']['mean']:.4f}, {n20.replace('mean_', '').replace('_', ':')} "
        f"{s[n20]['vrmse']['mean']:.4f} / {s[n20]['vrmse_well']['mean']:.4f}"
    )
    st = results["stability"] or {}
    if st.get("n_unstable"):
        print(
            f"{st['n_unstable']} of {st['n_forecasts']} forecasts blew up (VRMSE above {st['threshold_vrmse']:g} "
            "or not finite), "
            f"the first at lead step {st['first_unstable_lead_step']}; median VRMSE over forecasts at the last lead "
            f"{st['median_vrmse'][-1]:.4g}"
        )
    print(f"metrics: {paths['json']}")
    return {"results": results, "output_dir": str(out_dir), "paths": {k: str(v) for k, v in paths.items()}}


def check(cfg, overrides=()) -> None:
    """What ``dandelion-rollout`` checks before any work: the checkpoint exists, the dataset folder is
    complete (and of the ``dataset=`` named on the command line), the device exists, the step counts
    are positive, and ``output_dir`` is writable and holds no earlier results (``metrics.json``; ``forecasts.nc``
    when ``save_forecasts``) unless ``overwrite``.
    Raises :class:`dandelion.cli.common.UsageError`."""
    ckpt = check_checkpoint(require(cfg, "checkpoint", "pass checkpoint=RUN_DIR/best.pt (written by dandelion-train)"))
    path = require(cfg, "dataset.path", "pass dataset.path=DIR (the folder written by dandelion-generate)")
    split = str(cfg.get("split", "test"))
    check_dataset_folder(path, name=explicit_choice(list(overrides), "dataset"), split=split)
    check_device(cfg.get("device", "cpu"))
    check_positive(cfg, ["n_steps", "init_stride", "batch_size", "max_inits", "max_trajectories"])
    try:
        _definitions(cfg)
    except ValueError as e:
        raise UsageError(str(e)) from None
    out_dir = Path(str(cfg.get("output_dir") or ckpt.parent / f"rollout_{'valid' if split == 'val' else split}"))
    _check_output(out_dir, bool(cfg.get("save_forecasts", False)), bool(cfg.get("overwrite", False)))


def _definitions(cfg) -> tuple[str, ...]:
    """The score definitions of config key ``definitions`` (a name or a list; default both,
    :mod:`dandelion.evaluation.definitions`). Raises ValueError for an empty list or an unknown name."""
    d = cfg.get("definitions", list(DEFINITIONS))
    return check_definitions([d] if isinstance(d, str) else list(d or []))


def _check_output(out_dir: Path, save_forecasts: bool, overwrite: bool) -> None:
    """The rollout's results do not replace an earlier rollout's unless ``overwrite``, and ``out_dir`` is writable.

    Raises FileExistsError for existing results and PermissionError for a folder that refuses new files."""
    names = ["metrics.json"] + (["forecasts.nc"] if save_forecasts else [])
    found = [n for n in names if (out_dir / n).exists()]
    if found and not overwrite:
        raise FileExistsError(
            f"{out_dir} already holds the results of a rollout ({', '.join(found)}): choose another output_dir "
            "or pass overwrite=true to replace them"
        )
    check_writable(out_dir / "metrics.json", "output_dir")


def main(argv: list[str] | None = None) -> None:
    """``dandelion-rollout checkpoint=RUN/best.pt dataset.path=DIR [...]`` (``--help``)."""
    run("dandelion-rollout", "rollout", rollout, check=check, argv=argv)


if __name__ == "__main__":
    main()
