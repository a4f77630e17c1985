"""The one time-stepping driver: advance any simulation to a time, check stability and finiteness.

Physics apart from time stepping (after Dinosaur, google-research/dinosaur): an equation object
holds the physics, :mod:`dandelion.solvers.integrators` the schemes, and this module the driver
that every simulation of the package uses through :meth:`Simulation.advance_to`. It owns three
rules, each written once:

**Landing on a target time.** The interval from the current time to the target is split into

    n = max(1, ceil(span / max_step - 1e-9))

equal steps in the simulation's clock (time itself, or a warped time such as the ``ln(t + c)`` of
Cahn-Hilliard's geometric schedule, :class:`GeometricClock`); the last ends exactly on the target.
A simulation with a state-dependent step (the CFL step of chained turbulence) gives one
``max_step`` per trajectory; before every step it is re-evaluated, and where the planned step
exceeds it the rest of that trajectory's interval is re-split by the same rule. With a fixed step
that divides the interval (every frame interval of the shipped datasets) the steps are exactly the
fixed step, so the rule gives the same step counts and states as stepping by the fixed step by hand.

**Stability limits.** A simulation lists its limits as :class:`StabilityLimit` (advective Courant
number, inertial ``f dt``, explicit gravity waves, scheme-specific conditions), each with the
largest safe step per trajectory. :func:`enforce_limits` refuses an unsafe step with the largest
safe one in the message; simulations call it from their constructors (limits known up front), and
the driver calls it again every ``check_every`` steps on :meth:`Simulation.stability_limits` of the
current state (limits that depend on the evolving winds), raising :class:`UnstableStepError`
naming the trajectory. A step longer than the interval to the target is refused, never shortened.

**Finiteness.** Every ``check_every`` steps and at the end of each advance the state is checked
(:func:`check_finite`); a ``FloatingPointError`` names the first non-finite trajectory and its
parameters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .integrators import tree_leaves

__all__ = [
    "StabilityLimit",
    "UnstableStepError",
    "enforce_limits",
    "step_count",
    "UniformClock",
    "GeometricClock",
    "Simulation",
    "advance",
    "check_finite",
    "nonfinite_trajectories",
]

#: Relative tolerance of the landing rule (a span within 1e-9 steps of a whole number of steps).
TOLERANCE = 1e-9


class UnstableStepError(FloatingPointError):
    """A state-dependent stability limit was violated during a run (names the trajectory)."""


@dataclass(frozen=True)
class StabilityLimit:
    """One stability limit of a simulation.

    name : what limits the step (``"advective Courant number"``, ``"inertial f*dt"``, ...).
    dt_max : float or tensor of shape (B,): the largest safe step of each trajectory (0 = no safe step).
    detail : the formula and its numbers, quoted in the error message.
    """

    name: str
    dt_max: Any
    detail: str = ""

    def per_trajectory(self) -> torch.Tensor:
        return torch.as_tensor(self.dt_max, dtype=torch.float64).detach().cpu().reshape(-1)


def enforce_limits(dt, limits, *, units: str = "s", what: str = "", during: bool = False, ids=None) -> None:
    """Refuse a step ``dt`` (float, or (B,) tensor) exceeding any of ``limits``; ``ids``: the trajectory
    ids of the limits' entries (default: batch indices).

    Raises
    ------
    ValueError
        (``during=False``) or :class:`UnstableStepError` (``during=True``) naming the limit, the
        trajectory, the formula and the largest safe step over all limits and trajectories.
    """
    limits = [lim for lim in limits if lim is not None]
    if not limits:
        return
    h = torch.as_tensor(dt, dtype=torch.float64).detach().cpu().reshape(-1)
    safe = min(float(lim.per_trajectory().min()) for lim in limits)
    for lim in limits:
        m = lim.per_trajectory()
        bad = h > m * (1.0 + 1e-12)
        if bool(bad.any()):
            i = int(torch.nonzero(bad).reshape(-1)[0])
            hi = float(h[i if h.numel() > 1 else 0])
            traj = (
                f" in trajectory {list(ids)[i]}"
                if ids is not None
                else (f" in trajectory {i} of the batch" if m.numel() > 1 or during else "")
            )
            fix = (
                f"the largest safe dt is {safe:.6g} {units}"
                if safe > 0
                else "no dt is safe: change the scheme or settings as said"
            )
            msg = (
                f"{what + ': ' if what else ''}time step dt={hi:g} {units} violates the limit on the {lim.name}{traj} "
                f"(dt <= {float(m[i]):.6g} {units} there): {lim.detail}; {fix}"
            )
            raise (UnstableStepError if during else ValueError)(msg)


def step_count(span: float, max_step: float) -> int:
    """Steps of the landing rule: ``max(1, ceil(span / max_step - 1e-9))`` (module docstring)."""
    return max(1, math.ceil(span / max_step - TOLERANCE))


class UniformClock:
    """Time itself: equal steps ``span / n``."""

    def length(self, t0, t1):
        return t1 - t0

    def step(self, t0, t1, k, n, now):
        """Size of step ``k`` (1-based) of ``n`` from ``t0`` to ``t1`` (tensors of shape (P,))."""
        return (t1 - t0) / n


class GeometricClock:
    """The clock ``s = ln(t + offset)``: equal steps in ``s`` are geometric in ``t`` (step ~ (t + offset) ds).

    Step ``k`` of ``n`` from ``t0`` to ``t1`` ends at ``(t0 + c) ((t1 + c)/(t0 + c))^(k/n) - c``, the last at ``t1``.
    """

    def __init__(self, offset: float):
        self.offset = float(offset)

    def length(self, t0, t1):
        return torch.log((t1 + self.offset) / (t0 + self.offset))

    def step(self, t0, t1, k, n, now):
        c = self.offset
        ratio = (t1 + c) / (t0 + c)
        end = torch.tensor(
            [
                (a + c) * float(r) ** (int(kk) / int(nn)) - c
                for a, r, kk, nn in zip(t0.tolist(), ratio.tolist(), k.tolist(), n.tolist())
            ],
            dtype=torch.float64,
        )
        end = torch.where(k >= n, t1, end)
        return end - now


def nonfinite_trajectories(state) -> list[int]:
    """Batch indices (dim 0 of every tensor of a nested state) holding a NaN or inf."""
    ok = None
    for x in tree_leaves(state):
        fin = torch.isfinite(torch.view_as_real(x) if x.is_complex() else x).reshape(x.shape[0], -1).all(dim=1)
        ok = fin if ok is None else ok & fin
    return [] if ok is None else torch.nonzero(~ok).reshape(-1).tolist()


def check_finite(sim) -> None:
    """Raise ``FloatingPointError`` naming the first non-finite trajectory of ``sim.state`` and its parameters."""
    bad = nonfinite_trajectories(sim.state)
    if bad:
        i = bad[0]
        p = {}
        for k, v in (getattr(sim, "params", None) or {}).items():
            v = torch.as_tensor(v).reshape(-1)
            p[k] = float(v[i if v.numel() > 1 else 0])
        raise FloatingPointError(
            f"{sim.name}: non-finite state at t={sim.time:.6g} {sim.time_units} in trajectory {i} (batch index; "
            f"{len(bad)} bad: {bad[:10]}); parameters {p}. Lower the time step or raise the diffusion"
        )


class Simulation:
    """Base of every simulation: the protocol the driver needs and :meth:`advance_to`.

    A subclass sets ``state`` (tensor or nested state, leading dim = trajectory), ``time``,
    ``params`` (dict of (B,) tensors, quoted in errors) and implements :meth:`max_step` and
    :meth:`step`; optionally :meth:`stability_limits` (state-dependent limits), ``clock`` and
    ``fixed_step`` (the configured step, refused when longer than an interval to advance over).
    """

    name: str = "simulation"
    time_units: str = "s"
    check_every: int = 64
    clock = UniformClock()
    #: the configured fixed step (None for an adaptive or scheduled step)
    fixed_step: float | None = None

    def max_step(self):
        """Largest step now, in clock units: a float, or a (B,) tensor (one per trajectory)."""
        raise NotImplementedError

    def step(self, h, active: torch.Tensor | None = None) -> None:
        """Advance the state by ``h`` (float, or (B,) tensor); ``active`` (B,) bool: the trajectories that move."""
        raise NotImplementedError

    def stability_limits(self) -> list[StabilityLimit]:
        """Limits of the current state (checked by the driver every ``check_every`` steps); none by default."""
        return []

    def advance_to(self, t: float) -> None:
        """Integrate every trajectory to time ``t`` (>= current time), landing exactly on it (:func:`advance`)."""
        advance(self, t)


def advance(sim: Simulation, t: float) -> None:
    """Advance ``sim`` to ``t`` by the landing rule of the module docstring.

    Raises
    ------
    ValueError
        If ``t`` lies before the current time, or the simulation's fixed step is longer than the interval.
    UnstableStepError
        If a state-dependent stability limit is violated (names the trajectory).
    FloatingPointError
        If the state becomes non-finite (names the trajectory and its parameters).
    """
    t = float(t)
    if t < sim.time - TOLERANCE * max(1.0, abs(t)):
        raise ValueError(f"{sim.name}: cannot advance backwards, from t={sim.time:g} to t={t:g} {sim.time_units}")
    span = t - sim.time
    if span <= 1e-12 * max(1.0, abs(t)):
        sim.time = t
        return
    if sim.fixed_step is not None and sim.fixed_step > span * (1.0 + TOLERANCE):
        raise ValueError(
            f"{sim.name}: time step dt={sim.fixed_step:g} {sim.time_units} is longer than the interval {span:g} "
            f"{sim.time_units} to t={t:g}; it is not shortened silently: choose dt <= {span:g} (a divisor of the "
            "frame interval)"
        )
    clock = sim.clock
    target = None
    now = start = left = n = k = plan = None
    first = True
    taken = 0
    while first or bool((left > 0).any()):
        allowed = torch.as_tensor(sim.max_step(), dtype=torch.float64).detach().cpu().reshape(-1)
        if first:
            P = allowed.numel()
            target = torch.full((P,), t, dtype=torch.float64)
            now = torch.full((P,), float(sim.time), dtype=torch.float64)
            start, left, n, k = (
                now.clone(),
                torch.zeros(P, dtype=torch.long),
                torch.ones(P, dtype=torch.long),
                torch.zeros(P, dtype=torch.long),
            )
            plan = torch.full((P,), math.inf, dtype=torch.float64)
            first = False
        if not bool(torch.isfinite(allowed).all()):
            check_finite(sim)
            raise FloatingPointError(
                f"{sim.name}: non-finite step limit at t={sim.time:.6g} {sim.time_units} in "
                f"trajectory {torch.nonzero(~torch.isfinite(allowed)).reshape(-1).tolist()} (batch index)"
            )
        replan = ((left > 0) & (plan > allowed * (1.0 + 1e-12))) | (plan == math.inf)
        if bool(replan.any()):
            rem = clock.length(now, target)
            m = torch.clamp(torch.ceil(rem / allowed - TOLERANCE), min=1).to(torch.long)
            left, n = torch.where(replan, m, left), torch.where(replan, m, n)
            start, k = torch.where(replan, now, start), torch.where(replan, torch.zeros_like(k), k)
            plan = torch.where(replan, rem / m, plan)
        active = left > 0
        k = k + active.long()
        h = clock.step(start, target, k, n, now)
        if P == 1:
            sim.step(float(h[0]))
        else:
            sim.step(torch.where(active, h, torch.ones_like(h)), None if bool(active.all()) else active)
        now = torch.where(active, torch.where(k >= n, target, now + h), now)
        left = left - active.long()
        sim.time = float(now.min())
        taken += 1
        if taken % sim.check_every == 0:
            check_finite(sim)
            enforce_limits(
                _current_step(sim, h, active), sim.stability_limits(), units=sim.time_units, what=sim.name, during=True
            )
    sim.time = t
    check_finite(sim)


def _current_step(sim, h: torch.Tensor, active: torch.Tensor):
    """The step checked against state-dependent limits: the fixed step, else the last step taken."""
    if sim.fixed_step is not None:
        return sim.fixed_step
    return torch.where(active, h, torch.zeros_like(h)) if h.numel() > 1 else float(h[0])


def largest_stable_step(amplification, lo: float = 1e-6, hi: float = 1e6, iters: int = 60) -> float:
    """Largest ``dt`` in ``[lo, hi]`` with ``amplification(dt) <= 1`` by bisection in ``log dt`` (``hi`` if
    stable there, 0 if unstable at ``lo``); ``amplification`` returns the worst ``|R|`` of decaying modes."""
    if amplification(hi) <= 1.0 + 1e-12:
        return hi
    if amplification(lo) > 1.0 + 1e-12:
        return 0.0
    a, b = math.log(lo), math.log(hi)
    for _ in range(iters):
        c = 0.5 * (a + b)
        a, b = (c, b) if amplification(math.exp(c)) <= 1.0 + 1e-12 else (a, c)
    return float(np.exp(a))
