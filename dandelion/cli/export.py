"""``dandelion-export``: roll a checkpoint out and write the forecasts to CF netCDF or Zarr.

The hydra job around :mod:`dandelion.export.forecasts` (configs/export.yaml).
"""

from __future__ import annotations

from dandelion.checkpoint import load_checkpoint, load_model
from dandelion.cli.common import (
    UsageError,
    check_checkpoint,
    check_choice,
    check_dataset_folder,
    check_device,
    check_new_file,
    check_positive,
    explicit_choice,
    require,
    run,
)
from dandelion.datasets.integrity import check_checkpoint_data
from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.export.forecasts import CONVENTIONS, FORMATS, WB2_NAMES
from dandelion.export.stream import stream_forecasts
from dandelion.locks import OutputLock
from dandelion.registry import import_plugins


def export(cfg) -> dict:
    """The ``dandelion-export`` job: roll a checkpoint out on a dataset split and write netCDF (or Zarr).

    Config keys (configs/export.yaml): ``checkpoint``, ``dataset.path``, ``split``, ``n_steps``,
    ``init_stride``, ``max_inits``, ``trajectories``, ``output``, ``overwrite``, ``include_truth``,
    ``device``, ``allow_resolution_change``, ``batch_size``, ``format`` (netcdf | zarr),
    ``convention`` (cf | wb2), ``chunks`` (Zarr chunk sizes per dimension; null = one map per chunk).

    Returns
    -------
    dict with ``path`` (the netCDF file or Zarr store) and ``n_forecasts``.

    Raises
    ------
    FileExistsError
        If ``output`` exists and ``overwrite`` is false (checked before any model or data is loaded).
    PermissionError
        If the folder of ``output`` refuses new files (checked before any model or data is loaded).
    dandelion.locks.LockHeldError
        If another process is writing the same output.
    UsageError
        For an unknown ``format`` or ``convention``, ``chunks`` with ``format=netcdf``, or an output folder that is
        not a Zarr store (checked before any model or data is loaded).
    """
    overwrite = bool(cfg.get("overwrite", False))
    output = check_new_file(
        require(cfg, "output", _OUTPUT_HINT), overwrite=overwrite, store=str(cfg.get("format", "netcdf")) == "zarr"
    )
    _check_format(cfg)
    import_plugins(cfg.get("plugins"))
    with OutputLock.beside(output, "dandelion-export"):  # one writer of this output at a time
        return _export(cfg, output, overwrite)


def _export(cfg, output, overwrite: bool) -> dict:
    """The body of :func:`export`, run while the output's lock is held."""
    ds = WindowDataset(cfg.dataset.path, cfg.get("split", "test"), n_in=4, n_out=1)
    try:
        extra = load_checkpoint(cfg.checkpoint).get("extra", {})
        check_checkpoint_data(cfg.checkpoint, extra, ds.path, bool(cfg.get("allow_other_data", False)), "export")
        model = load_model(
            cfg.checkpoint,
            device=cfg.get("device", "cpu"),
            dataset=ds,
            allow_resolution_change=bool(cfg.get("allow_resolution_change", False)),
        )
        chunks = cfg.get("chunks")
        out, n = stream_forecasts(  # written batch by batch: memory of one batch, not of the file
            model,
            ds,
            output,
            n_steps=int(cfg.n_steps),
            init_stride=int(cfg.get("init_stride", 1)),
            max_inits=cfg.get("max_inits"),
            trajectories=cfg.get("trajectories"),
            max_trajectories=cfg.get("max_trajectories"),
            batch_size=int(cfg.get("batch_size", 8)),
            amp=bool(cfg.get("amp", False)),
            include_truth=bool(cfg.get("include_truth", False)),
            format=str(cfg.get("format", "netcdf")),
            convention=str(cfg.get("convention", "cf")),
            chunks={str(k): int(v) for k, v in chunks.items()} if chunks else None,
            overwrite=overwrite,
        )
        print(f"wrote {n} forecasts of {int(cfg.n_steps)} steps to {out}")
        return {"path": str(out), "n_forecasts": n}
    finally:
        ds.close()


_OUTPUT_HINT = "pass output=FILE.nc (the netCDF file to write) or output=DIR.zarr format=zarr (a Zarr store)"


def _check_format(cfg) -> None:
    """``format`` and ``convention`` are known; ``chunks`` (Zarr only) maps dimensions to positive sizes."""
    fmt = check_choice(cfg.get("format", "netcdf"), FORMATS, "format")
    check_choice(cfg.get("convention", "cf"), CONVENTIONS, "convention")
    chunks = cfg.get("chunks")
    if chunks and fmt != "zarr":
        raise UsageError(
            "chunks applies to format=zarr only (the netCDF export stores one map per chunk): "
            "drop chunks or pass format=zarr"
        )
    if chunks is not None and not hasattr(chunks, "items"):
        raise UsageError(f"chunks={chunks} is not a mapping: pass e.g. chunks={{init_time: 4}}")
    conv = str(cfg.get("convention", "cf"))
    dims = [
        WB2_NAMES.get(d, d) if conv == "wb2" else d
        for d in ("trajectory", "init_time", "lead_time", "level", "lat", "lon")
    ]
    for k, v in (chunks or {}).items():
        if str(k) not in dims:
            raise UsageError(
                f"chunks.{k}: the forecasts of convention={conv} have no dimension {k}: use some of {', '.join(dims)}"
            )
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise UsageError(f"chunks.{k}={v} must be a positive integer")


def check(cfg, overrides=()) -> None:
    """What ``dandelion-export`` checks before any work: the output is new (or ``overwrite``; with
    ``format=zarr`` an existing Zarr store may be replaced, never another folder), ``format``,
    ``convention`` and ``chunks`` are valid, the checkpoint exists, the dataset folder is complete (and
    of the ``dataset=`` named on the command line; a folder in the Well's layout passes too), the device
    exists, the step counts are positive. Raises :class:`dandelion.cli.common.UsageError`."""
    check_new_file(
        require(cfg, "output", _OUTPUT_HINT),
        overwrite=bool(cfg.get("overwrite", False)),
        store=str(cfg.get("format", "netcdf")) == "zarr",
    )
    _check_format(cfg)
    check_checkpoint(require(cfg, "checkpoint", "pass checkpoint=RUN_DIR/best.pt (written by dandelion-train)"))
    path = require(cfg, "dataset.path", "pass dataset.path=DIR (the folder written by dandelion-generate)")
    check_dataset_folder(path, name=explicit_choice(list(overrides), "dataset"), split=cfg.get("split", "test"))
    check_device(cfg.get("device", "cpu"))
    check_positive(cfg, ["n_steps", "init_stride", "batch_size", "max_inits", "max_trajectories"])


def main(argv: list[str] | None = None) -> None:
    """``dandelion-export checkpoint=RUN/best.pt dataset.path=DIR output=FILE.nc [format=zarr ...]`` (``--help``)."""
    run("dandelion-export", "export", export, check=check, argv=argv)


if __name__ == "__main__":
    main()
