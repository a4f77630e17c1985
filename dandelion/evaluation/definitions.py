"""Score definitions of the rollout evaluation: ours and WeatherBench 2's aggregation over initial times.

Per lead time and variable a rollout makes ``N`` forecasts (every initial time of every trajectory), forecast
``i`` with prediction ``p_i`` and truth ``t_i`` of shape ``(nlat, nlon)``. ``<f>`` is the area-weighted mean
with the grid's quadrature weights normalised to sum 1 (:mod:`dandelion.quadrature`; over wet points on a
masked dataset), ``MSE_i = <(p_i - t_i)^2>`` and ``ACC_i`` the uncentred anomaly correlation of
:func:`dandelion.metrics.acc`.

* ``dandelion`` (ours): the mean over forecasts of each forecast's metric, ``rmse = (1/N) sum_i sqrt(MSE_i)``,
  ``acc = (1/N) sum_i ACC_i``, and likewise every other registered metric (the VRMSEs);
* ``wb2``: WeatherBench 2's (Rasp et al. 2024, "WeatherBench 2: A benchmark for the next generation of
  data-driven global weather models", J. Adv. Model. Earth Syst. 16, e2023MS004019, Sec. 4.1, deterministic
  metrics), ``rmse_wb2 = sqrt((1/N) sum_i MSE_i)``, the square root of the mean over initial times of the
  area-weighted MSE, and ``acc_wb2 = (1/N) sum_i ACC_i``, the ACC of each initial time averaged over initial
  times. WeatherBench 2's code does the same (``weatherbench2/metrics.py``: ``MSE.compute_chunk`` and
  ``ACC.compute_chunk`` score each time, ``Metric.compute`` averages over ``init_time``; its
  ``RMSESqrtBeforeTimeAvg`` is our definition, and its docstring tells users to take the square root of the
  time-mean ``MSE`` instead).

By Jensen's inequality (power means) ``rmse_wb2 >= rmse``, with equality exactly when every forecast has the
same RMSE (one forecast). ``acc_wb2`` is the same aggregation as ``acc`` and so the same number. What agrees
with WeatherBench 2 and what does not, for both scores:

* agrees: the per-time uncentred formula ``<(p - c)(t - c)> / sqrt(<(p - c)^2> <(t - c)^2>)``, the weighted
  spatial mean (weights normalised over the grid, so the scale of the weights cancels), the time aggregation;
* differs: the weights (ours: the grid's quadrature weights; WB2: ``sin(phi_north) - sin(phi_south)`` of cells
  bounded by the midpoints between latitudes and the poles, ``get_lat_weights``): normalised, they differ by
  up to 0.24 % (equiangular, poles included) and 0.42 % (Legendre-Gauss) of the largest weight at 32 x 64;
* differs (ACC only): the climatology ``c`` (ours: the train-split mean of each scalar field, one number, 0 for
  vector components, :func:`dandelion.evaluation.scoring.evaluate`; WB2: a per-grid-point climatology by day of
  year and hour of day, ERA5 1990-2019), so our ACC is WB2's formula against a different reference state.
"""

from __future__ import annotations

__all__ = ["DEFINITIONS", "WB2_METRICS", "check_definitions", "wb2_curves"]

#: Each score definition and its text (the ``definitions`` of ``metrics.json`` names the selected ones).
DEFINITIONS = {
    "dandelion": (
        "per lead and variable, the mean over forecasts (initial times of every trajectory) of each forecast's "
        "metric: rmse = mean_i sqrt(<(p_i - t_i)^2>), acc = mean_i ACC_i, likewise vrmse, vrmse_well and every "
        "registered metric; <.> the area-weighted mean with the grid's quadrature weights normalised to sum 1 "
        "(dandelion.metrics, dandelion.evaluation.definitions)"
    ),
    "wb2": (
        "WeatherBench 2 (Rasp et al. 2024, J. Adv. Model. Earth Syst. 16, e2023MS004019, Sec. 4.1): "
        "rmse_wb2 = sqrt(mean_i <(p_i - t_i)^2>), the square root of the mean over initial times of the "
        "area-weighted MSE; acc_wb2 = mean_i ACC_i, the uncentred ACC of each initial time averaged over initial "
        "times (the same numbers as acc); <.> with our quadrature weights (WB2: midpoint cell areas), anomalies "
        "against our climatology (the train-split mean of each scalar field, 0 for vector components; WB2: a "
        "day-of-year and hour-of-day climatology) (dandelion.evaluation.definitions)"
    ),
}

#: WeatherBench 2 scores: name -> (the registered metric it aggregates, how: ``"rms"`` the square root of the
#: mean over forecasts of its square, ``"mean"`` the mean over forecasts).
WB2_METRICS = {"rmse_wb2": ("rmse", "rms"), "acc_wb2": ("acc", "mean")}


def check_definitions(definitions) -> tuple[str, ...]:
    """``definitions`` (a name of :data:`DEFINITIONS` or a sequence of them) as a tuple in that order.

    Raises
    ------
    ValueError
        If it is empty or names an unknown definition (the message lists the known ones).
    """
    names = (definitions,) if isinstance(definitions, str) else tuple(definitions or ())
    unknown = [d for d in names if d not in DEFINITIONS]
    if unknown or not names:
        raise ValueError(
            f"definitions={list(names)}: choose one or more of {list(DEFINITIONS)} "
            "(dandelion: mean over forecasts of each forecast's score; wb2: WeatherBench 2's)"
        )
    return tuple(d for d in DEFINITIONS if d in names)


def wb2_curves(sums: dict, square_sums: dict, count: int) -> dict:
    """The WeatherBench 2 curves from the sums over forecasts of the registered metrics.

    Parameters
    ----------
    sums : metric -> variable -> torch.Tensor (n_steps,), the sum over forecasts of each forecast's metric.
    square_sums : metric -> variable -> torch.Tensor (n_steps,), the sum over forecasts of its square (for the
        metrics of :data:`WB2_METRICS` aggregated as ``"rms"``: for ``rmse`` the area-weighted MSE, in squared
        units of the field).
    count : the number of forecasts ``N``.

    Returns
    -------
    dict name -> variable -> list of n_steps floats (``rmse_wb2`` in the units of the field, ``acc_wb2`` in
    [-1, 1]), for the metrics of :data:`WB2_METRICS` whose base metric is registered.
    """
    out = {}
    for name, (base, how) in WB2_METRICS.items():
        if base not in sums:
            continue
        if how == "rms":
            out[name] = {var: (s / count).sqrt().tolist() for var, s in square_sums[base].items()}
        else:
            out[name] = {var: (s / count).tolist() for var, s in sums[base].items()}
    return out
