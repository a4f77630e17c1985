"""Plain tick labels on a log axis (dandelion/reporting/plotting.py), on either axis."""

import pytest

from dandelion.reporting.plotting import plain_log_ticks, pyplot


@pytest.mark.parametrize("axis", ["x", "y"])
def test_plain_log_ticks_label_the_chosen_axis_only(axis):
    plt = pyplot()
    fig, ax = plt.subplots()
    try:
        ax.loglog([100.0, 400.0], [100.0, 400.0])  # 0.6 decades on both axes
        other = (ax.yaxis if axis == "x" else ax.xaxis).get_major_formatter()
        plain_log_ticks(ax, axis=axis)
        mine = (ax.xaxis if axis == "x" else ax.yaxis).get_major_formatter()
        assert [mine(v, 0) for v in (0.004, 20.0, 200.0, 1500.0)] == ["0.004", "20", "200", "1,500"]
        assert (ax.yaxis if axis == "x" else ax.xaxis).get_major_formatter() is other  # the other axis as it was
    finally:
        plt.close(fig)


def test_plain_log_ticks_refuses_an_unknown_axis():
    plt = pyplot()
    fig, ax = plt.subplots()
    try:
        with pytest.raises(ValueError, match="axis='x' or axis='y'"):
            plain_log_ticks(ax, axis="z")
    finally:
        plt.close(fig)
