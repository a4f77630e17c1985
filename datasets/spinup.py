"""Starting a batch's simulation, with the spin-up on a coarser grid where the scenario asks for one.

A scenario that defines ``coarse_spinup()`` returning ``(lmax_coarse, t_handover)`` (for example
:meth:`dandelion.datasets.held_suarez.HeldSuarezScenario.coarse_spinup`) has each batch built at
``lmax_coarse``, advanced to ``t_handover`` (in the scenario's ``time_units``), and continued at the dataset's own
band limit by the fine simulation's ``continue_from(coarse)``; the stored frames (all at or after the spin-up) are
then made by the fine simulation alone. A scenario without the hook, or returning None, is built at its band limit.
Where a coarse spin-up is fit to use, and how long the fine continuation must be: docs/datasets/README.md
("Benchmark v2 sizes") and each dataset card.
"""

from __future__ import annotations

__all__ = ["start_simulation"]


def start_simulation(scenario, tensors: dict, *, device):
    """The simulation of one batch at time 0, or at the end of a coarse spin-up (module docstring).

    ``tensors``: the batch's parameters as ``(B,)`` float64 tensors. Returns the scenario's simulation at
    ``scenario.solver_lmax``.

    Raises
    ------
    ValueError
        If the handover time lies after the first stored frame (the fine run would have to step backwards).
    """
    plan = scenario.coarse_spinup() if hasattr(scenario, "coarse_spinup") else None
    if plan is None:
        return scenario.build_simulation(tensors, lmax=scenario.solver_lmax, device=device)
    lmax_coarse, t_handover = plan
    first = float(scenario.solver_times()[0])
    if t_handover > first:
        raise ValueError(
            f"{scenario.name}: the coarse spin-up ends at t={t_handover:g} {scenario.time_units}, after the first "
            f"stored frame (t={first:g}); shorten it"
        )
    coarse = scenario.build_simulation(tensors, lmax=lmax_coarse, device=device)
    coarse.advance_to(float(t_handover))
    fine = scenario.build_simulation(tensors, lmax=scenario.solver_lmax, device=device)
    fine.continue_from(coarse)
    return fine
