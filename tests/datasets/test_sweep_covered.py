"""sweep_covered: which values of each sweep axis a dataset's trajectory ids 0..n-1 hold. Ids run row-major over the
axes with the seed fastest, so a count below the sweep's size takes a corner of the sweep; dataset.yaml records it."""

import itertools

import pytest
from omegaconf import OmegaConf

from dandelion.cli.common import compose_config
from dandelion.datasets.generate import build_scenario, sweep_covered

SCENARIOS = ["galewsky", "cahn_hilliard", "chained_turbulence", "held_suarez", "shock_caps", "global_ocean"]


def _scenario(name, *over):
    cfg = compose_config("generate", [f"dataset={name}", "dataset.path=unused", *over])
    return build_scenario(OmegaConf.to_container(cfg.dataset))


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_whole_sweep_covers_every_axis_value(name):
    s = _scenario(name)  # n_trajectories unset: the whole sweep
    covered = sweep_covered(s)
    assert covered == {k: sorted(float(x) for x in v) for k, v in s.axes().items()}


def test_galewsky_first_ids_are_a_corner_and_two_seeds_span_the_sweep():
    # 160 ids under the default 6 seeds: 160 // 6 = 26 full tuples and part of the 27th; one u_max value holds
    # 4 phi_c x 2 h_hat x 4 H = 32 tuples, so all of them share the first u_max
    axes = _scenario("galewsky").axes()
    corner = sweep_covered(_scenario("galewsky", "dataset.n_trajectories=160"))
    assert corner["u_max"] == [axes["u_max"][0]]
    assert len(corner["phi_c"]) == 4 and len(corner["H"]) == 4
    spanned = sweep_covered(_scenario("galewsky", "dataset.n_trajectories=320", "dataset.n_seeds=2"))
    assert spanned == {k: sorted(v) for k, v in axes.items()}


def test_ids_follow_row_major_order_with_the_seed_fastest():
    s = _scenario("held_suarez", "dataset.n_seeds=2")
    axes = s.axes()
    expected = [
        (*combo, seed) for combo in itertools.product(*axes.values()) for seed in range(2)
    ]  # an independent enumeration of the documented order
    got = [tuple(s.sweep_index(i).values()) for i in range(len(expected))]
    assert got == expected


def test_a_narrowed_chained_turbulence_axis_covers_what_its_sweep_reaches():
    # r/Lambda [2, 4]: kappa*Lambda 0.4 is on the axis but its cells there have one unstable degree and are dropped,
    # so the whole narrowed sweep reaches 4 of the 5 kappa values; the generator's corner note compares with that
    s = _scenario("chained_turbulence", "dataset.r_over_lambda=[2,4]", "dataset.n_seeds=3")
    reach = sweep_covered(s, s.n_sweep)
    assert sweep_covered(s) == reach
    assert reach["r_over_lambda"] == [2.0, 4.0] and 0.4 not in reach["kappa_lambda"]
    assert len(reach["kappa_lambda"]) == len(s.axes()["kappa_lambda"]) - 1
    corner = sweep_covered(s, 7)  # 7 ids: cells (2, 1.0), (2, 1.4) and one seed of (2, 1.8)
    assert corner["r_over_lambda"] == [2.0] and corner["kappa_lambda"] == [1.0, 1.4, 1.8]
