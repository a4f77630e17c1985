"""Numbers as text in the reports: at least four significant figures, and a nonzero spread never shown as zero."""

import math

import pytest

from dandelion.reporting.numbers import fmt_mean_std, fmt_value


@pytest.mark.parametrize("x", [4.8917, 0.5832, 0.0620, 0.0033, 0.002145, 7.1e-6, -0.0456])
def test_a_value_keeps_four_significant_figures(x):
    text = fmt_value(x)
    assert len(text.lstrip("-").replace(".", "").lstrip("0")) >= 4, text
    assert float(text) == pytest.approx(x, rel=5e-4)  # within half a unit of the fourth figure


def test_ratios_of_printed_values_stay_close_to_the_true_ratio():
    # the Galewsky case that motivated it: at 4 decimals 0.0033 / 0.0021 = 1.571 against the true 1.534
    a, b = 0.003292, 0.002145
    assert float(fmt_value(a)) / float(fmt_value(b)) == pytest.approx(a / b, rel=1e-3)


@pytest.mark.parametrize("m, s", [(0.2704, 3.1e-5), (0.09949, 2e-6), (0.0620, 0.0013), (1.5, 0.0)])
def test_a_spread_is_shown_with_two_figures_and_never_as_zero_unless_zero(m, s):
    mean, std = fmt_mean_std(m, s).split(" ± ")
    assert float(mean) == pytest.approx(m, rel=5e-4)
    assert float(std) == pytest.approx(s, rel=0.05, abs=0.0)
    assert (float(std) == 0) == (s == 0)


def test_one_seed_has_no_spread():
    assert fmt_mean_std(0.5, math.nan).endswith(" ± n/a")
