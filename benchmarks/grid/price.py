"""A benchmark scale priced before it runs: estimated H200-hours per cell and in total (``dry_run=true``).

``dandelion-benchmark scale=<name> dry_run=true`` lists the cells and, on a GPU scale (``scale.device`` cuda, or
``price=true``), prints for every cell (dataset, model, seed) its runs, the estimated training step and the
estimated H200-hours, then the total per model and overall, naming the source of each step time:

* ``measured``: a GPU measurement of the same model, preset, grid and dtype committed under
  ``benchmarks/results/gpu/**/bench_models*.json`` on an H200 (the training step per sample x the batch);
* ``roofline``: else :func:`dandelion.benchmarks.speed.roofline.roofline_model`, one step counted on fake tensors at
  the cell's grid, preset, batch, dtype (bf16 with ``trainer.amp``) and channels, Dandelion's warps on the fused
  Triton kernel that CUDA runs, priced at the H200's effective 4.3 TB/s and 400 bf16 TFLOP/s (a lower bound: no
  launch overhead, no loader, no fusion beyond that kernel).

A run's time: ``pretrain steps x step + fine-tune steps x n_out x step`` (an ``n_out``-step rollout costs about
``n_out`` one-step passes) ``+ epochs x val_max_batches x forward``. Steps: ``epochs x max_batches_per_epoch``
(and ``finetune.epochs x max_batches_per_epoch``); a scale without that cap is priced as None (unknown). Runs of a
cell: the sweep seed trains every rate of ``lr_sweep`` (three of a ``lr_from`` bracket, one for a model of
``lr_fixed_models``), the other seeds one rate; the ladder's widening and the test-split evaluation are left out
(so: at least). Channels per dataset: its scenario's fields (a vector field is 3 Cartesian channels, a leveled
field one per level), plus one mask input for a masked dataset.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from omegaconf import OmegaConf

from dandelion.benchmarks.grid.cells import dataset_spec, resolved_trainer
from dandelion.benchmarks.speed.roofline import DEVICES, roofline_model

__all__ = ["dataset_grid", "dataset_channels", "runs_of_cell", "run_seconds", "price_cells", "print_price"]

#: The priced device.
DEVICE = "h200"
_MASKED = ("global_ocean",)


def dataset_grid(cfg, key: str) -> tuple[int, int, str]:
    """``(nlat, nlon, grid)`` of dataset key ``key``: its overrides, else its dataset config's defaults."""
    spec = dataset_spec(cfg, key)
    base = OmegaConf.load(str(resources.files("dandelion.configs") / "dataset" / f"{spec['dataset']}.yaml"))
    o = spec["overrides"]
    return int(o.get("nlat", base.nlat)), int(o.get("nlon", base.nlon)), str(o.get("grid", base.grid))


def dataset_channels(name: str) -> tuple[int, bool]:
    """``(channels per frame, masked)`` of dataset ``name`` from its scenario's fields (see the module docstring)."""
    from dandelion.datasets.scenario import get_scenario

    cls = get_scenario(name)
    n_levels = len(getattr(cls, "levels", ()) or ())
    leveled = set(getattr(cls, "level_fields", ()) or ())
    c = sum((3 if f.kind == "vector" else 1) * (n_levels if k in leveled else 1) for k, f in cls.fields.items())
    return int(c), name in _MASKED


def runs_of_cell(cfg, cell: dict) -> int:
    """Training runs of one cell (sweep seed: the rates it starts from; other seeds: one)."""
    spec = dataset_spec(cfg, cell["dataset"])
    sweep_seed = cfg.scale.get("sweep_seed")
    if cell["model"] in spec["lr_fixed_models"]:
        return 1
    if sweep_seed is not None and int(cell["seed"]) != int(sweep_seed):
        return 1
    return 3 if spec["lr_from"] else len(list(cfg.scale.lr_sweep))


def run_seconds(trainer: dict, step_s: float, forward_s: float) -> float | None:
    """Seconds of one training run with ``step_s`` per one-step batch and ``forward_s`` per validation batch."""
    cap = trainer.get("max_batches_per_epoch")
    if not cap:
        return None
    ft = trainer.get("finetune") or {}
    epochs, ft_epochs, n_out = int(trainer["epochs"]), int(ft.get("epochs", 0)), int(ft.get("n_out", 1))
    val = int(trainer.get("val_max_batches") or 0) * (epochs + ft_epochs) * forward_s
    return epochs * cap * step_s + ft_epochs * cap * n_out * step_s + val


