"""``dandelion-quickstart``: the whole main path on real generated data, on a laptop CPU, in minutes.

Steps (configs/experiment/quickstart.yaml, the embedded default):

1. generate a small reduced Galewsky dataset at 32x64 (``dandelion.datasets.generate.generate``);
2. train the ``tiny`` Dandelion and the ``tiny`` SFNO for a fixed number of optimiser steps each
   (``dandelion.cli.train.train``; 600 steps, so the table does not depend on the machine's speed or
   load; ``trainer.max_minutes`` is a safety stop, and a model it cuts is flagged "stopped early at step N of
   M" in the console and in the table);
3. roll each out on the test split and score it (``dandelion.evaluation.scoring.evaluate``), writing
   the forecasts as CF netCDF (``forecasts.nc``) and PNG plots;
4. print a comparison table (next-step and 1:20 VRMSE per model, area-weighted and the Well's) and the
   paths of the netCDF files and plots.

Use::

    dandelion-quickstart                               # the full form (minutes on 2 cores)
    dandelion-quickstart --fast                        # the reduced form the test suite runs (seconds)
    dandelion-quickstart quickstart.output_dir=DIR device=cuda

``--debug`` shows the traceback of an error (otherwise one line, exit status 2). Arguments other than
``--fast`` and ``--debug`` are hydra overrides of ``train.yaml`` with ``experiment=quickstart``.
A second run reuses a complete dataset folder (generation resumes) and retrains the models.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from omegaconf import OmegaConf

from dandelion.cli.common import UsageError, check_choice, check_device, check_positive, compose_config, guard
from dandelion.cli.rollout import rollout
from dandelion.cli.train import train
from dandelion.datasets.generate import generate
from dandelion.registry import available_models
from dandelion.reporting.figures import plot_error_vs_lead
from dandelion.runtime import device_name, write_json_atomic, write_text_atomic

__all__ = ["compose_quickstart", "quickstart", "check", "main"]

PROG = "dandelion-quickstart"


def compose_quickstart(overrides: list[str] | None = None, fast: bool = False):
    """The quickstart configuration: ``train.yaml`` + ``experiment=quickstart`` + ``overrides``
    (+ ``quickstart.fast_overrides`` when ``fast`` or ``quickstart.fast=true``)."""
    overrides = ["experiment=quickstart", *(overrides or [])]
    cfg = compose_config("train", overrides)
    if fast or cfg.quickstart.get("fast", False):
        cfg = compose_config(
            "train", [overrides[0], *list(cfg.quickstart.fast_overrides), *overrides[1:], "quickstart.fast=true"]
        )
    return cfg


def _stopped_early(r: dict) -> str | None:
    """The warning line of a model whose training the wall-clock safety stop cut, else None."""
    if r.get("stopped") != "max_minutes":
        return None
    return (
        f"WARNING: {r['model']} stopped early at step {r['step']} of {r['total_steps']} (trainer.max_minutes="
        f"{r['max_minutes']:g} ran out): its numbers are not the quickstart's; rerun on a less busy machine or "
        "raise trainer.max_minutes"
    )


def _fmt_table(rows: list[dict], n20: int) -> str:
    head = [
        "model",
        "params",
        "steps",
        "train min",
        "VRMSE next",
        f"VRMSE 1:{n20}",
        "Well VRMSE next",
        f"Well VRMSE 1:{n20}",
    ]
    lines = [head] + [
        [
            r["model"],
            f"{r['n_parameters']:,}",
            f"{r['step']}/{r['total_steps']}" + (" STOPPED EARLY" if _stopped_early(r) else ""),
            f"{r['minutes']:.1f}",
            f"{r['next']:.4f}",
            f"{r['mean']:.4f}",
            f"{r['well_next']:.4f}",
            f"{r['well_mean']:.4f}",
        ]
        for r in rows
    ]
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(head))]
    fmt = lambda line: "| " + " | ".join(str(c).ljust(w) for c, w in zip(line, widths)) + " |"  # noqa: E731
    notes = [w for w in map(_stopped_early, rows) if w]
    return "\n".join(
        [
            fmt(lines[0]),
            "|" + "|".join("-" * (w + 2) for w in widths) + "|",
            *map(fmt, lines[1:]),
            *(["", *notes] if notes else []),
        ]
    )


def quickstart(cfg) -> dict:
    """Run the quickstart from a composed configuration (:func:`compose_quickstart`).

    Returns
    -------
    dict with ``table`` (markdown text), ``rows`` (per model: next-step and 1:20 VRMSE, ...),
    ``netcdf`` and ``plots`` (paths), ``dataset`` (folder) and ``minutes`` (wall time of each stage).
    """
    q = cfg.quickstart
    out = Path(q.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    data_path = Path(cfg.dataset.path)
    device = device_name(cfg.get("device", "cpu"))
    times, cpu = {}, {}
    c0 = time.process_time()

    t0 = time.perf_counter()
    print(f"[1/4] generating {cfg.dataset.name} at {cfg.dataset.nlat}x{cfg.dataset.nlon} in {data_path}", flush=True)
    generate(
        OmegaConf.create(
            {
                "dataset": OmegaConf.to_container(cfg.dataset, resolve=True),
                "device": device,
                "batch_size": int(q.generate_batch_size),
                "progress": bool(cfg.trainer.get("progress", True)),
            }
        )
    )
    times["generate"] = (time.perf_counter() - t0) / 60
    cpu["generate"], c0 = (time.process_time() - c0) / 60, time.process_time()

    rows, netcdf, plots, rollout_dirs = [], {}, {}, {}
    for i, name in enumerate(q.models, 1):
        t0 = time.perf_counter()
        which = f"model {i} of {len(q.models)}"
        run_dir = out / "runs" / str(name)
        print(f"[2/4] training {name} ({q.preset}; {which}) in {run_dir}", flush=True)
        tcfg = cfg.copy()
        OmegaConf.set_struct(tcfg, False)
        tcfg.model = OmegaConf.create({"name": str(name), "preset": str(q.preset), "overrides": {}})
        tcfg.run_dir = str(run_dir)
        tcfg.resume = None
        if (run_dir / "last.pt").exists():  # a fresh run each time: clear the previous checkpoints and logs
            for f in ("last.pt", "best.pt", "metrics.jsonl", "result.json"):
                (run_dir / f).unlink(missing_ok=True)
        res = train(tcfg)
        times[f"train_{name}"] = (time.perf_counter() - t0) / 60
        cpu[f"train_{name}"], c0 = (time.process_time() - c0) / 60, time.process_time()

        t0 = time.perf_counter()
        print(f"[3/4] rolling out {name} on the test split ({which})", flush=True)
        rcfg = compose_config(
            "rollout",
            [
                f"checkpoint={res['best']}",
                f"dataset={cfg.dataset.name}",
                f"dataset.path={data_path}",
                f"device={device}",
                f"n_steps={int(q.n_steps)}",
                f"init_stride={int(q.init_stride)}",
                f"max_inits={q.max_inits if q.max_inits is not None else 'null'}",
                f"output_dir={out / ('rollout_' + str(name))}",
                "save_forecasts=true",
                "include_truth=true",
                f"overwrite={str(bool(q.overwrite)).lower()}",
                f"spectra_leads=[1,{min(5, int(q.n_steps))},{int(q.n_steps)}]",
                f"map_leads=[{','.join(str(int(k)) for k in q.get('map_leads', [1, 5, 20]))}]",
                f"progress={str(bool(cfg.trainer.get('progress', True))).lower()}",
            ],
        )
        r = rollout(rcfg)
        times[f"rollout_{name}"] = (time.perf_counter() - t0) / 60
        cpu[f"rollout_{name}"], c0 = (time.process_time() - c0) / 60, time.process_time()
        s = r["results"]["summary"]
        n20 = next(k for k in s if k.startswith("mean_1_"))
        rows.append(
            {
                "model": str(name),
                "n_parameters": int(res.get("n_parameters", 0)),
                "minutes": float(res.get("minutes", 0.0)),
                "next": s["next_step"]["vrmse"]["mean"],
                "mean": s[n20]["vrmse"]["mean"],
                "well_next": s["next_step"]["vrmse_well"]["mean"],
                "well_mean": s[n20]["vrmse_well"]["mean"],
                "stopped": res.get("stopped"),
                "step": int(res.get("step", 0)),
                "total_steps": int(res.get("total_steps", 0)),
                "max_minutes": float(cfg.trainer.get("max_minutes") or 0),
            }
        )
        if _stopped_early(rows[-1]):
            print("\n" + "!" * 100 + "\n" + _stopped_early(rows[-1]) + "\n" + "!" * 100 + "\n", flush=True)
        netcdf[str(name)] = r["paths"]["forecasts"]
        plots.update({f"{name}_{k}": v for k, v in r["paths"].items() if v.endswith(".png")})
        rollout_dirs[str(name)] = r["results"]

    print("[4/4] report", flush=True)
    plots["vrmse_vs_lead"] = str(plot_error_vs_lead(rollout_dirs, out / "vrmse_vs_lead.png", metric="vrmse"))
    n20 = min(20, int(q.n_steps))
    table = _fmt_table(rows, n20)
    write_text_atomic(
        out / "results.md",
        f"# Quickstart ({'fast' if q.get('fast') else 'full'} form)\n\n"
        f"Reduced Galewsky dataset {cfg.dataset.nlat}x{cfg.dataset.nlon}, test split, {int(q.n_steps)} steps. "
        "VRMSE averaged over h, u, v (area-weighted; 'Well' = the Well's unweighted definition).\n\n"
        f"{table}\n",
    )
    summary = {
        "table": table,
        "rows": rows,
        "netcdf": netcdf,
        "plots": plots,
        "dataset": str(data_path),
        "minutes": times,
        "cpu_minutes": cpu,
    }
    write_json_atomic(out / "quickstart.json", summary)
    print("\n" + table + "\n")
    print(f"VRMSE averaged over the fields h, u, v; 'next' = lead 1 (4 h), 1:{n20} = mean over leads 1..{n20}.")
    print("netCDF forecasts:")
    for k, v in netcdf.items():
        print(f"  {k}: {v}")
    print("plots:")
    for k, v in plots.items():
        print(f"  {k}: {v}")
    print(f"stage minutes (wall): {json.dumps({k: round(v, 2) for k, v in times.items()})}")
    print(f"stage minutes (CPU of this process): {json.dumps({k: round(v, 2) for k, v in cpu.items()})}")
    return summary


def check(cfg) -> None:
    """What ``dandelion-quickstart`` checks before generating: the device, the models, the output folder,
    the step counts. Raises :class:`dandelion.cli.common.UsageError`."""
    check_device(cfg.get("device", "cpu"))
    for name in cfg.quickstart.models:
        check_choice(name, available_models(), "quickstart.models")
    out = Path(str(cfg.quickstart.output_dir))
    if out.exists() and not out.is_dir():
        raise UsageError(
            f"quickstart.output_dir={out} is a file: "
            "pass quickstart.output_dir=DIR (a new or earlier quickstart folder)"
        )
    check_positive(cfg, ["quickstart.n_steps", "quickstart.init_stride", "trainer.max_steps", "trainer.batch_size"])


def main(argv: list[str] | None = None) -> None:
    """``dandelion-quickstart [--fast] [--debug] [hydra overrides...]``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return
    debug = "--debug" in argv or os.environ.get("HYDRA_FULL_ERROR", "") not in ("", "0")
    fast = "--fast" in argv
    argv = [a for a in argv if a not in ("--fast", "--debug")]
    t0 = time.perf_counter()
    with guard(PROG, debug, name="train", overrides=["experiment=quickstart", *argv]):
        cfg = compose_quickstart(argv, fast=fast)
        check(cfg)
    with guard(PROG, debug, in_job=True):
        quickstart(cfg)
    print(f"quickstart done in {(time.perf_counter() - t0) / 60:.1f} min")


if __name__ == "__main__":
    main()
