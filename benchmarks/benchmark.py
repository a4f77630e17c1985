"""``dandelion-benchmark``: the benchmark grid of one scale, datasets x models x seeds (issue 8).

The protocol of a scale is one config file, ``configs/scale/<scale>.yaml`` (``cpu``: 32x64 and 64x128,
tiny/small presets, minutes per model on 2 cores; ``full``: up to 256x512, paper presets, GPU). For
every cell ``(dataset, model, seed)``:

1. the dataset is generated (or completed: ``dandelion-generate`` resumes) under ``work_dir``;
2. the model is trained once per learning rate of ``lr_sweep`` with ``dandelion-train``
   (:func:`dandelion.benchmarks.train.train`): 4 frames in, 1 out, AdamW with warm-up and cosine
   decay, then the autoregressive fine-tune, for a budget counted in optimiser STEPS
   (``epochs * max_batches_per_epoch`` per phase), so that the result does not depend on the load of
   the machine;
3. the learning rate whose FINAL model (``last.pt``, after the fine-tune) has the lowest next-step
   loss on the validation split is kept;
4. that model is rolled out on the test split with ``dandelion-rollout``
   (:func:`dandelion.benchmarks.rollout.rollout`): next-step VRMSE and the 1:20 rollout VRMSE (mean
   over leads 1..20), area-weighted and the Well's unweighted definition, per field and averaged;
5. the cell's result JSON ``results_dir/<dataset>/<model>/seed<k>.json`` is written atomically.

A cell whose result JSON exists and was made under the same protocol (:func:`protocol_hash` of the
scale's settings, and the resolved trainer configuration) is finished and skipped; any other is
``stale`` and run again. A sweep run whose ``result.json`` exists under
``runs/<dataset>/<model>/seed<k>/t<training_hash>/`` is reused; an interrupted sweep run continues
exactly from its ``last.pt``. So the same command resumes a killed benchmark. ``dandelion-report target=leaderboard scale=<scale>`` then gathers the cells
(:mod:`dandelion.benchmarks.leaderboard`).

Use::

    dandelion-benchmark scale=cpu
    dandelion-benchmark scale=cpu 'only.datasets=[galewsky_32x64]' 'only.models=[dandelion,sfno]' 'scale.seeds=[0]'
    dandelion-benchmark scale=full device=cuda
    dandelion-benchmark scale=cpu dry_run=true          # list the cells and whether they are finished
"""

from __future__ import annotations

import json
import math
import os
import platform
import shlex
import sys
import time
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

__all__ = ["benchmark", "cells", "run_cell", "ensure_dataset", "cell_path", "compose", "versions", "machine",
           "write_json_atomic", "protocol_hash", "training_hash", "resolved_trainer", "CELL_SCHEMA", "main"]

CELL_SCHEMA = "dandelion-benchmark-cell/1"
_SUMMARY_METRICS = ("vrmse", "vrmse_well", "rmse")


# ---------------------------------------------------------------------------------------------- helpers
def compose(name: str, overrides: list[str]):
    """Compose ``dandelion.configs/<name>.yaml`` with hydra overrides (inside or outside a hydra app)."""
    from hydra import compose as _compose
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    if GlobalHydra.instance().is_initialized():
        return _compose(config_name=name, overrides=overrides)
    with initialize_config_module(config_module="dandelion.configs", version_base="1.3"):
        return _compose(config_name=name, overrides=overrides)


