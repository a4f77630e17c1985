#!/usr/bin/env python3
"""GPU check of Dandelion: the numbers that need a GPU, in one call of under 10 minutes, one JSON.

    python3 tools/gpu/gpu_check.py --out OUTDIR [--wheels DIR]     # on an offline CUDA machine (budget 560 s)
    python3 tools/gpu/gpu_check.py --out OUTDIR --dry-run          # the same steps on the CPU at tiny sizes

Steps, the numbers that matter first (each a subprocess with its own time limit, cut to what is left of
``--budget-s``; the limits of the real plan add up to less than the budget; a failed step is recorded and the next
one runs; ``gpu_check.json`` is rewritten after every step, so a cut call keeps what was measured):

0. ``environment``; ``install`` (not in a dry run): the wheels of ``--wheels`` (default ``$DANDELION_WHEELS`` or
   ``shared/wheels``, made by ``tools/gpu/prepare_gpu_wheels.sh``; torch itself is the machine's) and this working
   tree, with ``pip --no-index --no-deps --target`` into a scratch folder put on ``PYTHONPATH``: no network;
1. ``bench_<model>`` for dandelion, dandelion_fast, sfno and flower2d, one process each: ``dandelion-bench
   target=models`` at 256x512, paper presets, batch 4, bf16 autocast only (the dtype training uses): training step
   time and peak memory, each row printed and copied into the JSON when its process ends;
2. ``finetune_step`` (``tools/gpu/finetune_step.py``): one fine-tune step of the paper Dandelion at 256x512 at the
   GPU scales' batch (16) on 4-step windows, micro-batched by the trainer's plan: step time and peak memory next to
   the device's memory;
3. ``build_kernels`` (``tools/gpu/build_torch_harmonics_cuda.py --install``): torch-harmonics' DISCO and attention
   CUDA kernels compiled from the wheel's sources into the scratch install (a dry run only finds the sources), then
   ``bench_disco`` and ``bench_s2transformer`` at 64x128 (paper, batch 4, bf16); without the kernels DISCO runs its
   pure-torch path there (allowed up to 64x128) and S2 attention refuses (its row carries the one-line reason);
4. ``tests`` (``tests/dandelion/test_gpu_models.py``: CUDA against CPU, bf16), ``generate`` (a 256x512 Galewsky
   dataset, 16 trajectories in one batch, timed) and ``train`` (a short run, ``trainer=quick``, tiny Dandelion) last.

``OUTDIR/gpu_check.json`` holds the machine, each step's command, exit status, seconds and last lines of output, and
the results; ``OUTDIR/gpu_check.log`` every step's full output. ``--dry-run`` runs the same steps on the CPU at tiny
sizes (16x32, tiny presets) without installing, so the script is tested where no GPU is
(``tests/tools/test_gpu_check.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Benchmarked first, in this order, each in its own process, at the full grid.
MODELS = ["dandelion", "dandelion_fast", "sfno", "flower2d"]
#: Benchmarked after the kernel build, at the small grid.
KERNEL_MODELS = ["disco", "s2transformer"]
#: The call's time limit (the device tool's 10-minute command, less start-up and transfers).
BUDGET_S = 560.0

#: Sizes of the real check and of the dry run. The dry run changes sizes only, never the steps.
SIZES = {
    "real": {
        "device": "cuda",
        "preset": "paper",
        "nlat": 256,
        "nlon": 512,
        "small": [64, 128],
        "batch": 4,
        "n_repeat": 3,
        "n_warmup": 1,
        "finetune": ["--preset", "paper", "--nlat", "256", "--nlon", "512", "--batch", "16", "--n-out", "4"],
        "build": ["--arch", "9.0", "--jobs", str(os.cpu_count() or 8), "--install", "--timeout-s", "110"],
        "gen": {
            "nlat": 256,
            "nlon": 512,
            "lmax": None,
            "n_trajectories": 16,
            "batch_size": 16,
            "n_frames": 6,
            "spinup_days": 0.25,
        },
        "train_preset": "tiny",
        "train_batch": 4,
        "limits": {
            "environment": 15,
            "install": 40,
            "bench_dandelion": 55,
            "bench_dandelion_fast": 40,
            "bench_sfno": 30,
            "bench_flower2d": 35,
            "finetune_step": 50,
            "build_kernels": 120,
            "bench_disco": 30,
            "bench_s2transformer": 30,
            "tests": 30,
            "generate": 30,
            "train": 30,
        },
    },
    "dry": {
        "device": "cpu",
        "preset": "tiny",
        "nlat": 16,
        "nlon": 32,
        "small": [16, 32],
        "batch": 2,
        "n_repeat": 1,
        "n_warmup": 1,
        "finetune": [
            "--preset",
            "tiny",
            "--nlat",
            "16",
            "--nlon",
            "32",
            "--batch",
            "4",
            "--n-out",
            "2",
            "--budget-gib",
            "0.003",
        ],
        "build": ["--dry-run"],
        "gen": {
            "nlat": 16,
            "nlon": 32,
            "lmax": 10,
            "n_trajectories": 4,
            "batch_size": 4,
            "n_frames": 6,
            "spinup_days": 0.1,
        },
        "train_preset": "tiny",
        "train_batch": 2,
        "limits": {
            "environment": 300,
            "install": 0,
            "finetune_step": 300,
            "build_kernels": 300,
            "tests": 300,
            "generate": 300,
            "train": 300,
            **{f"bench_{m}": 300 for m in MODELS + KERNEL_MODELS},
        },
    },
}


class Check:
    """Runs the steps, keeps their records and writes the JSON after each."""

    def __init__(self, out: Path, dry: bool, budget_s: float, python: str):
        self.out, self.dry, self.python = out, dry, python
        self.deadline = time.monotonic() + budget_s
        self.t0 = time.monotonic()
        self.work = Path(tempfile.mkdtemp(prefix="gpu_check_"))
        self.env = dict(os.environ, PYTHONUNBUFFERED="1", HYDRA_FULL_ERROR="1")
        self.log = open(out / "gpu_check.log", "w")
        self.record = {
            "schema": "dandelion-gpu-check/1",
            "dry_run": dry,
            "started_utc": _utc(),
            "budget_s": budget_s,
            "work_dir": str(self.work),
            "notes": [],
            "steps": {},
            "results": {},
        }

    def step(self, name: str, cmd: list[str], limit_s: float) -> int | None:
        left = self.deadline - time.monotonic()
        limit = min(float(limit_s), left - 5.0)
        rec = self.record["steps"][name] = {"command": " ".join(cmd), "limit_s": round(limit, 1)}
        if limit < 5.0:
            rec.update(skipped="no time left in the budget")
            self.save()
            return None
        self.log.write(f"\n===== {name} ({_utc()}, limit {limit:.0f} s)\n$ {rec['command']}\n")
        self.log.flush()
        t0 = time.monotonic()
        try:
            # cwd outside the tree: from ROOT, `python -m` would import ROOT/dandelion (the core sources alone)
            # before the installed package
            p = subprocess.run(cmd, cwd=self.work, env=self.env, capture_output=True, text=True, timeout=limit)
            rc, text = p.returncode, p.stdout + p.stderr
        except subprocess.TimeoutExpired as e:
            rc = 124
            text = _text(e.stdout) + _text(e.stderr) + f"\n[gpu_check] timed out after {limit:.0f} s\n"
        rec.update(
            rc=rc,
            seconds=round(time.monotonic() - t0, 2),
            tail=[ln for ln in text.splitlines() if "USDT" not in ln and "gpuGetDeviceCount" not in ln][-15:],
        )
        self.log.write(text)
        self.log.flush()
        print(
            f"[gpu_check] {name}: rc {rc}, {rec['seconds']:.0f} s (total {time.monotonic() - self.t0:.0f} s)",
            flush=True,
        )
        self.save()
        return rc

    def save(self) -> None:
        self.record["total_s"] = round(time.monotonic() - self.t0, 1)
        tmp = self.out / ".gpu_check.json.tmp"
        tmp.write_text(json.dumps(self.record, indent=1) + "\n")
        os.replace(tmp, self.out / "gpu_check.json")


def _utc() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _text(b) -> str:
    return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")


def _load(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        return {"error": f"{path.name}: {e}"}


def _install(c: Check, wheels: Path, limit: float) -> None:
    site = c.work / "site"
    whl = sorted(str(p) for p in wheels.glob("*.whl")) if wheels.is_dir() else []
    pip = [
        c.python,
        "-m",
        "pip",
        "install",
        "-q",
        "--no-index",
        "--no-deps",
        "--no-compile",
        "--no-cache-dir",
        "--upgrade",
        "--target",
        str(site),
    ]
    cmds = [shlex.join(pip + whl)] if whl else []
    if not whl:
        c.record["notes"].append(
            f"no wheels in {wheels}: only the package was installed, its dependencies had to be on the machine"
        )
    # the package itself, built with the carried setuptools (no build isolation: no network)
    cmds.append(f"PYTHONPATH={shlex.quote(str(site))} " + shlex.join(pip + ["--no-build-isolation", str(ROOT)]))
    c.step("install", ["bash", "-c", " && ".join(cmds)], limit)
    c.env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), c.env.get("PYTHONPATH", "")) if p)
    c.env["PATH"] = os.pathsep.join([str(site / "bin"), c.env.get("PATH", "")])


def _bench(c: Check, s: dict, name: str, nlat: int, nlon: int, limit: float) -> list[dict]:
    """``dandelion-bench target=models`` of one model (bf16, the preset, batch ``s['batch']``); its rows, saved."""
    out = c.work / f"bench_{name}.json"
    cmd = [
        c.python,
        "-m",
        "dandelion.benchmarks.speed.bench",
        "target=models",
        f"device={s['device']}",
        "threads=null",
        f"models.names=[{name}]",
        f"models.presets=[{s['preset']}]",
        f"models.resolutions=[[{nlat},{nlon}]]",
        f"models.batch_sizes=[{s['batch']}]",
        "models.dtypes=[bf16]",
        f"models.n_repeat={s['n_repeat']}",
        f"models.n_warmup={s['n_warmup']}",
        "models.parameter_table=false",
        f"hydra.run.dir={c.work / 'hydra'}",
        f"output={out}",
    ]
    c.step(f"bench_{name}", cmd, limit)
    got = _load(out)
    rows = got.get("rows") or [{"model": name, "error": got.get("error", "no rows written")}]
    c.record["results"].setdefault("bench_models", {"rows": []})["rows"].extend(rows)
    c.save()
    return rows


def run(out: Path, dry: bool, wheels: Path, budget_s: float, python: str = sys.executable) -> dict:
    """Run the check; returns the record written to ``out/gpu_check.json``."""
    out.mkdir(parents=True, exist_ok=True)
    s = SIZES["dry" if dry else "real"]
    c = Check(out, dry, budget_s, python)
    lim = s["limits"]
    py = [python]
    c.step(
        "environment",
        py
        + [
            "-c",
            "import json, platform, torch; print(json.dumps({'python': platform.python_version(), "
            "'torch': torch.__version__, 'cuda': torch.version.cuda, 'cuda_available': torch.cuda.is_available(), "
            "'gpu': torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}))",
        ],
        lim["environment"],
    )
    env_tail = c.record["steps"]["environment"].get("tail") or ["{}"]
    c.record["machine"] = {"platform": platform.platform(), "cpu_count": os.cpu_count(), **_load_str(env_tail[-1])}
    if not dry:
        _install(c, wheels, lim["install"])

    # 1. the training step of the four models at the full grid, one process each (a slow model costs its own row)
    for name in MODELS:
        _bench(c, s, name, s["nlat"], s["nlon"], lim[f"bench_{name}"])

    # 2. one fine-tune step at the GPU scales' batch, micro-batched by the trainer's plan
    step_json = c.work / "finetune_step.json"
    cmd = py + [str(ROOT / "tools" / "gpu" / "finetune_step.py"), "--out", str(step_json), "--device", s["device"]]
    c.step("finetune_step", cmd + s["finetune"], lim["finetune_step"])
    c.record["results"]["finetune_step"] = _load(step_json)
    c.save()

    # 3. torch-harmonics' CUDA kernels, then DISCO and S2 attention at the small grid
    build = c.work / "th_cuda"
    c.step(
        "build_kernels",
        py + [str(ROOT / "tools" / "gpu" / "build_torch_harmonics_cuda.py"), "--out", str(build), *s["build"]],
        lim["build_kernels"],
    )
    c.record["results"]["build_kernels"] = _load(build / "build.json")
    c.save()
    for name in KERNEL_MODELS:
        _bench(c, s, name, *s["small"], lim[f"bench_{name}"])

    # 4. tests, generation and a short training run last
    c.step(
        "tests",
        py + ["-m", "pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "tests" / "dandelion" / "test_gpu_models.py")],
        lim["tests"],
    )
    g = s["gen"]
    data = c.work / "galewsky"
    gen = py + [
        "-m",
        "dandelion.cli.generate",
        "dataset=galewsky",
        f"dataset.path={data}",
        f"dataset.nlat={g['nlat']}",
        f"dataset.nlon={g['nlon']}",
        f"dataset.n_trajectories={g['n_trajectories']}",
        f"dataset.n_frames={g['n_frames']}",
        f"dataset.spinup_days={g['spinup_days']}",
        f"device={s['device']}",
        f"batch_size={g['batch_size']}",
        "progress=false",
    ]
    if g["lmax"] is not None:
        gen.append(f"dataset.lmax={g['lmax']}")
    rc = c.step("generate", gen, lim["generate"])
    simulated_days = g["spinup_days"] + g["n_frames"] * 4.0 / 24.0
    sec = c.record["steps"]["generate"].get("seconds")
    c.record["results"]["generate"] = {  # end to end: interpreter start, imports, set-up, integration and HDF5 writes
        **g,
        "simulated_days": simulated_days,
        "rc": rc,
        "seconds_end_to_end": sec,
        "seconds_per_simulated_day_end_to_end": (sec / simulated_days) if rc == 0 else None,
    }
    c.save()

    run_dir = c.work / "train"
    train = py + [
        "-m",
        "dandelion.cli.train",
        "dataset=galewsky",
        f"dataset.path={data}",
        "model=dandelion",
        f"model.preset={s['train_preset']}",
        "trainer=quick",
        f"trainer.batch_size={s['train_batch']}",
        f"device={s['device']}",
        f"run_dir={run_dir}",
        "trainer.progress=false",
    ]
    rc = c.step("train", train, lim["train"])
    metrics = run_dir / "metrics.jsonl"
    c.record["results"]["train"] = {
        "rc": rc,
        "metrics_tail": metrics.read_text().splitlines()[-3:] if metrics.exists() else None,
        "checkpoints": sorted(p.name for p in run_dir.glob("*.pt")) if run_dir.exists() else [],
    }
    c.save()

    c.record["finished_utc"] = _utc()
    # a refused model (S2 attention without CUDA kernels) is a result, not a failure of the check
    c.record["ok"] = all(v.get("rc") == 0 for k, v in c.record["steps"].items() if "rc" in v and k != "build_kernels")
    c.save()
    c.log.close()
    shutil.rmtree(c.work, ignore_errors=True)
    return c.record


def _load_str(s: str) -> dict:
    try:
        return json.loads(s)
    except ValueError:
        return {"environment": s}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for gpu_check.json and gpu_check.log")
    ap.add_argument("--dry-run", action="store_true", help="the same steps on the CPU at tiny sizes (no install)")
    ap.add_argument(
        "--wheels",
        default=os.environ.get("DANDELION_WHEELS", str(ROOT / "shared" / "wheels")),
        help="folder of wheels to install offline (default $DANDELION_WHEELS or shared/wheels)",
    )
    ap.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help=f"the whole check's time limit in seconds (default {BUDGET_S:.0f}; 1500 for a dry run on a shared CPU)",
    )
    a = ap.parse_args(argv)
    budget = a.budget_s if a.budget_s is not None else (1500.0 if a.dry_run else BUDGET_S)
    # absolute: every step runs with its cwd in a scratch folder
    rec = run(Path(a.out).resolve(), a.dry_run, Path(a.wheels).resolve(), budget)
    print(f"[gpu_check] wrote {Path(a.out) / 'gpu_check.json'}: ok={rec['ok']}, {rec['total_s']:.0f} s")
    return 0 if rec["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
