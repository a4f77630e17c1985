"""Held-Suarez coarse-grid spin-up check (docs/datasets/held_suarez.md, "Coarse-grid spin-up"; slow, outside CI).

Two runs of the same trajectories (the anchor physics Omega factor 1, dT_y = 60 K, dtheta_z = 10 K, two noise
seeds) at the fine band limit: (a) spun up at that band limit from rest, (b) spun up at ``--coarse-lmax`` and
continued at the fine one from day ``spinup - fine_days`` (datasets/spinup.py). Every 12 h from the handover to
two days past the spin-up, each run's kinetic energy per degree (summed over levels and trajectories) is split
into the band the coarse run resolved and the band above it; the check prints (b)/(a) for both bands over time,
and over the two days after the spin-up (the first stored frames). Kinetic energy per degree, for orthonormal
harmonics of vorticity zeta and divergence delta on a sphere of radius a:
E_l = a^2 / (2 l (l + 1)) * sum_m w_m (|zeta_lm|^2 + |delta_lm|^2), w_0 = 1, w_m = 2 for m > 0 (real fields).

Usage (the run behind the card's numbers, about 10 CPU-minutes on one thread)::

    OMP_NUM_THREADS=1 python docs/held_suarez_coarse_spinup.py --out docs/held_suarez_coarse_spinup.json
"""

from __future__ import annotations

import argparse

import torch
from spinup_comparison import compare_spinups, summarise

from dandelion.datasets.scenario import get_scenario
from dandelion.solvers.chained_turbulence import degree_power
from dandelion.solvers.primitive_equations import PEState

DAY = 86400.0


def degree_ke(sim) -> torch.Tensor:
    """(lmax,) kinetic energy per degree (J/kg times 4 pi a^2 / area; summed over levels and batch)."""
    s = PEState(sim.state, sim.n)
    per_l = (degree_power(s.vorticity) + degree_power(s.divergence)).sum(dim=(0, 1))  # (L,)
    l = torch.arange(per_l.numel(), dtype=torch.float64)
    return torch.where(l > 0, sim.core.radius**2 * per_l / (2 * l * (l + 1)).clamp(min=1), 0.0)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lmax", type=int, default=43)
    ap.add_argument("--coarse-lmax", type=int, default=22)
    ap.add_argument("--nlat", type=int, default=64)
    ap.add_argument("--levels", type=int, default=10)
    ap.add_argument("--spinup-days", type=float, default=60.0)
    ap.add_argument("--fine-days", type=float, default=10.0)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    base = dict(nlat=a.nlat, nlon=2 * a.nlat, lmax=a.lmax, n_levels=a.levels, n_frames=8, spinup_days=a.spinup_days)
    fine_only = get_scenario("held_suarez")(base)
    coarse = get_scenario("held_suarez")({**base, "spinup_lmax": a.coarse_lmax, "spinup_fine_days": a.fine_days})
    ids = [i for i in range(fine_only.n_sweep) if fine_only.parameters(i)["omega_factor"] == 1.0]
    ids = [
        i for i in ids if (fine_only.parameters(i)["delta_T_y"], fine_only.parameters(i)["delta_theta_z"]) == (60, 10)
    ]
    ids = ids[:2]
    ps = [fine_only.parameters(i) for i in ids]
    params = {k: torch.tensor([p[k] for p in ps], dtype=torch.float64) for k in ps[0]}
    t_hand = coarse.coarse_spinup()[1]
    times = [t_hand + k * DAY / 2 for k in range(int(round((a.spinup_days + 2 - t_hand / DAY) * 2)) + 1)]
    series, cost, ratio = compare_spinups(
        fine_only, coarse, params, times, degree_ke, a.coarse_lmax, time_key="day", time_unit=DAY
    )
    record = {"args": vars(a), "trajectory_ids": ids, "cpu_seconds": cost, "series": series}
    summarise(ratio, a.spinup_days, time_key="day", out=a.out, record=record)


if __name__ == "__main__":
    main()