def write_json_atomic(path, obj) -> Path:
    """Write ``obj`` as JSON to ``path`` atomically (temporary file in the same folder, then ``os.replace``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=_json_default) + "\n")
    os.replace(tmp, path)
    return path


def _json_default(o):
    if hasattr(o, "tolist"):
        return o.tolist()
    return str(o)


def versions() -> dict:
    """Versions of Python, the package and its main dependencies (plain strings)."""
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for dist, key in (("dandelion-sphere", "dandelion"), ("torch", "torch"), ("torch-harmonics", "torch_harmonics"), ("numpy", "numpy"),
                      ("h5py", "h5py"), ("hydra-core", "hydra"), ("omegaconf", "omegaconf")):
        try:
            out[key] = md.version(dist)
        except md.PackageNotFoundError:
            out[key] = None
    try:
        import torch

        out["cuda"] = torch.version.cuda
    except ImportError:  # pragma: no cover
        pass
    return out


def machine(device: str = "cpu") -> dict:
    """The machine: CPU model, logical cores, load average, GPU name (when ``device`` is CUDA), OS."""
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info = {"cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform(), "hostname_hash": None}
    try:
        info["load_average"] = [round(v, 2) for v in os.getloadavg()]
    except OSError:  # pragma: no cover
        info["load_average"] = None
    import torch

    info["torch_threads"] = torch.get_num_threads()
    if str(device).startswith("cuda") and torch.cuda.is_available():
        dev = torch.device(device)
        p = torch.cuda.get_device_properties(dev)
        info["gpu"] = p.name
        info["gpu_memory_bytes"] = int(p.total_memory)
        info["gpu_count"] = torch.cuda.device_count()
    else:
        info["gpu"] = None
    info.pop("hostname_hash")
    return info


def _fmt_value(v) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if v is None:
        return "null"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_fmt_value(x) for x in v) + "]"
    return str(v)


def _flatten(d: dict, prefix: str) -> list[str]:
    out = []
    for k, v in d.items():
        if isinstance(v, dict):
            out += _flatten(v, f"{prefix}{k}.")
        else:
            out.append(f"{prefix}{k}={_fmt_value(v)}")
    return out


def _device(cfg) -> str:
    dev = cfg.get("device") or cfg.scale.get("device") or "cpu"
    if dev == "auto":
        import torch

        dev = "cuda" if torch.cuda.is_available() else "cpu"
    return str(dev)


def protocol_hash(cfg, key: str) -> str:
    """Fingerprint (12 hex digits) of the scale's settings that decide a cell's numbers for dataset ``key``.

    SHA-256 of the scale's ``trainer`` overrides, ``lr_sweep``, ``preset`` and ``evaluation`` settings
    and the dataset's spec (config group and overrides). A cell result (or persistence reference) made
    under another fingerprint is listed as ``stale`` and run again. Defaults the scale does not set
    (``configs/trainer/default.yaml``) are compared separately through the resolved trainer
    configuration each cell records (:func:`resolved_trainer`).
    """
    s = cfg.scale
    spec = _dataset_spec(cfg, key)
    payload = {"trainer": OmegaConf.to_container(s.trainer, resolve=True), "lr_sweep": [float(x) for x in s.lr_sweep],
               "preset": str(s.preset), "evaluation": OmegaConf.to_container(s.evaluation, resolve=True),
               "dataset": spec["dataset"], "dataset_overrides": spec["overrides"]}
    return _digest(payload)


def _digest(payload) -> str:
    import hashlib

    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:12]


def resolved_trainer(cfg) -> dict:
    """The trainer configuration a sweep run of this scale trains with: ``configs/trainer/default.yaml``
    merged with the scale's ``trainer`` overrides (without ``lr`` and ``progress``, which vary per run
    and do not change the result)."""
    over = _flatten(OmegaConf.to_container(cfg.scale.trainer, resolve=True), "trainer.")
    t = OmegaConf.to_container(compose("train", over).trainer, resolve=True)
    for k in ("lr", "progress"):
        t.pop(k, None)
    return t


def training_hash(cfg, key: str) -> str:
    """Fingerprint of one sweep run's training setup (resolved trainer, preset, dataset spec; not the
    evaluation settings or the rest of the sweep): the ``t<hash>`` folder of its run directory, so that runs
    of different setups never mix and a change of the evaluation alone re-uses the trained runs."""
    spec = _dataset_spec(cfg, key)
    return _digest({"trainer": resolved_trainer(cfg), "preset": str(cfg.scale.preset), "dataset": spec["dataset"],
                    "dataset_overrides": spec["overrides"]})


def _stored(path: Path) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def _stored_hash(path: Path) -> str | None:
    return _stored(path).get("protocol_hash")


def _cell_state(path: Path, h: str, trainer: dict) -> str:
    if not path.exists():
        return "todo"
    rec = _stored(path)
    if rec.get("protocol_hash") != h:
        return "stale"
    if "trainer_resolved" in rec and json.loads(json.dumps(rec["trainer_resolved"])) != json.loads(json.dumps(trainer)):
        return "stale"  # a default of configs/trainer/default.yaml changed since the cell was made
    return "finished"


def _lr_tag(lr: float) -> str:
    return f"lr{lr:.0e}".replace("e-0", "e-").replace("+0", "")


# ---------------------------------------------------------------------------------------------- grid
def cells(cfg) -> list[dict]:
    """The grid of the configured scale (restricted by ``only.*``): dicts ``dataset``, ``model``, ``seed``, ``path``,
    ``finished`` (its result JSON exists and was made under the current protocol, :func:`protocol_hash`) and
    ``state`` (``finished``, ``stale``: a result of another protocol, to be run again, or ``todo``).

    Raises
    ------
    ValueError
        If ``only`` names a dataset or model that the scale does not have.
    """
    s = cfg.scale
    ds_keys = list(s.datasets)
    models = [str(m) for m in s.models]
    seeds = [int(k) for k in s.seeds]
    only = cfg.get("only") or {}
    if only.get("datasets"):
        bad = [d for d in only.datasets if d not in ds_keys]
        if bad:
            raise ValueError(f"only.datasets={list(only.datasets)}: {bad} not in scale={s.name} (datasets {ds_keys}); pick from those")
        ds_keys = [d for d in ds_keys if d in list(only.datasets)]
    if only.get("models"):
        bad = [m for m in only.models if m not in models]
        if bad:
            raise ValueError(f"only.models={list(only.models)}: {bad} not in scale={s.name} (models {models}); pick from those")
        models = [m for m in models if m in list(only.models)]
    if only.get("seeds") is not None:
        seeds = [int(k) for k in only.seeds]
    out = []
    trainer = resolved_trainer(cfg)
    for d in ds_keys:
        h = protocol_hash(cfg, d)
        for m in models:
            for k in seeds:
                p = cell_path(s.results_dir, d, m, k)
                state = _cell_state(p, h, trainer)
                out.append({"dataset": d, "model": m, "seed": k, "path": p, "finished": state == "finished", "state": state,
                            "protocol_hash": h})
    return out


def cell_path(results_dir, dataset_key: str, model: str, seed: int) -> Path:
    """Where a cell's result JSON lives: ``results_dir/<dataset_key>/<model>/seed<seed>.json``."""
    return Path(results_dir) / dataset_key / model / f"seed{int(seed)}.json"


