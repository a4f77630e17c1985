"""``dandelion-bench target=solvers``: seconds per simulated frame of every dataset's solver.

Every dataset scenario (the ``dandelion.datasets`` registry: its solver with the dataset card's
physics, ``docs/datasets/<name>.md``) at a chosen grid and band limit, batches of B trajectories:
seconds of set-up and seconds per simulated time unit (``s`` or non-dimensional) over
``solvers.frames`` frames, and per frame (wall time, synchronised on CUDA; the process CPU time
beside it). With ``solvers.galewsky_reference.enabled`` also :func:`galewsky_vs_torch_harmonics`:
our Galewsky solver next to torch-harmonics' example shallow-water solver, seconds per simulated
day per trajectory.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import torch
from omegaconf import OmegaConf
from torch_harmonics.examples import ShallowWaterSolver

from dandelion.benchmarks.speed.measure import sync
from dandelion.cli.common import compose_config as compose
from dandelion.datasets.generate import build_scenario
from dandelion.datasets.scenario import get_scenario
from dandelion.solvers.galewsky import GalewskySimulation, galewsky_default_dt, galewsky_reference_params
from dandelion.solvers.shallow_water import EARTH_RADIUS, GRAVITY
from dandelion.solvers.spectral_core import SpectralCore

__all__ = ["band_limit", "measure_solver", "galewsky_vs_torch_harmonics", "bench_solvers"]


def band_limit(s, name: str) -> int | None:
    """The solver band limit of scenario ``name`` in the ``solvers`` config section ``s``: ``s.lmax``, else
    ``s.lmax_by_scenario[name]``, else None (the scenario's default); always None for a finite-volume
    scenario (``band_limited = False``), which refuses a band limit."""
    if not get_scenario(name).band_limited:
        return None
    lmax = s.get("lmax")
    return (s.get("lmax_by_scenario") or {}).get(name) if lmax is None else lmax


def measure_solver(spec: dict) -> dict:
    """Time one scenario's solver for a batch: set-up seconds, seconds per simulated unit and per frame.

    ``spec`` keys: scenario, nlat, nlon, grid, lmax (or None: the scenario's default), batch, frames,
    device.
    """
    device = torch.device(spec.get("device", "cpu"))
    over = [
        f"dataset={spec['scenario']}",
        "dataset.path=unused",
        f"dataset.nlat={spec['nlat']}",
        f"dataset.nlon={spec['nlon']}",
        f"dataset.grid={spec.get('grid', 'equiangular')}",
    ]
    if spec.get("lmax") is not None:
        over.append(f"dataset.lmax={int(spec['lmax'])}")
    dcfg = OmegaConf.to_container(compose("generate", over).dataset, resolve=True)
    scenario = build_scenario(dcfg)
    b = int(spec["batch"])
    params = [scenario.parameters(i % scenario.n_sweep) for i in range(b)]
    tensors = {k: torch.tensor([p[k] for p in params], dtype=torch.float64, device=device) for k in params[0]}
    sync(device)
    t0 = time.perf_counter()
    sim = scenario.build_simulation(tensors, lmax=scenario.solver_lmax, device=device)
    sync(device)
    setup = time.perf_counter() - t0
    frames = float(spec.get("frames", 1))
    span = frames * float(scenario.dt_frame())
    t_start = float(sim.time)
    sync(device)
    t0, c0 = time.perf_counter(), time.process_time()
    sim.advance_to(t_start + span)
    sync(device)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "scenario": spec["scenario"],
        "nlat": int(spec["nlat"]),
        "nlon": int(spec["nlon"]),
        "grid": spec.get("grid", "equiangular"),
        "solver_lmax": None if scenario.solver_lmax is None else int(scenario.solver_lmax),  # None: finite volume
        "reduced": bool(scenario.reduced),
        "batch": b,
        "device": str(device),
        "time_units": str(getattr(scenario, "time_units", "")),
        "dt_frame": float(scenario.dt_frame()),
        "simulated": span,
        "setup_s": setup,
        "wall_s": wall,
        "seconds_per_time_unit": wall / span,
        "seconds_per_frame": wall / frames,
        "seconds_per_frame_per_trajectory": wall / frames / b,
        "process_cpu_s": cpu,
        "threads": torch.get_num_threads(),
    }


def _th_dt(lmax: int) -> float:
    """torch-harmonics' AB3 step: 90 % of the imaginary-axis limit 0.72 for 120 m/s winds + sqrt(g H), dividing 4 h."""
    big_l = lmax - 1
    speed = 120.0 + math.sqrt(GRAVITY * 1e4)
    dt_max = 0.9 * 0.72 * EARTH_RADIUS / (speed * math.sqrt(big_l * (big_l + 1)))
    return 14400.0 / math.ceil(14400.0 / dt_max)


def galewsky_vs_torch_harmonics(
    lmax_list=(42,), batches=(1, 4), days: float = 0.25, device="cpu", schemes=("ars343",)
) -> list[dict]:
    """Seconds of wall time per simulated day per trajectory: ours next to torch-harmonics' solver.

    * ours: :class:`dandelion.solvers.galewsky.GalewskySimulation` (float64, dealiased 3/2 Gauss
      grid, IMEX with gravity waves implicit, step :func:`~dandelion.solvers.galewsky.galewsky_default_dt`);
    * torch-harmonics: ``torch_harmonics.examples.ShallowWaterSolver`` on the same grid and lmax
      (float64, explicit third-order Adams-Bashforth, step bounded by the gravity-wave CFL, see
      :func:`_th_dt`); it has no batch dimension, so its cost per trajectory is its batch-1 cost.

    Returns one row per (solver, scheme, lmax, batch) with ``dt``, ``steps``, ``wall_s``,
    ``s_per_day_per_traj`` and, for ours, ``speedup_vs_torch_harmonics`` and ``batch_gain``
    (batch-1 cost / batch-B cost per trajectory).
    """
    rows = []
    for lmax in lmax_list:
        core = SpectralCore(lmax, dealias=1.5)
        dt_th = _th_dt(lmax)
        swe = (
            ShallowWaterSolver(core.nlat, core.nlon, dt_th, lmax=lmax, mmax=lmax, grid="legendre-gauss")
            .to(device)
            .to(torch.float64)
        )
        u = swe.timestep(swe.galewsky_initial_condition(), 3)  # warm-up
        n = max(1, int(round(days * 86400.0 / dt_th)))
        sync(device)
        t0 = time.perf_counter()
        u = swe.timestep(u, n)
        sync(device)
        wall = time.perf_counter() - t0
        th = {
            "solver": "torch_harmonics.ShallowWaterSolver",
            "scheme": "ab3",
            "lmax": lmax,
            "nlat": core.nlat,
            "nlon": core.nlon,
            "batch": 1,
            "dt": dt_th,
            "steps": n,
            "wall_s": wall,
            "finite": bool(torch.isfinite(torch.view_as_real(u)).all()),
            "s_per_day_per_traj": wall / (n * dt_th / 86400.0),
            "s_per_step": wall / n,
        }
        rows.append(th)
        for scheme in schemes:
            base = None
            for b in batches:
                dt = galewsky_default_dt(lmax)
                sim = GalewskySimulation(
                    galewsky_reference_params(b), lmax=lmax, dt=dt, nu=1e5, device=device, scheme=scheme
                )
                sim.advance_to(dt)  # warm-up step
                n = max(1, int(round(days * 86400.0 / dt)))
                sync(device)
                t0 = time.perf_counter()
                sim.advance_to(sim.time + n * dt)
                sync(device)
                wall = time.perf_counter() - t0
                per = wall / (n * dt / 86400.0) / b
                base = per if base is None else base
                rows.append(
                    {
                        "solver": "dandelion.GalewskySimulation",
                        "scheme": scheme,
                        "lmax": lmax,
                        "nlat": sim.core.nlat,
                        "nlon": sim.core.nlon,
                        "batch": b,
                        "dt": dt,
                        "steps": n,
                        "wall_s": wall,
                        "s_per_day_per_traj": per,
                        "s_per_step": wall / n,
                        "speedup_vs_torch_harmonics": th["s_per_day_per_traj"] / per,
                        "batch_gain": base / per,
                    }
                )
    return rows


def bench_solvers(s, device: str, save: Callable[[dict], None] | None = None, out: dict | None = None) -> dict:
    """``target=solvers``: every scenario and batch size of the ``solvers`` config section ``s``.

    Rows go to ``out["rows"]`` (a failed measurement is a row with ``error``); ``save(out)`` runs
    after every row.
    """
    out = {} if out is None else out
    rows = out.setdefault("rows", [])
    for name in s.scenarios:
        lmax = band_limit(s, str(name))
        for batch in s.batch_sizes:
            spec = {
                "scenario": str(name),
                "nlat": int(s.nlat),
                "nlon": int(s.nlon),
                "grid": str(s.grid),
                "lmax": lmax,
                "batch": int(batch),
                "frames": int(s.frames),
                "device": device,
            }
            t0 = time.perf_counter()
            try:
                row = measure_solver(spec)
            except Exception as err:  # recorded, the table goes on
                row = {**spec, "error": f"{type(err).__name__}: {err}"}
            rows.append(row)
            if save:
                save(out)
            msg = row.get("error") or (
                f"{row['seconds_per_frame']:.2f} s per frame ({row['dt_frame']:g} {row['time_units']}), "
                f"set-up {row['setup_s']:.2f} s"
            )
            print(
                f"[bench] {name} lmax={row.get('solver_lmax', lmax)} B={batch}: "
                f"{msg} ({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )
    ref = s.get("galewsky_reference") or {}
    if ref.get("enabled", False):
        t0 = time.perf_counter()
        try:
            out["galewsky_vs_torch_harmonics"] = galewsky_vs_torch_harmonics(
                lmax_list=tuple(ref.lmax),
                batches=tuple(ref.batches),
                days=float(ref.days),
                device=device,
                schemes=tuple(ref.schemes),
            )
        except Exception as err:  # recorded; the rows above stand
            out["galewsky_vs_torch_harmonics"] = {"error": f"{type(err).__name__}: {err}"}
        print(f"[bench] galewsky vs torch-harmonics ({time.perf_counter() - t0:.0f} s)", flush=True)
        if save:
            save(out)
    return out
