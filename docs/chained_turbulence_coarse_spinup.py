"""Chained-turbulence coarse-grid spin-up check (docs/datasets/chained_turbulence.md, "Coarse-grid spin-up"; slow,
outside CI).

Two runs of the same trajectories at the fine band limit: (a) grown from the initial noise at that band limit,
(b) grown at ``--coarse-lmax`` and continued at the fine one from ``spinup - fine_tau`` (datasets/spinup.py).
Every 0.1 tau from the handover to two tau past the spin-up, each run's enstrophy per degree,
``Z_l = 1/2 sum_m w_m |omega_lm|^2`` (w_0 = 1, w_m = 2; orthonormal harmonics on the unit sphere, summed over the
trajectories), is split into the band the coarse run resolved and the band above it; the check prints (b)/(a) for
both bands over time, and their means over the two tau after the spin-up (the first 10 stored frames). The flow is
chaotic, so the two runs decorrelate: the ratios measure the statistics, not the fields.

Usage (the run behind the card's numbers)::

    OMP_NUM_THREADS=1 python docs/chained_turbulence_coarse_spinup.py --out docs/chained_turbulence_coarse_spinup.json
"""

from __future__ import annotations

import argparse
import time

import torch

from dandelion.datasets.scenario import get_scenario
from dandelion.datasets.spinup import start_simulation
from dandelion.runtime import write_json_atomic
from dandelion.solvers.chained_turbulence import degree_power


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lmax", type=int, default=42)
    ap.add_argument("--coarse-lmax", type=int, default=21)
    ap.add_argument("--nlat", type=int, default=64)
    ap.add_argument("--spinup-tau", type=float, default=15.0)
    ap.add_argument("--fine-tau", type=float, default=2.0)
    ap.add_argument("--ids", type=int, nargs="+", default=[0, 1, 120, 121], help="trajectory ids (40 per cell)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    n = max(a.ids) + 1
    base = dict(nlat=a.nlat, nlon=2 * a.nlat, lmax=a.lmax, n_trajectories=n, n_frames=10, spinup_tau=a.spinup_tau)
    fine_only = get_scenario("chained_turbulence")(base)
    coarse = get_scenario("chained_turbulence")({**base, "spinup_lmax": a.coarse_lmax, "spinup_fine_tau": a.fine_tau})
    coarse.validate_time_step()
    ps = [fine_only.parameters(i) for i in a.ids]
    params = {k: torch.tensor([p[k] for p in ps], dtype=torch.float64) for k in ps[0]}
    t_hand = coarse.coarse_spinup()[1]
    n_out = int(round((a.spinup_tau + 2.0 - t_hand) / 0.1))
    times = [t_hand + 0.1 * k for k in range(n_out + 1)]
    series, cost = {}, {}
    for name, sc in (("fine_only", fine_only), ("coarse_then_fine", coarse)):
        t0 = time.process_time()
        sim = start_simulation(sc, params, device="cpu")
        rows = []
        for t in times:
            sim.advance_to(t)
            z = 0.5 * degree_power(sim.omega).sum(0)  # (lmax,)
            rows.append({"tau": t, "low": float(z[: a.coarse_lmax].sum()), "high": float(z[a.coarse_lmax :].sum())})
        series[name], cost[name] = rows, time.process_time() - t0
        print(f"{name}: {cost[name]:.0f} CPU-s", flush=True)
    ratio = [
        {"tau": f["tau"], "low": c["low"] / f["low"], "high": c["high"] / f["high"]}
        for f, c in zip(series["fine_only"], series["coarse_then_fine"])
    ]
    after = [r for r in ratio if r["tau"] >= a.spinup_tau - 1e-9]
    summary = {
        "low_band_ratio_after_spinup": sum(r["low"] for r in after) / len(after),
        "high_band_ratio_after_spinup": sum(r["high"] for r in after) / len(after),
    }
    for r in ratio[::5]:
        print(f"tau {r['tau']:5.1f}: (b)/(a) low band {r['low']:.3f}, high band {r['high']:.3f}")
    print(summary)
    write_json_atomic(
        a.out,
        {"args": vars(a), "trajectory_ids": a.ids, "cpu_seconds": cost, "series": series, "ratio": ratio, **summary},
    )


if __name__ == "__main__":
    main()
