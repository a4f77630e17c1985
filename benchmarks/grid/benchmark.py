"""``dandelion-benchmark``: the benchmark grid of one scale, datasets x models x seeds.

The protocol of a scale is one config file, ``configs/scale/<scale>.yaml`` (``cpu``: 32x64 and 64x128,
tiny/small presets, minutes per model on 2 cores; ``full``: up to 256x512, paper presets, GPU). For
every cell ``(dataset, model, seed)``:

1. the dataset is generated (or completed: ``dandelion-generate`` resumes) under ``work_dir``;
2. on the sweep seed (``scale.sweep_seed``, 0), the model is trained once per learning rate of
   ``lr_sweep`` with ``dandelion-train`` (:func:`dandelion.cli.train.train`): 4 frames in, 1 out,
   AdamW with warm-up and cosine decay, then the autoregressive fine-tune, for a budget counted in
   optimiser STEPS (``epochs * max_batches_per_epoch`` per phase), so that the result does not depend
   on the load of the machine;
3. the learning rate whose FINAL model (``last.pt``, after the fine-tune) has the lowest next-step
   loss on the validation split is kept; while it is the smallest or largest rate tried, the next rate
   of ``lr_ladder`` beyond it is trained too (:func:`sweep_lr`), so that the chosen rate is inside the
   sweep; every other seed trains once at the sweep seed's rate;
4. that model is rolled out on the test split with ``dandelion-rollout``
   (:func:`dandelion.evaluation.scoring.evaluate`): next-step VRMSE and the 1:20 rollout VRMSE (mean
   over leads 1..20), area-weighted and the Well's unweighted definition, per field and averaged;
5. the cell's result JSON ``results_dir/<dataset>/<model>/seed<k>.json`` is written atomically.

The bookkeeping (which cells exist and are finished, :mod:`dandelion.benchmarks.grid.cells`): a cell whose
result JSON exists and was made under the same protocol (:func:`protocol_hash` of the scale's settings, and the
resolved trainer configuration) is finished and skipped; any other is ``stale`` and run again. A sweep run whose
``result.json`` exists under ``runs/<dataset>/<model>/seed<k>/t<training_hash>/`` is reused; an interrupted sweep
run continues exactly from its ``last.pt``. So the same command resumes a killed benchmark.
``dandelion-report target=leaderboard scale=<scale>`` then gathers the cells
(:mod:`dandelion.benchmarks.leaderboard.render`). The calls into the jobs (generation, training command,
rollout) are in :mod:`dandelion.benchmarks.grid.runs`; where the folders are, in :mod:`dandelion.benchmarks.paths`.

Use::

    dandelion-benchmark scale=cpu
    dandelion-benchmark scale=cpu 'only.datasets=[galewsky_32x64]' 'only.models=[dandelion,sfno]' 'scale.seeds=[0]'
    dandelion-benchmark scale=full device=cuda
    dandelion-benchmark scale=cpu dry_run=true          # list the cells and whether they are finished
    dandelion-benchmark scale=gpu_day dry_run=true      # and, on a GPU scale, their estimated H200-hours (price.py)
    dandelion-benchmark scale=cpu 'only.datasets=[galewsky_32x64]' 'only.models=[sfno]' 'train_rates=[1e-2]'
                                                        # beside a grid process: train only that sweep run
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from dandelion.benchmarks.grid.cells import (
    CELL_SCHEMA,
    cell_finished,
    cell_path,
    cells,
    data_digest,
    dataset_spec,
    flatten_overrides,
    lr_tag,
    metric_summaries,
    model_architecture,
    protocol_hash,
    reference_path,
    resolved_trainer,
    stored_hash,
)
from dandelion.benchmarks.grid.lr_plan import sweep_plan
from dandelion.benchmarks.grid.parallel import check_rates, train_rates
from dandelion.benchmarks.grid.price import print_price
from dandelion.benchmarks.grid.records import stability_summary
from dandelion.benchmarks.grid.references import references_of
from dandelion.benchmarks.grid.runs import (
    _benchmark_command,
    _device,
    _evaluate,
    _loss,
    _read_curve,
    _run_record,
    _train_one,
    ensure_dataset,
)
from dandelion.benchmarks.paths import resolve_scale_dirs
from dandelion.cli.common import check_choice, check_device, run
from dandelion.cli.common import compose_config as compose
from dandelion.datasets.folder import load_metadata
from dandelion.runtime import machine, versions, write_json_atomic

__all__ = [
    "benchmark",
    "run_cell",
    "sweep_lr",
    "train_rates",
    "ensure_dataset",
    "check",
    "main",
    "CELL_SCHEMA",
    "cell_path",
    "cells",
    "compose",
    "data_digest",
    "dataset_spec",
    "flatten_overrides",
    "protocol_hash",
    "resolved_trainer",
    "write_json_atomic",
]


# ---------------------------------------------------------------------------------------------- one cell


def _sum_known(values: list) -> float | None:
    """The sum of ``values``; None when any is unknown (None), so a partial total never passes for a whole one."""
    return None if any(v is None for v in values) else float(sum(values))


def sweep_lr(cfg, key: str, model: str, seed: int, data_path: Path) -> tuple[list[dict], dict, dict]:
    """The learning-rate sweep of one (dataset, model) on ``seed``, widened until its best rate is inside.

    Trains every rate of ``scale.lr_sweep``; then, while the best rate (lowest final validation loss; a
    diverged run counts as infinitely bad) is the smallest or the largest tried, trains the next rate of
    ``scale.lr_ladder`` beyond that edge. Stops when the best is inside the tried set, or at the end of
    the ladder (``inside`` false: the optimum may lie outside the ladder). Runs are reused from their
    ``result.json``, so calling it again costs nothing.

    Returns ``(runs sorted by lr, best run, info)`` with ``info`` = ``{"sweep_seed", "start", "ladder",
    "tried", "inside"}``.

    Raises
    ------
    FloatingPointError
        If every tried rate diverged (non-finite validation loss).
    ValueError
        If ``lr_sweep`` is empty, a start rate is not on the ladder, or two ladder rates share a run-folder tag.
    """
    s = cfg.scale
    start = sorted(float(x) for x in (s.get("lr_sweep") or []))
    if not start:
        raise ValueError(
            "scale.lr_sweep is empty: give the learning rates to train first, e.g. scale.lr_sweep=[1e-3,3e-3,1e-2]"
        )
    ladder = sorted(float(x) for x in (s.get("lr_ladder") or start))
    tags = [lr_tag(x) for x in ladder]
    if len(set(tags)) != len(tags):
        raise ValueError(
            f"scale.lr_ladder {ladder} has rates that share a run folder name ({tags}): rates must differ in their "
            "first significant digit"
        )
    off = [lr for lr in start if not any(math.isclose(lr, x, rel_tol=1e-9) for x in ladder)]
    if off:
        raise ValueError(f"scale.lr_sweep rates {off} are not on scale.lr_ladder {ladder}: add them to the ladder")
    plan = sweep_plan(cfg, key, model, seed, start, ladder)  # the scale's start rates, or a bracket (lr_plan)
    start = plan["start"]
    runs = {lr: _train_one(cfg, key, model, seed, lr, data_path) for lr in start}
    while plan["widen"]:
        tried = sorted(runs)
        best = min(tried, key=lambda lr: (_loss(runs[lr]), lr))
        if not math.isfinite(_loss(runs[best])):
            raise FloatingPointError(
                f"cell {key}/{model}/seed{seed}: every learning rate of {tried} diverged "
                "(non-finite validation loss); lower scale.lr_sweep"
            )
        idx = next(i for i, x in enumerate(ladder) if math.isclose(x, best, rel_tol=1e-9))
        if best == tried[0] and idx > 0 and not any(math.isclose(ladder[idx - 1], x, rel_tol=1e-9) for x in tried):
            nxt = ladder[idx - 1]
        elif (
            best == tried[-1]
            and idx < len(ladder) - 1
            and not any(math.isclose(ladder[idx + 1], x, rel_tol=1e-9) for x in tried)
        ):
            nxt = ladder[idx + 1]
        else:
            break
        print(
            f"[benchmark] {key}/{model}/seed{seed}: best rate {best:g} at the edge of {tried}: widening to {nxt:g}",
            flush=True,
        )
        runs[nxt] = _train_one(cfg, key, model, seed, nxt, data_path)
    tried = sorted(runs)
    best = min(tried, key=lambda lr: (_loss(runs[lr]), lr))
    if not math.isfinite(_loss(runs[best])):
        raise FloatingPointError(
            f"cell {key}/{model}/seed{seed}: every learning rate of {tried} diverged (non-finite validation loss)"
        )
    inside = tried[0] < best < tried[-1]
    info = {
        "sweep_seed": int(seed),
        "start": start,
        "ladder": ladder,
        "tried": tried,
        "inside": bool(inside),
        "rule": plan["rule"],
        **({"source": plan["source"]} if plan["source"] else {}),
    }
    return [runs[lr] for lr in tried], runs[best], info


def _sweep_of_cell(cfg, key: str, model: str, sweep_seed: int, data_path: Path) -> tuple[list[dict], dict, dict]:
    """The sweep on ``sweep_seed``: taken from that seed's finished cell JSON when there is one under the current
    protocol (so another checkout, or another process, never retrains it), else :func:`sweep_lr`."""
    path = cell_path(cfg.scale.results_dir, key, model, sweep_seed)
    if cell_finished(
        path, protocol_hash(cfg, key), resolved_trainer(cfg), model_architecture(model, str(cfg.scale.preset))
    ):
        rec = json.loads(path.read_text())
        sweep = [{**r, "step": r.get("steps"), "command": None} for r in rec["sweep"]]
        chosen = next(r for r in sweep if math.isclose(float(r["lr"]), float(rec["lr"]), rel_tol=1e-9))
        return sweep, chosen, {**rec["lr_selection"], "from_cell": str(path)}
    return sweep_lr(cfg, key, model, sweep_seed, data_path)


def run_cell(cfg, key: str, model: str, seed: int) -> dict:
    """Run one cell of the grid (sweep, selection, test evaluation) and write its result JSON atomically.

    The learning rate comes from :func:`sweep_lr` on ``scale.sweep_seed`` (the same sweep, reused, for
    every seed; null: each seed sweeps for itself); a seed other than the sweep seed then trains once at
    that rate. Returns the cell record (the JSON content). See the module docstring for the protocol.
    """
    s = cfg.scale
    t_start = time.perf_counter()
    data_path = ensure_dataset(cfg, key)
    meta = load_metadata(data_path)
    t0 = time.perf_counter()  # training time starts after the dataset exists (its generation is timed apart)
    trainer_resolved = resolved_trainer(cfg)
    sweep_seed = s.get("sweep_seed")
    sweep_seed = int(seed) if sweep_seed is None else int(sweep_seed)
    sweep, chosen, lr_info = _sweep_of_cell(cfg, key, model, sweep_seed, data_path)
    best = chosen if sweep_seed == int(seed) else _train_one(cfg, key, model, seed, float(chosen["lr"]), data_path)
    if not math.isfinite(
        _loss(best)
    ):  # the sweep seed's rate diverged on this seed: the next lower stable rate of the sweep
        lower = sorted(
            (r for r in sweep if float(r["lr"]) < float(best["lr"]) and math.isfinite(_loss(r))),
            key=lambda r: -float(r["lr"]),
        )
        if not lower:
            raise FloatingPointError(
                f"cell {key}/{model}/seed{seed}: the rate {best['lr']:g} chosen on seed {sweep_seed} diverged "
                "on this seed and the sweep has no lower stable rate"
            )
        lr_info = {**lr_info, "diverged_on_this_seed": float(best["lr"]), "fallback": float(lower[0]["lr"])}
        print(
            f"[benchmark] {key}/{model}/seed{seed}: rate {best['lr']:g} diverged; training at {lower[0]['lr']:g}",
            flush=True,
        )
        best = _train_one(cfg, key, model, seed, float(lower[0]["lr"]), data_path)
    for r in (*sweep, best):
        r.setdefault("curve", _read_curve(r["run_dir"]))
    t_train = time.perf_counter() - t0
    t1 = time.perf_counter()
    ckpt = Path(best["last"])
    results, rollout_cmd = _evaluate(
        cfg, key, ckpt, data_path, ckpt.parent / f"rollout_{s.evaluation.get('split', 'test')}"
    )
    t_eval = time.perf_counter() - t1
    n20 = next(k for k in results["summary"] if k.startswith("mean_1_"))
    summaries = metric_summaries(results)
    record = {
        "schema": CELL_SCHEMA,
        "protocol_hash": protocol_hash(cfg, key),
        "scale": str(s.name),
        "dataset_key": key,
        "dataset": str(meta.get("name")),
        "dataset_path": str(data_path),
        "data_files_sha256": data_digest(data_path),
        "nlat": int(meta["nlat"]),
        "nlon": int(meta["nlon"]),
        "grid": str(meta["grid"]),
        "lmax": meta.get("lmax"),
        "reduced": bool(meta.get("reduced", False)),
        "dt_frame": meta.get("dt_frame"),
        "time_units": meta.get("time_units"),
        "model": model,
        "preset": str(s.preset),
        "seed": int(seed),
        "n_parameters": int(best.get("n_parameters", 0)),
        "architecture": model_architecture(model, str(s.preset)),
        "lr": float(best["lr"]),
        "selection": "lowest next-step loss (area-weighted MSE in the target's normalised units) of the final model "
        "(last.pt, after the autoregressive fine-tune) on the valid split, "
        + (
            f"{lr_info.get('rule', 'swept')} on seed {sweep_seed}, reused for the other seeds"
            if s.get("sweep_seed") is not None
            else f"{lr_info.get('rule', 'swept')} on every seed"
        ),
        "sweep": [_run_record(r) for r in sweep],
        "lr_selection": lr_info,
        "run": _run_record(best),
        **{
            k: v
            for k, v in _run_record(best).items()
            if k in ("valid_over_train", "train_cpu_seconds", "train_threads")
        },
        # the CPU-seconds of every run of the sweep, recorded once: on the sweep seed's cell (lr_selection.sweep_seed;
        # null on the seeds that reused its rate; records.cell_sweep_cpu_seconds)
        "sweep_cpu_seconds": _sum_known([_run_record(r)["train_cpu_seconds"] for r in sweep])
        if sweep_seed == int(seed)
        else None,
        "trainer": OmegaConf.to_container(s.trainer, resolve=True),
        "trainer_resolved": trainer_resolved,
        "target": str(trainer_resolved.get("target", "frame")),
        "steps": int(best["step"]),
        "evaluation": {
            **OmegaConf.to_container(s.evaluation, resolve=True),
            "n_forecasts": int(results["n_forecasts"]),
            "mean_key": n20,
        },
        "next_step": summaries["next_step"],
        "rollout_mean": summaries["rollout_mean"],
        "curves": summaries["curves"],
        "stability": stability_summary(results.get("stability")),
        "lead_time": results["lead_time"],
        "lead_time_hours": results.get("lead_time_hours"),
        "units": results.get("units"),
        "commands": {
            "benchmark": cfg.get("_command") or _benchmark_command(cfg),
            "train": list(dict.fromkeys([r["command"] for r in (*sweep, best) if r.get("command")])),
            "selected_train": best["command"],
            "rollout": rollout_cmd,
        },
        "minutes": {"train_wall": t_train / 60.0, "eval_wall": t_eval / 60.0, "dataset_wall": (t0 - t_start) / 60.0},
        "versions": versions(),
        "machine": machine(_device(cfg)),
        "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_json_atomic(cell_path(s.results_dir, key, model, seed), record)
    return record


# ---------------------------------------------------------------------------------------------- the grid


def benchmark(cfg) -> dict:
    """Run (or resume) every unfinished cell of the grid; returns ``{"cells": [...], "ran": n, "skipped": n,
    "failed": [...]}``. ``scale.results_dir`` and ``scale.work_dir`` are resolved first
    (:func:`dandelion.benchmarks.paths.resolve_scale_dirs`; ``_argv``: the command line).

    A cell whose every learning rate diverged is reported in ``failed`` (with the reason) and the grid goes on.
    With ``generate_only`` set, only the datasets of the selected cells are generated (or completed), nothing is
    trained, and the result also lists them under ``generated`` (dataset key -> folder). With ``train_rates`` set,
    only those sweep runs are trained
    (:func:`dandelion.benchmarks.grid.parallel.train_rates`), listed under ``trained``.
    """
    cfg = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(cfg)
    resolve_scale_dirs(cfg, cfg.get("_argv"))
    if cfg.scale.get("threads"):
        torch.set_num_threads(int(cfg.scale.threads))
    grid = cells(cfg)
    ran = skipped = 0
    failed = []
    print(
        f"[benchmark] scale={cfg.scale.name}: {len(grid)} cells, {sum(c['finished'] for c in grid)} finished",
        flush=True,
    )
    if cfg.get("generate_only") and not cfg.get("dry_run"):
        generated = {key: str(ensure_dataset(cfg, key)) for key in dict.fromkeys(c["dataset"] for c in grid)}
        for key, path in generated.items():
            print(f"[benchmark] {key}: complete at {path}", flush=True)
        return {"cells": [], "ran": 0, "skipped": len(grid), "failed": [], "generated": generated}
    if cfg.get("train_rates") is not None and not cfg.get("dry_run"):
        return {"cells": [], "ran": 0, "skipped": len(grid), "failed": [], "trained": train_rates(cfg, grid)}
    if cfg.get("dry_run"):
        for c in grid:
            print(f"  {c['dataset']:<28} {c['model']:<10} seed {c['seed']}: {c['state']} ({c['path']})")
        price = cfg.get("price")
        if price or (price is None and str(cfg.scale.get("device") or "cpu").startswith("cuda")):
            priced = print_price(cfg, grid)
            return {"cells": [], "ran": 0, "skipped": len(grid), "failed": [], "price": priced}
    for c in grid:
        if cfg.get("dry_run"):
            continue
        refs = references_of(dataset_spec(cfg, c["dataset"])["dataset"])  # the oracle where the flow is declared
        stale = [
            n for n in refs if stored_hash(reference_path(cfg.scale.results_dir, c["dataset"], n)) != c["protocol_hash"]
        ]
        if stale:  # missing, or made under another protocol
            path = ensure_dataset(cfg, c["dataset"])
            for name in stale:
                refs[name](cfg, c["dataset"], path)
        if c["finished"]:
            skipped += 1
            continue
        t0 = time.perf_counter()
        try:
            rec = run_cell(cfg, c["dataset"], c["model"], c["seed"])
        except FloatingPointError as err:
            failed.append(f"{c['dataset']}/{c['model']}/seed{c['seed']}: {err}")
            print(f"[benchmark] FAILED {failed[-1]}", flush=True)
            continue
        ran += 1
        print(
            f"[benchmark] {c['dataset']} {c['model']} seed {c['seed']}: lr {rec['lr']:g}, next-step VRMSE "
            f"{rec['next_step']['vrmse']['mean']:.4f}, 1:20 {rec['rollout_mean']['vrmse']['mean']:.4f} "
            f"({(time.perf_counter() - t0) / 60:.1f} min) -> {c['path']}",
            flush=True,
        )
    return {
        "cells": [{k: (str(v) if isinstance(v, Path) else v) for k, v in c.items()} for c in grid],
        "ran": ran,
        "skipped": skipped,
        "failed": failed,
    }


def check(cfg, overrides=()) -> None:
    """What ``dandelion-benchmark`` checks before any work: the device, that ``only.*`` names datasets and models of
    the scale, that ``train_rates`` (if set) are rates of the ladder, and that ``scale.results_dir`` and
    ``scale.work_dir`` can be found from the current directory (:func:`dandelion.benchmarks.paths.resolve_scale_dirs`).
    Raises :class:`dandelion.cli.common.UsageError` (with the closest name, or the option to pass)."""
    resolve_scale_dirs(cfg, overrides)
    if not cfg.get("dry_run"):  # a dry run lists and prices a GPU scale on any machine
        check_device(cfg.get("device") or cfg.scale.get("device") or "cpu")
    only = cfg.get("only") or {}
    for key, choices in (("datasets", list(cfg.scale.datasets)), ("models", [str(m) for m in cfg.scale.models])):
        for name in only.get(key) or []:
            check_choice(name, choices, f"only.{key}")
    check_rates(cfg)


def main(argv: list[str] | None = None) -> None:
    """``dandelion-benchmark scale=cpu|full [only.datasets=[..]] [only.models=[..]] [device=..] [dry_run=true]
    [generate_only=true] [train_rates=[..]]`` (``--help``)."""
    argv = list(sys.argv[1:] if argv is None else argv)

    def _job(cfg: DictConfig) -> None:
        OmegaConf.set_struct(cfg, False)
        cfg._argv = [a for a in argv if a != "--debug"]
        out = benchmark(cfg)
        print(json.dumps({k: v for k, v in out.items() if k != "cells"}))

    run("dandelion-benchmark", "benchmark", _job, check=check, argv=argv)


if __name__ == "__main__":
    main()
