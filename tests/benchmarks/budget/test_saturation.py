"""The saturation fit of dandelion-budget: a known learning curve is recovered, and its flat budget is where a
doubling changes the loss by exactly the tolerance."""

import math

import numpy as np
import pytest

from dandelion.benchmarks.budget import study as BU
from dandelion.benchmarks.budget.saturation import fit_saturation, flat_budget, saturating_power_law

S0 = 1200.0
BUDGETS = S0 * 2.0 ** np.arange(5)  # x1 .. x16


@pytest.mark.parametrize("c, b, alpha", [(0.002, 0.004, 0.9), (0.006, 0.01, 1.0), (1e-4, 0.05, 0.5)])
def test_flat_budget_is_where_one_doubling_changes_the_loss_by_tol(c, b, alpha):
    """At the formula's budget, L(2S)/L(S) - 1 equals -tol (checked by evaluating the law, not the formula); a
    budget 10 % smaller still gains more than tol per doubling."""
    tol = 0.05
    s = flat_budget(c, b, alpha, S0, tol)
    law = lambda x: saturating_power_law(x, c, b, alpha, S0)  # noqa: E731
    assert s > S0
    assert law(2 * s) / law(s) - 1 == pytest.approx(-tol, rel=1e-9)
    assert law(2 * 0.9 * s) / law(0.9 * s) - 1 < -tol


def test_flat_budget_limits():
    """A curve whose every doubling gains less than tol is flat at S0, and so is one whose floor dominates at S0
    already; a pure power law (no floor) never is; bad parameters are refused."""
    assert flat_budget(0.01, 1e-4, 0.05, S0, 0.05) == S0  # 1 - 2^-0.05 = 3.4 % < 5 %: every doubling is flat
    c, b = 1.0, 1e-3  # L(S0) = 1.001, L(2 S0) = 1.0005: a 0.05 % gain
    assert saturating_power_law(2 * S0, c, b, 1.0, S0) / saturating_power_law(S0, c, b, 1.0, S0) - 1 > -0.05
    assert flat_budget(c, b, 1.0, S0, 0.05) == S0
    assert flat_budget(0.0, 1.0, 1.0, S0, 0.05) == math.inf
    with pytest.raises(ValueError, match="tol"):
        flat_budget(0.01, 1.0, 1.0, S0, 0.0)
    for bad in ((0.01, 1.0, 0.0), (0.01, 0.0, 1.0)):
        with pytest.raises(ValueError, match="positive"):
            flat_budget(*bad, S0, 0.05)


@pytest.mark.parametrize("c, b, alpha", [(0.002, 0.004, 0.9), (0.006, 0.01, 1.0)])
def test_fit_recovers_a_known_learning_curve(c, b, alpha):
    """Final losses drawn from a known law at x1..x16 (with +-0.3 % alternating noise) give back its floor,
    exponent and flat budget, and the leave-one-out range brackets the true flat budget."""
    noise = 1 + 0.003 * (-1.0) ** np.arange(len(BUDGETS))
    losses = saturating_power_law(BUDGETS, c, b, alpha, S0) * noise
    fit = fit_saturation(BUDGETS, losses, 0.05)
    truth = flat_budget(c, b, alpha, S0, 0.05)
    assert fit.c == pytest.approx(c, rel=0.15)
    assert fit.alpha == pytest.approx(alpha, rel=0.15)
    assert fit.flat_steps == pytest.approx(truth, rel=0.25)
    assert fit.max_rel_residual < 0.01
    lo, hi = fit.loo_flat_steps
    assert lo <= truth * 1.25 and hi >= truth / 1.25


def test_fit_of_a_pure_power_law_finds_no_near_floor():
    """Losses halving at every doubling (no floor): the fitted flat budget lies far beyond the measured ones."""
    fit = fit_saturation(BUDGETS, 0.1 * (BUDGETS / S0) ** -1.0, 0.05)
    assert fit.flat_steps > 100 * BUDGETS.max()


def test_three_points_fit_without_a_leave_one_out_range():
    """Three budgets determine the three parameters.

    The law passes through them, and no leave-one-out range is given.
    """
    losses = saturating_power_law(BUDGETS[:3], 0.002, 0.004, 0.9, S0)
    fit = fit_saturation(BUDGETS[:3], losses, 0.05)
    assert fit.loo_flat_steps is None and fit.n_points == 3
    assert fit.max_rel_residual < 1e-3


