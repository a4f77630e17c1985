"""``dandelion-bench``: the one timing CLI of the package (models, solvers, the Dandelion profile) -> JSON.

Targets (each a module of its own, see there for what is measured and how):

* ``target=models`` (:mod:`dandelion.benchmarks.speed.models`): forward time, training-step time,
  saved activations and peak memory per sample of every model in one process (interleaved
  repeats), with ratios to Dandelion, the parameter table, and on CUDA the largest batch that fits;
* ``target=solvers`` (:mod:`dandelion.benchmarks.speed.solvers`): seconds per simulated frame of
  every dataset's solver, and our Galewsky solver next to torch-harmonics' example solver;
* ``target=profile`` (:mod:`dandelion.benchmarks.speed.profile`): Dandelion's time split by layer
  category and the bytes its warps must move next to the measured memory bandwidth;
* ``target=roofline`` (:mod:`dandelion.benchmarks.speed.roofline`): FLOPs, bytes moved and saved activations of
  one training step of any model at any grid, counted on the CPU (fake tensors), priced on an H200 and an H100;
* ``target=memory`` (:mod:`dandelion.benchmarks.speed.memory`): saved activations per training phase and the
  micro-batch plan that fits a GPU's memory (the table of ``benchmarks/speed/README.md``);
* ``target=loader`` (:mod:`dandelion.benchmarks.speed.loader`): samples per second of the trainer's data loader
  alone, so that a step's record says whether the loader or the model limits it;
* ``target=export`` (:mod:`dandelion.benchmarks.speed.export_memory`): peak resident memory of ``dandelion-export``
  runs of growing size, each a fresh process (the table of ``benchmarks/speed/README.md``).

The primitives (clocks, training step, saved activations, peak memory) are in
:mod:`dandelion.benchmarks.speed.measure`. Every JSON carries the machine (CPU model, cores, torch
threads, load average, GPU name), the versions (Python, torch, torch-harmonics, CUDA) and the
settings. Nothing is written into the repository unless asked: the JSON goes to the run folder
``outputs/bench/<date>_<time>_<target>/bench_<target>.json`` (hydra's run directory, git-ignored)
unless ``output=PATH`` names the file. Use::

    dandelion-bench target=models                                  # tiny and small presets, 32x64 and 64x128, CPU
    dandelion-bench target=models 'models.presets=[small]' 'models.resolutions=[[64,128]]' models.n_repeat=5
    dandelion-bench target=models device=cuda 'models.presets=[paper]' 'models.resolutions=[[256,512]]' \\
        'models.dtypes=[fp32,bf16]' models.disco_optimized_kernel=false models.largest_batch=true
    dandelion-bench target=solvers
    dandelion-bench target=profile 'profile.presets=[small]'
    dandelion-bench target=roofline output=benchmarks/results/speed/roofline_paper_256x512_bf16_<date>.json

Committed JSONs live in ``benchmarks/results/speed/`` (``<target>_<preset>_<nlat>x<nlon>_<dtype>_<date>.json``,
GPU runs with the machine in the name); the rest stay in the run folder.
"""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from dandelion.benchmarks.speed.export_memory import bench_export
from dandelion.benchmarks.speed.loader import bench_loader
from dandelion.benchmarks.speed.measure import DTYPES
from dandelion.benchmarks.speed.memory import bench_memory
from dandelion.benchmarks.speed.models import bench_models
from dandelion.benchmarks.speed.profile import bench_profile
from dandelion.benchmarks.speed.roofline import DEVICES, bench_roofline
from dandelion.benchmarks.speed.solvers import bench_solvers
from dandelion.cli.common import UsageError, check_choice, check_device, check_positive, run
from dandelion.datasets.scenario import available_scenarios
from dandelion.registry import available_models
from dandelion.runtime import machine, versions, write_json_atomic

__all__ = ["TARGETS", "bench", "default_output", "check", "main"]

#: target name -> (job, config section)
TARGETS = {
    "models": (bench_models, "models"),
    "solvers": (bench_solvers, "solvers"),
    "profile": (bench_profile, "profile"),
    "roofline": (bench_roofline, "roofline"),
    "memory": (bench_memory, "memory"),
    "loader": (bench_loader, "loader"),
    "export": (bench_export, "export"),
}

#: What the numbers of every target mean (copied into each JSON).
METHOD = {
    "time": "median over repeats; CPU: process CPU time (time.process_time) next to wall time; "
    "CUDA: synchronised wall time",
    "saved_activations": "unique storages packed by torch.autograd.graph.saved_tensors_hooks in one training forward, "
    "parameters and buffers excluded",
    "peak_memory": "peak allocated above the allocation at the start of the call; "
    "CUDA: torch.cuda.max_memory_allocated; "
    "CPU: running sum of the torch profiler's allocator events (profile_memory=True)",
}