def _measured(model: str, preset: str, nlat: int, nlon: int, dtype: str, root: Path) -> tuple[float, str] | None:
    """``(training step seconds per sample, file)`` of an H200 measurement committed under ``root``, if any."""
    for path in sorted(root.glob("**/bench_models*.json")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        gpu = str((doc.get("machine") or {}).get("gpu") or (doc.get("machine") or {}).get("gpu_name") or "")
        if "H200" not in gpu:
            continue
        for r in doc.get("rows") or []:
            key = (r.get("model"), r.get("preset"), r.get("nlat"), r.get("nlon"), r.get("dtype"))
            if key == (model, preset, nlat, nlon, dtype) and r.get("train_step_s") and r.get("batch"):
                return float(r["train_step_s"]) / int(r["batch"]), str(path)
    return None


def price_cells(cfg, grid: list[dict], measured_root: str | Path = "benchmarks/results/gpu") -> dict:
    """Estimated H200 seconds of every cell of ``grid`` (:func:`dandelion.benchmarks.grid.cells.cells`).

    Returns ``{"cells": [{dataset, model, seed, nlat, nlon, runs, step_s, source, hours}], "total_hours",
    "by_model": {model: hours}, "device"}`` (``hours`` None where a run's steps are unknown).
    """
    trainer = resolved_trainer(cfg)
    batch, amp, n_in = int(trainer["batch_size"]), bool(trainer.get("amp")), int(trainer.get("n_in", 4))
    dtype, preset = ("bf16" if amp else "fp32"), str(cfg.scale.preset)
    steps: dict[tuple, tuple[float, float, str]] = {}
    out = []
    for c in grid:
        nlat, nlon, g = dataset_grid(cfg, c["dataset"])
        ch, masked = dataset_channels(dataset_spec(cfg, c["dataset"])["dataset"])
        key = (c["model"], nlat, nlon, g, ch, masked)
        if key not in steps:
            hit = _measured(c["model"], preset, nlat, nlon, dtype, Path(measured_root))
            spec = {
                "preset": preset,
                "nlat": nlat,
                "nlon": nlon,
                "grid": g,
                "batch": batch,
                "dtype": dtype,
                "in_channels": n_in * ch + int(masked),
                "out_channels": ch,
                "fake": True,
                "top": 0,
                "warp_kernel": "triton",  # Dandelion's warps on CUDA (kernel=auto; dandelion/warp/layer.py)
            }
            row = roofline_model(c["model"], spec, {DEVICE: DEVICES[DEVICE]})
            fwd = row["estimated_forward_s"][DEVICE]
            if hit:
                steps[key] = (
                    hit[0] * batch,
                    fwd * hit[0] * batch / row["estimated_step_s"][DEVICE],
                    f"measured {hit[1]}",
                )
            else:
                steps[key] = (row["estimated_step_s"][DEVICE], fwd, "roofline")
        step_s, fwd_s, source = steps[key]
        runs = runs_of_cell(cfg, c)
        secs = run_seconds(trainer, step_s, fwd_s)
        out.append(
            {
                "dataset": c["dataset"],
                "model": c["model"],
                "seed": c["seed"],
                "nlat": nlat,
                "nlon": nlon,
                "runs": runs,
                "step_s": step_s,
                "source": source,
                "hours": None if secs is None else runs * secs / 3600.0,
            }
        )
    by_model: dict[str, float] = {}
    for r in out:
        by_model[r["model"]] = by_model.get(r["model"], 0.0) + (r["hours"] or 0.0)
    known = [r["hours"] for r in out if r["hours"] is not None]
    total = sum(known) if len(known) == len(out) else None
    return {"cells": out, "by_model": by_model, "total_hours": total, "device": DEVICES[DEVICE]["name"]}


def print_price(cfg, grid: list[dict]) -> dict:
    """Print :func:`price_cells` (one line per cell, per model, the total and the sources) and return it."""
    p = price_cells(cfg, grid)
    tr = resolved_trainer(cfg)
    print(
        f"[price] scale={cfg.scale.name}: estimated H200-hours on {p['device']} (batch {tr['batch_size']}, "
        f"{'bf16' if tr.get('amp') else 'fp32'}, preset {cfg.scale.preset}; benchmarks/grid/price.py)",
        flush=True,
    )
    for r in p["cells"]:
        h = "?" if r["hours"] is None else f"{r['hours']:.2f}"
        print(
            f"  {r['dataset']:<28} {r['model']:<15} seed {r['seed']}: {r['nlat']}x{r['nlon']}, {r['runs']} run(s), "
            f"step {r['step_s'] * 1e3:.0f} ms ({r['source']}): {h} H200-h",
            flush=True,
        )
    for m, h in p["by_model"].items():
        print(f"[price] {m:<15} {h:8.1f} H200-h", flush=True)
    total = "unknown (a run without max_batches_per_epoch)" if p["total_hours"] is None else f"{p['total_hours']:.1f}"
    sources = sorted({r["source"].split()[0] for r in p["cells"]})
    print(f"[price] total: {total} H200-hours (source: {', '.join(sources)})", flush=True)
    return p