def test_fit_refuses_too_few_or_bad_points():
    with pytest.raises(ValueError, match="at least 3"):
        fit_saturation([1200, 2400], [0.1, 0.05], 0.05)
    with pytest.raises(ValueError, match="positive and finite"):
        fit_saturation([1200, 2400, 4800], [0.1, float("nan"), 0.02], 0.05)
    with pytest.raises(ValueError, match="does not fall"):
        fit_saturation(BUDGETS[:4], [0.010, 0.011, 0.012, 0.013], 0.05)  # a rising series: no learning curve


def test_budget_report_shows_the_fit_only_where_no_doubling_is_flat(tmp_path):
    """budget.md gets a fit row for a series of 4 still-improving budgets, none for one already flat or too short."""

    def recs(model, losses):
        return [
            {
                "dataset_key": "d",
                "model": model,
                "seed": 0,
                "lr": 1e-3,
                "multiplier": 2**k,
                "steps": int(S0) * 2**k,
                "val_loss": float(v),
                "next_step": 0.1,
                "rollout_mean": 0.2,
                "curve": [],
            }
            for k, v in enumerate(losses)
        ]

    improving = saturating_power_law(BUDGETS[:4], 0.002, 0.004, 0.9, S0)
    rising = [0.01, 0.005, 0.009, 0.004]  # a 'rose' at x4 (an unstable rate): not a learning curve
    diverged = list(improving[:2]) + [float("nan")] + list(improving[2:])  # x4 diverged: four finite budgets remain
    records = (
        recs("a", improving)
        + recs("b", [0.01, 0.008, 0.0079, 0.0078])
        + recs("c", improving[:3])
        + recs("d", rising)
        + recs("e", [0.01])
        + recs("f", diverged)
        + recs("g", 0.1 * (BUDGETS[:4] / S0) ** -1.0)
    )
    records[4]["stability"] = {
        "n_unstable": 3,
        "n_forecasts": 36,
        "first_unstable_lead_step": 17,
        "median_vrmse_1_20": 0.62,
    }
    records[5]["stability"] = {
        "n_unstable": 36,
        "n_forecasts": 36,
        "first_unstable_lead_step": 2,
        "median_vrmse_1_20": float("inf"),
    }
    records[6]["rollout_mean"] = float("nan")  # a record without the stability record whose rollouts blew up
    md = BU.render(tmp_path, records, 0.05).read_text()
    lines = md.splitlines()
    assert sum("(3 of 36 blew up; median 0.62)" in line for line in lines) == 1  # the 1:20 cell says so
    assert sum("(36 of 36 blew up; median not finite)" in line for line in lines) == 1
    assert sum("(blew up; not counted)" in line for line in lines) == 1
    fit_rows = [line for line in md.splitlines() if line.startswith("| ") and " steps (x" in line]
    assert [row.split("|")[1].strip() for row in fit_rows] == ["a", "f"]
    (no_floor,) = [line for line in md.splitlines() if line.startswith("| g | 0 |") and "x1, x2, x4, x8" in line]
    assert (
        "| beyond x1000 (x" in no_floor or "| never |" in no_floor
    )  # a pure power law: no budget within reach is flat
    assert "| x1, x2, x8, x16 |" in fit_rows[1]  # the diverged x4 is left out of the fit, not counted as a point
    truth = flat_budget(0.002, 0.004, 0.9, S0, 0.05)
    shown = float(fit_rows[0].split("|")[8].split(" steps")[0].replace(",", ""))
    assert shown == pytest.approx(truth, rel=0.1)
    assert (tmp_path / "budget_d.png").exists()


def test_the_study_takes_only_cells_of_the_network_the_preset_builds_now():
    """The archived v1 cells of Dandelion are of the stock network (before the presets took advected persistence):
    the study refuses them as its x1 row rather than set them beside runs of the new network; SFNO's are current."""
    from dandelion.benchmarks.budget import study
    from dandelion.benchmarks.grid import benchmark as B
    from dandelion.cli.common import UsageError

    cfg = B.compose("budget", ["scale=cpu_v1"])
    assert study._cell(cfg, "galewsky_32x64", "sfno", 0)["model"] == "sfno"
    with pytest.raises(UsageError, match="no finished benchmark cell"):
        study._cell(cfg, "galewsky_32x64", "dandelion", 0)