def _dataset_spec(cfg, key: str) -> dict:
    spec = cfg.scale.datasets.get(key)
    if spec is None:
        raise ValueError(f"dataset {key!r} is not in scale={cfg.scale.name}: choose from {list(cfg.scale.datasets)}")
    spec = OmegaConf.to_container(spec, resolve=True)
    return {"dataset": spec["dataset"], "overrides": spec.get("overrides") or {}, "generate_batch_size": int(spec.get("generate_batch_size", 4)),
            "path": str(spec.get("path") or Path(cfg.scale.work_dir) / key)}


def ensure_dataset(cfg, key: str) -> Path:
    """Generate (or complete) the dataset of grid key ``key``; returns its folder.

    A complete folder is left as it is (``dandelion-generate`` checks its fingerprint, so a folder made
    with another configuration is refused with a ValueError naming it).
    """
    from dandelion.datasets.generate import generate

    spec = _dataset_spec(cfg, key)
    path = Path(spec["path"])
    if (path / "checksums.sha256").exists() and (path / "stats.yaml").exists():
        return path
    over = [f"dataset={spec['dataset']}", f"dataset.path={path}", *_flatten(spec["overrides"], "dataset.")]
    gcfg = compose("generate", over)
    print(f"[benchmark] generating {key}: dandelion-generate {' '.join(over)} batch_size={spec['generate_batch_size']}", flush=True)
    generate(OmegaConf.create({"dataset": OmegaConf.to_container(gcfg.dataset, resolve=True), "device": _device(cfg),
                               "batch_size": spec["generate_batch_size"], "progress": bool(cfg.get("progress", False))}))
    return path


