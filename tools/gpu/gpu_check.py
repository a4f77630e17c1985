#!/usr/bin/env python3
"""GPU check of Dandelion: everything that needs a GPU, in one call of at most 8 minutes, one JSON.

    python3 tools/gpu/gpu_check.py --out OUTDIR [--wheels DIR]     # on an offline CUDA machine
    python3 tools/gpu/gpu_check.py --out OUTDIR --dry-run          # the same steps on the CPU at tiny sizes

Steps (each a subprocess with its own time limit, cut to what is left of ``--budget-s``; a failed
step is recorded and the next one runs):

0. ``install`` (not in a dry run): the wheels of ``--wheels`` (default ``$DANDELION_WHEELS`` or
   ``shared/wheels``, made by ``tools/gpu/prepare_gpu_wheels.sh``; torch itself is the machine's)
   and this working tree are installed with ``pip --no-index --no-deps --target`` into a
   scratch folder put on ``PYTHONPATH``: no network;
1. ``tests``: the CUDA test subset (``tests/dandelion/test_gpu_models.py``: CUDA against CPU, bf16);
2. ``bench_<model>``: ``dandelion-bench target=models`` for dandelion, sfno, flower2d and disco, one
   process and one time limit per model (DISCO last, so a slow model costs only its own rows), at
   256x512, paper presets, batch 4, fp32 and bf16 autocast, and in fp32 the largest training batch of
   every model that fits (``models.largest_batch=true``: a guess from the measured peak per sample,
   checked by real training steps). DISCO is built with ``optimized_kernel=False``: the
   torch-harmonics wheels on PyPI carry CPU kernels only, so DISCO runs on its pure-torch kernels
   (the JSON says so next to its rows);
3. ``generate``: ``dandelion-generate`` of a 256x512 Galewsky dataset, 16 trajectories in one batch
   of 16 (a shortened spin-up, 6 frames), timed;
4. ``train``: one short training run (``trainer=quick``, the tiny Dandelion) on that dataset.

The one JSON, ``OUTDIR/gpu_check.json``, holds the machine, each step's command, exit status,
seconds and last lines of output, and the results (the bench JSONs, the generation timing, the
training metrics); ``OUTDIR/gpu_check.log`` has every step's full output. ``--dry-run`` runs the
same steps on the CPU at tiny sizes (16x32, tiny presets, a simulated device memory for the
largest-batch search) without installing, so the script is tested where no GPU is.
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
MODELS = ["dandelion", "sfno", "flower2d", "disco"]  # benchmarked in this order, each in its own process
DISCO_NOTE = (
    "DISCO runs with optimized_kernel=False (torch-harmonics' pure-torch kernels): the torch-harmonics wheels on "
    "PyPI carry CPU kernels only, so its GPU timings are not those of the optimised CUDA kernels"
)

#: Sizes of the real check and of the dry run. The dry run changes sizes only, never the steps.
SIZES = {
    "real": {
        "device": "cuda",
        "preset": "paper",
        "nlat": 256,
        "nlon": 512,
        "batch": 4,
        "n_repeat": 5,
        "n_warmup": 2,
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
        "largest": ["models.max_step_s=3.0", "models.max_tries=6"],
        "limits": {
            "environment": 30,
            "install": 60,
            "tests": 45,
            "bench_dandelion": 70,
            "bench_sfno": 50,
            "bench_flower2d": 50,
            "bench_disco": 90,
            "generate": 45,
            "train": 45,
        },
    },
    "dry": {
        "device": "cpu",
        "preset": "tiny",
        "nlat": 16,
        "nlon": 32,
        "batch": 2,
        "n_repeat": 1,
        "n_warmup": 1,
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
        "largest": ["models.cpu_capacity_mib=8", "models.max_tries=3"],
        "limits": {
            "environment": 300,
            "install": 0,
            "tests": 300,
            **{f"bench_{m}": 300 for m in MODELS},
            "generate": 300,
            "train": 300,
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
            "notes": [DISCO_NOTE],
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
    if shutil.which("nvidia-smi"):
        c.step("nvidia_smi", ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv"], 15)
    if not dry:
        _install(c, wheels, lim["install"])
    c.step(
        "tests",
        py + ["-m", "pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "tests" / "dandelion" / "test_gpu_models.py")],
        lim["tests"],
    )

    # one bench process per model, DISCO last: a model slower than its limit costs its own rows only (in the first
    # lent run, 2026-12-04, the four models in one process printed nothing within 130 s and every row was lost)
    rows, table = [], None
    for name in MODELS:
        bench = py + [
            "-m",
            "dandelion.benchmarks.speed.bench",
            "target=models",
            f"device={s['device']}",
            "threads=null",
            f"models.names=[{name}]",
            f"models.presets=[{s['preset']}]",
            f"models.resolutions=[[{s['nlat']},{s['nlon']}]]",
            f"models.batch_sizes=[{s['batch']}]",
            "models.dtypes=[fp32,bf16]",
            "models.disco_optimized_kernel=false",
            f"models.n_repeat={s['n_repeat']}",
            f"models.n_warmup={s['n_warmup']}",
            "models.largest_batch=true",
            "models.largest_batch_dtypes=[fp32]",
            *s["largest"],
            f"hydra.run.dir={c.work / 'hydra'}",
            f"output={c.work / f'bench_{name}.json'}",
        ]
        c.step(f"bench_{name}", bench, lim["bench_" + name])
        got = _load(c.work / f"bench_{name}.json")
        table = table or got.get("parameter_table")
        rows += got.get("rows") or [{"model": name, "error": got.get("error", "no rows written")}]
    bm = c.record["results"]["bench_models"] = {"parameter_table": table, "rows": rows}
    c.record["results"]["largest_batch"] = [
        {
            k: r.get(k)
            for k in ("model", "dtype", "nlat", "nlon", "largest_batch", "train_step_peak_bytes_per_sample", "error")
        }
        for r in bm["rows"]
        if "largest_batch" in r or r.get("error")
    ]
    c.save()

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
    c.record["ok"] = all(v.get("rc") == 0 for v in c.record["steps"].values() if "rc" in v)
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
        help="the whole check's time limit in seconds (default 480; 900 for a dry run on a shared CPU)",
    )
    a = ap.parse_args(argv)
    budget = a.budget_s if a.budget_s is not None else (900.0 if a.dry_run else 480.0)
    # absolute: every step runs with its cwd in a scratch folder
    rec = run(Path(a.out).resolve(), a.dry_run, Path(a.wheels).resolve(), budget)
    print(f"[gpu_check] wrote {Path(a.out) / 'gpu_check.json'}: ok={rec['ok']}, {rec['total_s']:.0f} s")
    return 0 if rec["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