def default_output(target: str, run_dir: str | Path | None = None) -> Path:
    """Where a run writes its JSON without ``output=``: ``<run_dir>/bench_<target>.json``.

    ``run_dir`` defaults to a new ``outputs/bench/<date>_<time>_<target>`` (git-ignored) under the
    current directory, the folder hydra makes for a command-line run.
    """
    if run_dir is None:
        run_dir = Path("outputs") / "bench" / f"{time.strftime('%Y-%m-%d_%H-%M-%S')}_{target}"
    return Path(run_dir) / f"bench_{target}.json"


def bench(cfg, run_dir: str | Path | None = None) -> dict:
    """The ``dandelion-bench`` job: runs ``cfg.target``, writes the JSON atomically (after every
    measurement with ``"partial": true``, at the end ``false``) and returns its content.

    Raises
    ------
    ValueError
        For an unknown target, or ``device=cuda`` where CUDA is not available.
    """
    cfg = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(cfg)
    target, device = str(cfg.target), str(cfg.device)
    if target not in TARGETS:
        raise ValueError(f"target={target!r}: use one of {', '.join(f'target={t}' for t in TARGETS)}")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device={device} but CUDA is not available: use device=cpu")
    if cfg.get("threads") and device == "cpu":
        torch.set_num_threads(int(cfg.threads))
    compiling = bool((cfg.get(TARGETS[target][1]) or {}).get("compile_kernels", False))
    if compiling:
        # compile in this process: inductor's pool of compile workers stays alive after compiling and
        # slows the other models measured in the same process (SFNO's CPU step by up to 15 % here)
        import torch._inductor.config as inductor_config

        inductor_config.compile_threads = 1
    path = Path(cfg.output) if cfg.get("output") else default_output(target, run_dir)
    job, section = TARGETS[target]
    out = {
        "target": target,
        "machine": machine(device),
        "versions": versions(),
        "method": METHOD,
        "settings": OmegaConf.to_container(cfg, resolve=True),
        "command": shlex.join(["dandelion-bench", *sys.argv[1:]]),
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    out["machine"]["threads"] = torch.get_num_threads()
    if compiling:
        out["machine"]["inductor_compile_threads"] = 1

    def save(o: dict) -> None:
        write_json_atomic(path, {**o, "partial": True})

    job(cfg[section], device, save=save, out=out)
    out["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    out["machine"]["load_average_end"] = machine(device).get(
        "load_average"
    )  # the machine may be shared: load before and after
    out["partial"] = False
    write_json_atomic(path, out)
    print(f"[bench] wrote {path}", flush=True)
    return out


def _job(cfg: DictConfig) -> None:
    bench(cfg, run_dir=HydraConfig.get().runtime.output_dir)


def check(cfg, overrides=()) -> None:
    """What ``dandelion-bench`` checks before measuring: the target, the device, the thread count, and the
    names the chosen target will run (``models.names`` and ``models.dtypes``, or ``solvers.scenarios``), so that
    a misspelt one fails at once rather than as a row of errors after the others were measured."""
    target = check_choice(cfg.get("target", "models"), tuple(TARGETS), "target")
    check_device(cfg.get("device", "cpu"))
    check_positive(cfg, ["threads"])
    if target == "models":
        for name in cfg.models.get("names") or []:
            check_choice(name, available_models(), "models.names")
        for key in ("dtypes", "largest_batch_dtypes"):
            for dtype in cfg.models.get(key) or []:
                check_choice(dtype, DTYPES, f"models.{key}")
    elif target == "roofline":
        for name in cfg.roofline.get("names") or []:
            check_choice(name, available_models(), "roofline.names")
        check_choice(cfg.roofline.get("dtype", "bf16"), DTYPES, "roofline.dtype")
        for dev in cfg.roofline.get("devices") or []:
            check_choice(dev, tuple(DEVICES), "roofline.devices")
        check_positive(cfg, [f"roofline.{k}" for k in ("nlat", "nlon", "batch", "in_channels", "out_channels")])
    elif target == "memory":
        for name in cfg.memory.get("names") or []:
            check_choice(name, available_models(), "memory.names")
    elif target == "loader" and not cfg.loader.get("path"):
        raise UsageError("target=loader needs loader.path=<a dataset folder> (written by dandelion-generate)")
    elif target == "export" and not (cfg.export.get("checkpoint") and cfg.export.get("dataset_path")):
        raise UsageError(
            "target=export needs export.checkpoint=RUN/best.pt and export.dataset_path=DIR (and export.dataset=NAME)"
        )
    elif target == "solvers":
        for name in cfg.solvers.get("scenarios") or []:
            check_choice(name, available_scenarios(), "solvers.scenarios")


def main(argv: list[str] | None = None) -> None:
    """Run ``dandelion-bench``.

    ``dandelion-bench target=models|solvers|profile|roofline [device=..] [output=..] [<target section>.* overrides]``
    (``--help``).
    """
    run("dandelion-bench", "bench", _job, check=check, argv=argv)


if __name__ == "__main__":
    main()
