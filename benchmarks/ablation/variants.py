"""Ablations on the benchmark grid: a model variant retrained exactly as a finished cell was, and scored alike.

``python -m dandelion.benchmarks.ablation.variants VARIANT --datasets galewsky_32x64 ... [--seeds 0 1 2]``

For every ``(dataset, seed)`` the finished cell of the variant's base model (``results_dir/<dataset>/<model>/
seed<k>.json``, :mod:`dandelion.benchmarks.grid.benchmark`) gives the training command: same data, seed,
learning rate (the cell's swept choice, not swept again) and step budget. The variant trains with that command
plus its model overrides (:data:`VARIANTS`) in its own run folder, and its final model (``last.pt``) is rolled out
on the test split with the scale's evaluation. The result JSON ``results_dir/ablation/<variant>/<dataset>/
seed<k>.json`` is written atomically and a finished one is skipped, so the command resumes; an interrupted
training continues from its ``last.pt``. :func:`ablation_table` renders the comparison (docs/model.md holds the
tables this produced, with the commands).

A variant is scored at its base model's rate: that favours the base model, if anything, so a variant that wins
here wins under its own sweep too (unless a rate the ladder lacks would help the base).
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import time
from pathlib import Path

from omegaconf import OmegaConf

from dandelion.benchmarks.ablation.lead_figure import current_records, lead_curves, lead_figure
from dandelion.benchmarks.grid.cells import cell_path, fmt_value, metric_summaries, model_architecture, protocol_hash
from dandelion.benchmarks.grid.runs import _evaluate
from dandelion.benchmarks.paths import resolve_scale_dirs
from dandelion.cli.common import compose_config as compose
from dandelion.cli.train import train
from dandelion.registry import resolved_hyperparameters
from dandelion.runtime import machine, versions, write_json_atomic

__all__ = ["VARIANTS", "run_variant", "ablation_table", "main"]

#: name -> base model of the grid and the model overrides (``+model.overrides.<key>=<value>``) it adds.
VARIANTS: dict[str, dict] = {
    "spectral_path": {
        "model": "dandelion",
        "overrides": {"spectral_lmax": 32, "spectral_into": "head", "offset_ratio": 0.25},
        "what": "Dandelion small (as its cells were made) plus the zero-initialised per-degree spectral path into the "
        "head's norm, with displacement networks of half the width to stay parameter-matched",
    },
    "spectral_path_lift": {
        "model": "dandelion",
        "overrides": {
            "spectral_lmax": 32,
            "spectral_into": "head",
            "spectral_from": "lift",
            "spectral_anchors": 16,
            "offset_ratio": 0.25,
        },
        "what": "the spectral path read from the lifted features (its size the same for every dataset) with the "
        "per-degree matrices interpolated between 16 anchor degrees (about every second degree), so a degree the data "
        "barely excite shares its weights with its neighbours; parameter-matched by quarter-width displacement nets",
    },
    "spectral_path_output": {
        "model": "dandelion",
        "overrides": {"spectral_lmax": 32, "spectral_into": "output"},
        "what": "Dandelion small plus the spectral path added to the output (a linear input-to-output map)",
    },
    "fixed_warps": {
        "model": "dandelion",
        "overrides": {"fixed_displacements": True},
        "what": "Dandelion small with every warp frozen at its initial displacement stencil (nothing learned where)",
    },
    "cartesian": {
        "model": "dandelion",
        "overrides": {"cartesian_displacement": True},
        "what": "Dandelion small plus each warp head's Cartesian displacement term (a pointwise linear "
        "3-vector per head, zero at initialisation, projected onto the tangent plane; issue #67)",
    },
    "fast_cartesian": {
        "model": "dandelion_fast",
        "overrides": {"cartesian_displacement": True},
        "what": "the cost-matched Dandelion plus each warp head's Cartesian displacement term",
    },
    "advect": {  # the presets' network since they took it: refused now (nothing to compare); its records stay
        "model": "dandelion",
        "overrides": {"advect_state": True},
        "what": "Dandelion small with advected persistence: the step moves the newest frame along a Cartesian "
        "displacement linear in the input (zero at initialisation) before adding the "
        "increment, the semi-Lagrangian step (dandelion/warp/advection.py; issue #67)",
    },
    "stock": {
        "model": "dandelion",
        "overrides": {"advect_state": False},
        "what": "Dandelion small without advected persistence: the presets' network before they took it "
        "(the step adds the increment to the newest frame where it is)",
    },
    "fast_advect": {
        "model": "dandelion_fast",
        "overrides": {"advect_state": True},
        "what": "the cost-matched Dandelion with advected persistence",
    },
    "fast_spectral_path": {
        "model": "dandelion_fast",
        "overrides": {"spectral_lmax": 32, "spectral_into": "head"},
        "what": "the cost-matched Dandelion plus the spectral path into the head's norm",
    },
}


def _scale(scale: str):
    cfg = compose("benchmark", [f"scale={scale}"])
    OmegaConf.set_struct(cfg, False)
    resolve_scale_dirs(cfg, [])
    return cfg


def variant_path(results_dir, variant: str, key: str, seed: int) -> Path:
    """Where the result JSON of ``variant`` on dataset ``key``, seed ``seed`` lives."""
    return Path(results_dir) / "ablation" / variant / key / f"seed{int(seed)}.json"


def run_variant(cfg, variant: str, key: str, seed: int) -> dict:
    """Train and score ``variant`` on ``(key, seed)`` as the base model's finished cell was (see the module docstring).

    Raises
    ------
    FileNotFoundError
        If the base model's cell for ``(key, seed)`` is missing (run ``dandelion-benchmark`` for it first).
    ValueError
        For an unknown variant, or one whose overrides build the base preset's own network.
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}: choose one of {sorted(VARIANTS)}")
    spec = VARIANTS[variant]
    s = cfg.scale
    preset = str(s.preset)
    if resolved_hyperparameters(spec["model"], preset, spec["overrides"]) == resolved_hyperparameters(
        spec["model"], preset, {}
    ):
        raise ValueError(
            f"variant {variant!r} builds the network {spec['model']}'s {preset} preset builds now (its overrides "
            f"{spec['overrides']} are the preset's values): there is nothing to compare; its records, if any, stay "
            "as the measurement of the preset before"
        )
    out = variant_path(s.results_dir, variant, key, seed)
    base_path = cell_path(s.results_dir, key, spec["model"], seed)
    if not base_path.exists():
        raise FileNotFoundError(
            f"{base_path}: the {spec['model']} cell of {key} seed {seed} is missing; run dandelion-benchmark "
            f"scale={s.name} 'only.datasets=[{key}]' 'only.models=[{spec['model']}]' first"
        )
    base = json.loads(base_path.read_text())
    if out.exists():
        rec = json.loads(out.read_text())
        made = (
            rec.get("model_overrides"),
            rec.get("base_protocol_hash", base.get("protocol_hash")),
            rec.get("base_architecture", base.get("architecture")),
        )
        if made != (spec["overrides"], base.get("protocol_hash"), base.get("architecture")):
            raise ValueError(
                f"{out} was made with other overrides or another base cell ({made[0]}, protocol {made[1]}, base "
                f"network {made[2]}; now {spec['overrides']}, {base.get('protocol_hash')}, "
                f"{base.get('architecture')}): delete it and its run folder "
                f"{Path(s.work_dir) / 'ablation' / variant / key / f'seed{int(seed)}'} to make it again"
            )
        return rec
    run_dir = Path(s.work_dir) / "ablation" / variant / key / f"seed{int(seed)}"
    over = [o for o in shlex.split(base["commands"]["selected_train"])[1:] if not o.startswith("run_dir=")]
    over += [f"run_dir={run_dir}"] + [f"+model.overrides.{k}={fmt_value(v)}" for k, v in spec["overrides"].items()]
    tcfg = compose("train", over)
    OmegaConf.set_struct(tcfg, False)
    if (run_dir / "result.json").exists():
        res = json.loads((run_dir / "result.json").read_text())
    else:
        if (run_dir / "last.pt").exists():
            tcfg.resume = str(run_dir / "last.pt")
        cpu0 = time.process_time()
        res = train(tcfg)
        res["train_cpu_seconds"] = time.process_time() - cpu0
    results, rollout_cmd = _evaluate(cfg, key, Path(res["last"]), Path(base["dataset_path"]), run_dir / "rollout_test")
    record = {
        "variant": variant,
        "what": spec["what"],
        "base_model": spec["model"],
        "model_overrides": spec["overrides"],
        "dataset_key": key,
        "seed": int(seed),
        "lr": float(base["lr"]),
        "n_parameters": int(res.get("n_parameters", 0)),
        "base_n_parameters": int(base.get("n_parameters", 0)),
        "base_protocol_hash": base.get("protocol_hash"),
        "base_architecture": base.get("architecture"),
        "train": {k: res.get(k) for k in ("step", "stopped", "train_loss", "val_loss", "val_vrmse", "minutes")},
        "train_cpu_seconds": res.get("train_cpu_seconds"),
        **metric_summaries(results),
        "commands": {"train": "dandelion-train " + " ".join(shlex.quote(o) for o in over), "rollout": rollout_cmd},
        "versions": versions(),
        "machine": machine("cpu"),
        "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_json_atomic(out, record)
    return record


def _score(rec: dict, which: str) -> float:
    return float(rec[which]["vrmse"]["mean"])


def _cell(values: list[float], digits: int = 4) -> str:
    """``mean (min-max, n)`` of the seeds' values, or a dash."""
    values = [v for v in values if v is not None]
    if not values:
        return "—"
    mean = statistics.fmean(values)
    if len(values) == 1:
        return f"{mean:.{digits}f} (1)"
    return f"{mean:.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f}, {len(values)})"


def ablation_table(
    results_dir,
    variant: str,
    keys: list[str],
    references: list[str],
    protocols: dict | None = None,
    architectures: dict | None = None,
) -> str:
    """Markdown: per dataset, next-step and 1:20 VRMSE (mean, min-max over seeds, seed count), training CPU-seconds
    per run (the step cost: every run takes the same number of steps) and parameters of the variant, its base model's
    cells and the ``references`` models' cells (e.g. ``["sfno"]``). ``protocols``: dataset key -> the scale's
    current ``protocol_hash``; cells made under another protocol (stale ones, which the next benchmark run remakes)
    are left out, and so are variant records whose base cell's protocol was another. ``architectures``: model ->
    the network fingerprint its preset builds now (:func:`~dandelion.benchmarks.grid.cells.model_architecture`);
    cells of another network, and variant records made on a base cell of another network (a preset changed since),
    are left out too (:func:`current_records`)."""
    spec = VARIANTS[variant]
    root = Path(results_dir)
    lines = [
        "| dataset | model | next-step VRMSE | 1:20 VRMSE | train CPU-s per run | parameters |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for key in keys:
        current = (protocols or {}).get(key)
        rows = []
        for model in [spec["model"], *references]:
            recs = [json.loads(p.read_text()) for p in sorted((root / key / model).glob("seed*.json"))]
            rows.append((model, current_records(recs, current, (architectures or {}).get(model))))
        vrecs = [json.loads(p.read_text()) for p in sorted((root / "ablation" / variant / key).glob("seed*.json"))]
        base_arch = (architectures or {}).get(spec["model"])
        rows.insert(1, (f"{spec['model']} + {variant}", current_records(vrecs, current, base_arch, "base_")))
        for name, recs in rows:
            n_par = sorted({int(r.get("n_parameters", 0)) for r in recs})
            cpu = [r.get("train_cpu_seconds") for r in recs]
            lines.append(
                f"| {key} | {name} | {_cell([_score(r, 'next_step') for r in recs])} | "
                f"{_cell([_score(r, 'rollout_mean') for r in recs])} | {_cell(cpu, 0)} | "
                f"{', '.join(f'{n:,}' for n in n_par) or '—'} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    """``python -m dandelion.benchmarks.ablation.variants VARIANT --datasets KEY ... [--seeds ...] [--table]``."""
    p = argparse.ArgumentParser(
        prog="python -m dandelion.benchmarks.ablation.variants", description=__doc__.split("\n")[0]
    )
    p.add_argument("variant", choices=sorted(VARIANTS))
    p.add_argument("--datasets", nargs="+", required=True, help="dataset keys of the scale, e.g. galewsky_32x64")
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--scale", default="cpu")
    p.add_argument("--references", nargs="*", default=["sfno"], help="models whose cells the table lists too")
    p.add_argument("--table", action="store_true", help="print the table of what exists; train nothing")
    p.add_argument("--figure", default=None, help="folder for one error-against-lead figure per dataset")
    a = p.parse_args(sys.argv[1:] if argv is None else argv)
    cfg = _scale(a.scale)
    if not a.table:
        for key in a.datasets:
            for seed in a.seeds:
                rec = run_variant(cfg, a.variant, key, seed)
                print(
                    f"[ablation] {a.variant} {key} seed {seed}: next-step VRMSE {_score(rec, 'next_step'):.4f}, "
                    f"1:20 {_score(rec, 'rollout_mean'):.4f}",
                    flush=True,
                )
    protocols = {key: protocol_hash(cfg, key) for key in a.datasets}
    models = [VARIANTS[a.variant]["model"], *a.references]
    archs = {m: model_architecture(m, str(cfg.scale.preset)) for m in models}
    print(ablation_table(cfg.scale.results_dir, a.variant, a.datasets, a.references, protocols, archs), end="")
    if a.figure:
        base = VARIANTS[a.variant]["model"]
        for key in a.datasets:
            curves = lead_curves(cfg.scale.results_dir, a.variant, base, key, a.references, protocols[key], archs)
            title = f"{key}: {base} and {base} + {a.variant}, test split"
            print("wrote", lead_figure(curves, Path(a.figure) / f"lead_{a.variant}_{key}.png", title))


if __name__ == "__main__":
    main()