# ---------------------------------------------------------------------------------------------- one cell
def _train_overrides(cfg, key: str, model: str, seed: int, lr: float, run_dir: Path, data_path: Path) -> list[str]:
    s = cfg.scale
    spec = _dataset_spec(cfg, key)
    trainer = OmegaConf.to_container(s.trainer, resolve=True)
    trainer["lr"] = float(lr)
    trainer["progress"] = bool(cfg.get("progress", False))
    return [f"dataset={spec['dataset']}", f"dataset.path={data_path}", *_model_choice(model), f"model.preset={s.preset}",
            f"seed={int(seed)}", f"device={_device(cfg)}", f"run_dir={run_dir}", *_flatten(trainer, "trainer."), *_plugins(cfg)]


def _model_choice(model: str) -> list[str]:
    """``model=NAME`` when configs/model/NAME.yaml exists, else the default group entry renamed (plugin models)."""
    from importlib.resources import files

    if files("dandelion.configs").joinpath("model", f"{model}.yaml").is_file():
        return [f"model={model}"]
    return [f"model.name={model}"]


def _plugins(cfg) -> list[str]:
    plugins = list(cfg.scale.get("plugins") or [])
    return [f"plugins={_fmt_value(plugins)}"] if plugins else []


def _train_one(cfg, key, model, seed, lr, data_path) -> dict:
    from dandelion.benchmarks.train import train

    run_dir = Path(cfg.scale.work_dir) / "runs" / key / model / f"seed{seed}" / f"t{training_hash(cfg, key)}" / _lr_tag(lr)
    over = _train_overrides(cfg, key, model, seed, lr, run_dir, data_path)
    command = "dandelion-train " + " ".join(shlex.quote(o) for o in over)
    done = run_dir / "result.json"
    if done.exists():
        try:
            res = json.loads(done.read_text())
            return {**res, "lr": float(lr), "command": command, "reused": True}
        except json.JSONDecodeError:
            pass  # a torn file: train again below
    tcfg = compose("train", over)
    OmegaConf.set_struct(tcfg, False)
    if (run_dir / "last.pt").exists():  # an interrupted run continues exactly (train.py's resume)
        tcfg.resume = str(run_dir / "last.pt")
        print(f"[benchmark] resuming {run_dir}", flush=True)
    print(f"[benchmark] {command}", flush=True)
    res = train(tcfg)
    return {**res, "lr": float(lr), "command": command, "reused": False}


def _evaluate(cfg, key, checkpoint: Path, data_path: Path, out_dir: Path) -> tuple[dict, str]:
    from dandelion.benchmarks.rollout import rollout

    e = cfg.scale.evaluation
    spec = _dataset_spec(cfg, key)
    over = [f"checkpoint={checkpoint}", f"dataset={spec['dataset']}", f"dataset.path={data_path}", f"device={_device(cfg)}",
            f"split={e.get('split', 'test')}", f"n_steps={int(e.n_steps)}", f"init_stride={int(e.get('init_stride', 1))}",
            f"max_inits={_fmt_value(e.get('max_inits'))}", f"batch_size={int(e.get('batch_size', 8))}", f"output_dir={out_dir}",
            "save_forecasts=false", "sample=false", "plots=false", f"progress={_fmt_value(bool(cfg.get('progress', False)))}",
            f"spectra_leads=[1,{min(5, int(e.n_steps))},{int(e.n_steps)}]", *_plugins(cfg)]
    r = rollout(compose("rollout", over))
    return r["results"], "dandelion-rollout " + " ".join(shlex.quote(o) for o in over)


