"""Speed and memory of Dandelion and the baselines side by side, with ratios to Dandelion.

Every model is measured with the shared helper :func:`dandelion.benchmarks.speed.time_model`
(forward under ``no_grad``; training step = forward + MSE + backward + AdamW step; medians). On the
CPU the helper's peak memory is the growth of the process's peak RSS, a process-wide high-water
mark, so each model is measured in a FRESH Python process (``--single`` mode of this module) and the
numbers of different models do not contaminate each other.

Usage (issue 4's CPU table: small presets at 64x128, one thread)::

    python -m dandelion.benchmarks.model_speed_table --preset small --nlat 64 --nlon 128 --batch 4

and on a GPU ``--device cuda --preset paper --nlat 256 --nlon 512``. Prints a markdown table;
``--json PATH`` also writes the rows (atomically).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile

import torch

__all__ = ["measure", "speed_table", "main"]

MODELS = ("dandelion", "sfno", "disco", "flower2d")


def measure(name: str, preset: str, nlat: int, nlon: int, grid: str = "equiangular", batch: int = 4, device: str = "cpu", in_channels: int = 16, out_channels: int = 4, n_warmup: int = 1, n_repeat: int = 3, threads: int = 1) -> dict:
    """Build one model and time it in this process; returns :func:`time_model`'s dict plus the setup.

    ``n_parameters`` is :func:`time_model`'s count: real scalars (complex counted twice), the number
    of the parameter tables.
    """
    import dandelion
    from dandelion.benchmarks.speed import time_model

    if device == "cpu" and threads:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = dandelion.build_model(name, preset, in_channels, out_channels, nlat, nlon, grid).to(device)
    x = torch.randn(batch, in_channels, nlat, nlon, device=device)
    row = time_model(model, x, n_warmup=n_warmup, n_repeat=n_repeat)
    row.update(model=name, preset=preset, nlat=nlat, nlon=nlon, grid=grid, batch=batch, threads=torch.get_num_threads())
    return row


def speed_table(models=MODELS, preset: str = "small", nlat: int = 64, nlon: int = 128, grid: str = "equiangular", batch: int = 4, device: str = "cpu", n_warmup: int = 1, n_repeat: int = 3, threads: int = 1, fresh_process: bool = True) -> list[dict]:
    """Measure every model (each in a fresh process unless ``fresh_process=False``) and add ratios to Dandelion.

    Returns
    -------
    list of dict: :func:`measure`'s rows plus ``forward_ratio``, ``train_step_ratio`` and
    ``memory_ratio`` (model / Dandelion; None when Dandelion is not among ``models``).

    Raises
    ------
    RuntimeError
        If a measurement subprocess fails (its stderr is included).
    """
    rows = []
    for name in models:
        kw = dict(name=name, preset=preset, nlat=nlat, nlon=nlon, grid=grid, batch=batch, device=device, n_warmup=n_warmup, n_repeat=n_repeat, threads=threads)
        if fresh_process:
            cmd = [sys.executable, "-m", "dandelion.benchmarks.model_speed_table", "--single", json.dumps(kw)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"measuring {name} failed:\n{proc.stderr[-4000:]}")
            rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        else:
            rows.append(measure(**kw))
    ref = next((r for r in rows if r["model"] == "dandelion"), None)
    for r in rows:
        for key, out in (("forward_s", "forward_ratio"), ("train_step_s", "train_step_ratio"), ("peak_memory_bytes", "memory_ratio")):
            r[out] = (r[key] / ref[key]) if ref and ref[key] else None
    return rows


def _markdown(rows: list[dict]) -> str:
    def f(v, fmt):
        return "-" if v is None else format(v, fmt)

    head = "| model | preset | grid | batch | params (real) | forward s | train step s | peak MiB | fwd / D | step / D | mem / D |\n|---|---|---|---|---|---|---|---|---|---|---|"
    lines = [head]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['preset']} | {r['nlat']}x{r['nlon']} {r['grid']} | {r['batch']} | {r['n_parameters']:,} | "
            f"{r['forward_s']:.3f} | {r['train_step_s']:.3f} | {r['peak_memory_bytes'] / 2**20:.0f} | "
            f"{f(r['forward_ratio'], '.2f')} | {f(r['train_step_ratio'], '.2f')} | {f(r['memory_ratio'], '.2f')} |"
        )
    return "\n".join(lines)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--preset", default="small")
    p.add_argument("--nlat", type=int, default=64)
    p.add_argument("--nlon", type=int, default=128)
    p.add_argument("--grid", default="equiangular")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--device", default="cpu")
    p.add_argument("--n-warmup", type=int, default=1)
    p.add_argument("--n-repeat", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="CPU threads (torch.set_num_threads); 0 = leave as is")
    p.add_argument("--json", default=None, help="also write the rows to this JSON file")
    p.add_argument("--single", default=None, help=argparse.SUPPRESS)  # internal: one measurement, JSON on stdout
    a = p.parse_args(argv)
    if a.single is not None:
        print(json.dumps(measure(**json.loads(a.single))))
        return
    rows = speed_table(a.models.split(","), a.preset, a.nlat, a.nlon, a.grid, a.batch, a.device, a.n_warmup, a.n_repeat, a.threads)
    machine = f"{platform.node()} {platform.processor() or platform.machine()}, torch {torch.__version__}" + (f", {torch.cuda.get_device_name()}" if a.device.startswith("cuda") else "")
    print(f"machine: {machine}; threads: {a.threads}; peak memory: {'CUDA max_memory_allocated' if a.device.startswith('cuda') else 'growth of process peak RSS (fresh process per model)'}")
    print(_markdown(rows))
    if a.json:
        d = os.path.dirname(os.path.abspath(a.json))
        with tempfile.NamedTemporaryFile("w", dir=d, delete=False, suffix=".tmp") as fh:
            json.dump({"machine": machine, "rows": rows}, fh, indent=2)
        os.replace(fh.name, a.json)


if __name__ == "__main__":
    main()
