"""The metric registry: :func:`metric` registers a function as a named metric (:class:`Metric`) in
:data:`METRICS`, which :func:`dandelion.metrics.field_metrics` computes and the rollout, benchmark and
leaderboard jobs read. The built-in metrics and the documentation of the signature live in
:mod:`dandelion.metrics` (which re-exports everything here).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Metric", "METRICS", "metric", "unregister_metric", "metric_names"]


@dataclass(frozen=True)
class Metric:
    """A registered metric (see :func:`metric`).

    Attributes
    ----------
    name : key in ``metrics.json``, cells and the leaderboard.
    fn : ``fn(pred, true, weights, climatology) -> (...)`` on one scalar variable, fields
        ``(..., nlat, nlon)`` in physical units, ``weights`` the grid's quadrature weights (nlat, 1),
        ``climatology`` a float or broadcastable tensor (the ACC's reference; 0 when none). On a masked
        dataset it gets ``wet=`` (bool (nlat, nlon)) if it takes that keyword, else weights zero on land.
    vector : optional ``vector(pred, true, weights) -> (...)`` on a vector field ``(..., nlat, nlon, 2)``,
        scored under the field's own name besides its components.
    mean : the rollout adds variable ``mean``, the average over scalar fields and vector components.
    cell : benchmark cells keep its next-step and rollout-mean summaries.
    curve : benchmark cells keep its per-lead curves, and the leaderboard's error-versus-lead plot draws it.
    title : the leaderboard's section heading of its table (a metric without one gets no table);
        a table needs ``mean`` and ``cell``. Lower is better (the best entry is set in bold).
    label : short name for plot legends.
    units : the values are in the field's physical units (plots put the units in the panel title).
    reference : a value the error-versus-lead plots mark with a dashed line (1 for the VRMSEs: an
        error as large as the truth's spread), or None.
    """

    name: str
    fn: Callable
    vector: Callable | None = None
    mean: bool = False
    cell: bool = False
    curve: bool = False
    title: str | None = None
    label: str = ""
    units: bool = False
    reference: float | None = None


#: The registered metrics, in registration order (the order of ``metrics.json``).
METRICS: dict[str, Metric] = {}


def metric(
    name: str,
    *,
    vector: Callable | None = None,
    mean: bool = False,
    cell: bool = False,
    curve: bool = False,
    title: str | None = None,
    label: str | None = None,
    units: bool = False,
    reference: float | None = None,
):
    """Decorator registering ``fn(pred, true, weights, climatology) -> (...)`` as metric ``name`` (:class:`Metric`).

    Raises
    ------
    ValueError
        If ``name`` is already registered (call :func:`unregister_metric` first to replace it), or it
        has a ``title`` without ``mean`` and ``cell`` (the leaderboard tabulates the mean over variables of cells).
    """
    if name in METRICS:
        raise ValueError(
            f"metric {name!r} is already registered: choose another name or unregister_metric({name!r}) first"
        )
    if title is not None and not (mean and cell):
        raise ValueError(
            f"metric {name!r} has a leaderboard title but mean={mean}, cell={cell}: a table needs mean=True and "
            "cell=True"
        )

    def register(fn: Callable) -> Callable:
        METRICS[name] = Metric(
            name,
            fn,
            vector,
            bool(mean),
            bool(cell),
            bool(curve),
            title,
            label or name,
            bool(units),
            None if reference is None else float(reference),
        )
        return fn

    return register


def unregister_metric(name: str) -> None:
    """Remove metric ``name`` from the registry (no error if it is absent)."""
    METRICS.pop(name, None)


def metric_names(
    *, mean: bool | None = None, cell: bool | None = None, curve: bool | None = None, table: bool | None = None
) -> list[str]:
    """Names of the registered metrics with the given flags (None: either), in registration order;
    ``table`` = has a leaderboard title."""

    def keep(m: Metric) -> bool:
        return all(
            want is None or have == want
            for want, have in ((mean, m.mean), (cell, m.cell), (curve, m.curve), (table, m.title is not None))
        )

    return [n for n, m in METRICS.items() if keep(m)]