def run_cell(cfg, key: str, model: str, seed: int) -> dict:
    """Run one cell of the grid (sweep, selection, test evaluation) and write its result JSON atomically.

    Returns the cell record (the JSON content). See the module docstring for the protocol.
    """
    s = cfg.scale
    t0 = time.perf_counter()
    data_path = ensure_dataset(cfg, key)
    from dandelion.datasets.storage import load_metadata

    meta = load_metadata(data_path)
    trainer_resolved = resolved_trainer(cfg)
    sweep = []
    for lr in s.lr_sweep:
        sweep.append(_train_one(cfg, key, model, seed, float(lr), data_path))
    finite = [r for r in sweep if math.isfinite(float(r.get("val_loss", math.nan)))]
    if not finite:
        raise FloatingPointError(f"cell {key}/{model}/seed{seed}: every learning rate of {list(s.lr_sweep)} diverged "
                                 "(non-finite validation loss); lower scale.lr_sweep")
    best = min(finite, key=lambda r: float(r["val_loss"]))
    t_train = time.perf_counter() - t0
    t1 = time.perf_counter()
    ckpt = Path(best["last"])
    results, rollout_cmd = _evaluate(cfg, key, ckpt, data_path, ckpt.parent / f"rollout_{s.evaluation.get('split', 'test')}")
    t_eval = time.perf_counter() - t1
    summ = results["summary"]
    n20 = next(k for k in summ if k.startswith("mean_1_"))
    record = {
        "schema": CELL_SCHEMA,
        "protocol_hash": protocol_hash(cfg, key),
        "scale": str(s.name),
        "dataset_key": key,
        "dataset": str(meta.get("name")),
        "dataset_path": str(data_path),
        "nlat": int(meta["nlat"]), "nlon": int(meta["nlon"]), "grid": str(meta["grid"]), "lmax": meta.get("lmax"),
        "reduced": bool(meta.get("reduced", False)),
        "dt_frame": meta.get("dt_frame"), "time_units": meta.get("time_units"),
        "model": model, "preset": str(s.preset), "seed": int(seed),
        "n_parameters": int(best.get("n_parameters", 0)),
        "lr": float(best["lr"]),
        "selection": "lowest next-step loss (area-weighted MSE in the target's normalised units) of the final model (last.pt, after the "
                     "autoregressive fine-tune) on the valid split",
        "sweep": [{"lr": float(r["lr"]), "val_loss": float(r["val_loss"]), "val_vrmse": float(r["val_vrmse"]),
                   "train_loss": float(r["train_loss"]), "steps": int(r["step"]), "stopped": r.get("stopped"),
                   "minutes": float(r.get("minutes", 0.0)), "run_dir": r["run_dir"], "reused": bool(r.get("reused"))} for r in sweep],
        "trainer": OmegaConf.to_container(s.trainer, resolve=True),
        "trainer_resolved": trainer_resolved,
        "target": str(trainer_resolved.get("target", "frame")),
        "steps": int(best["step"]),
        "evaluation": {**OmegaConf.to_container(s.evaluation, resolve=True), "n_forecasts": int(results["n_forecasts"]),
                       "mean_key": n20},
        "next_step": {m: summ["next_step"][m] for m in _SUMMARY_METRICS if m in summ["next_step"]},
        "rollout_mean": {m: summ[n20][m] for m in _SUMMARY_METRICS if m in summ[n20]},
        "curves": {m: results["metrics"][m] for m in ("vrmse", "vrmse_well") if m in results["metrics"]},
        "lead_time": results["lead_time"],
        "lead_time_hours": results.get("lead_time_hours"),
        "units": results.get("units"),
        "commands": {"benchmark": cfg.get("_command") or _benchmark_command(cfg), "train": [r["command"] for r in sweep],
                     "selected_train": best["command"], "rollout": rollout_cmd},
        "minutes": {"train_wall": t_train / 60.0, "eval_wall": t_eval / 60.0},
        "versions": versions(),
        "machine": machine(_device(cfg)),
        "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_json_atomic(cell_path(s.results_dir, key, model, seed), record)
    return record


def persistence_reference(cfg, key: str) -> dict:
    """Scores of persistence (the last input frame as every forecast) on the test split of dataset
    ``key`` with the scale's evaluation settings, written to ``results_dir/<key>/persistence.json``
    (a reference line of the leaderboard; no training). Returns the record."""
    import torch

    from dandelion import api
    from dandelion.benchmarks.rollout import evaluate

    e = cfg.scale.evaluation
    data = api.open_dataset(ensure_dataset(cfg, key), e.get("split", "test"))
    n_channels = data.layout.n_channels

    class Persistence(torch.nn.Module):
        def forward(self, x):
            return x[:, -n_channels:]

    model = api.Forecaster(Persistence(), data.layout, int(cfg.scale.trainer.n_in), name="persistence")
    res = evaluate(model, data, n_steps=int(e.n_steps), init_stride=int(e.get("init_stride", 1)), max_inits=e.get("max_inits"),
                   batch_size=int(e.get("batch_size", 8)), spectra_leads=[], sample=False)["results"]
    n20 = next(k for k in res["summary"] if k.startswith("mean_1_"))
    rec = {"schema": "dandelion-benchmark-reference/1", "model": "persistence", "dataset_key": key, "n_forecasts": res["n_forecasts"],
           "protocol_hash": protocol_hash(cfg, key),
           "next_step": {m: res["summary"]["next_step"][m] for m in ("vrmse", "vrmse_well")},
           "rollout_mean": {m: res["summary"][n20][m] for m in ("vrmse", "vrmse_well")},
           "curves": {m: res["metrics"][m] for m in ("vrmse", "vrmse_well")}}
    write_json_atomic(Path(cfg.scale.results_dir) / key / "persistence.json", rec)
    return rec


def _benchmark_command(cfg) -> str:
    return "dandelion-benchmark " + " ".join(shlex.quote(a) for a in (cfg.get("_argv") or [f"scale={cfg.scale.name}"]))


# ---------------------------------------------------------------------------------------------- the grid
def benchmark(cfg) -> dict:
    """Run (or resume) every unfinished cell of the grid; returns ``{"cells": [...], "ran": n, "skipped": n}``."""
    cfg = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(cfg)
    if cfg.scale.get("threads"):
        import torch

        torch.set_num_threads(int(cfg.scale.threads))
    grid = cells(cfg)
    ran = skipped = 0
    print(f"[benchmark] scale={cfg.scale.name}: {len(grid)} cells, {sum(c['finished'] for c in grid)} finished", flush=True)
    for c in grid:
        state = c["state"]
        if cfg.get("dry_run"):
            print(f"  {c['dataset']:<28} {c['model']:<10} seed {c['seed']}: {state} ({c['path']})")
            continue
        ref = Path(cfg.scale.results_dir) / c["dataset"] / "persistence.json"
        if _stored_hash(ref) != c["protocol_hash"]:  # missing, or made with other evaluation settings
            persistence_reference(cfg, c["dataset"])
        if c["finished"]:
            skipped += 1
            continue
        t0 = time.perf_counter()
        rec = run_cell(cfg, c["dataset"], c["model"], c["seed"])
        ran += 1
        print(f"[benchmark] {c['dataset']} {c['model']} seed {c['seed']}: lr {rec['lr']:g}, next-step VRMSE "
              f"{rec['next_step']['vrmse']['mean']:.4f}, 1:20 {rec['rollout_mean']['vrmse']['mean']:.4f} "
              f"({(time.perf_counter() - t0) / 60:.1f} min) -> {c['path']}", flush=True)
    return {"cells": [{k: (str(v) if isinstance(v, Path) else v) for k, v in c.items()} for c in grid], "ran": ran, "skipped": skipped}


def main() -> None:
    """``dandelion-benchmark scale=cpu|full [only.datasets=[..]] [only.models=[..]] [device=..] [dry_run=true]``."""
    import hydra

    argv = list(sys.argv[1:])

    @hydra.main(config_path="pkg://dandelion.configs", config_name="benchmark", version_base="1.3")
    def _app(cfg: DictConfig) -> None:
        OmegaConf.set_struct(cfg, False)
        cfg._argv = argv
        out = benchmark(cfg)
        print(json.dumps({k: v for k, v in out.items() if k != "cells"}))

    _app()


if __name__ == "__main__":
    main()
