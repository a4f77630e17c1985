"""The report's figures say what they show.

Axes that fit the data, labels naming the error, titles naming the forecast.
"""

import numpy as np
import pytest

from dandelion.export.forecasts import forecasts_to_xarray
from dandelion.reporting import figures as report
from dandelion.sphere import SphereGrid


@pytest.fixture
def figures(monkeypatch):
    """Keep each figure instead of writing it."""
    kept = []

    def keep(fig, path):
        kept.append(fig)
        return path

    monkeypatch.setattr(report, "save_figure", keep)
    yield kept
    report.pyplot().close("all")


def _metrics(scale: float, n: int = 20) -> dict:
    """metrics.json content of a rollout whose VRMSE grows from ``scale`` to 25 * ``scale`` over ``n`` 4-hour leads."""
    curve = list(scale * np.geomspace(1, 25, n))
    return {
        "model": "m",
        "dataset": "galewsky",
        "split": "test",
        "n_forecasts": 3,
        "lead_time_hours": [4.0 * k for k in range(1, n + 1)],
        "units": {"h": "m", "u": "m/s", "v": "m/s", "velocity": "m/s"},
        "metrics": {
            "vrmse": {"h": curve, "velocity": curve, "u": curve, "v": curve, "mean": curve},
            "vrmse_well": {"h": curve, "u": curve, "v": curve, "mean": curve},
            "acc": {"h": [1.0 - c for c in curve], "u": curve, "v": curve},
        },
    }


def test_error_vs_lead_keeps_small_errors_apart(figures):
    """Curves between 0.004 and 0.1 on a log axis fitted to them, labelled with the weighting, one legend."""
    report.plot_error_vs_lead({"a": _metrics(0.004), "b": _metrics(0.0045)}, "unused.png", metric="vrmse")
    (fig,) = figures
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == 5
    for ax in panels:
        assert ax.get_yscale() == "log"
        lo, hi = ax.get_ylim()
        assert 0.001 < lo < 0.004 and 0.11 < hi < 1.0  # fitted to the curves, not 0..1
        assert "area-weighted" in ax.get_ylabel()
        assert ax.get_legend() is None
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["a", "b"]
    assert panels[0].get_xlabel() == "lead time [d]"  # leads up to 80 h: in days


def test_error_vs_lead_names_the_wells_vrmse_and_keeps_acc_linear(figures):
    report.plot_error_vs_lead({"a": _metrics(0.004)}, "unused.png", metric="vrmse_well")
    report.plot_error_vs_lead({"a": _metrics(0.004)}, "unused.png", metric="acc")
    well, acc = figures
    assert all("the Well's" in ax.get_ylabel() for ax in well.axes if ax.get_visible())
    assert all(ax.get_yscale() == "linear" for ax in acc.axes if ax.get_visible())


def test_maps_title_names_model_dataset_trajectory_and_times_in_one_unit(figures):
    grid = SphereGrid(8, 16)
    shape = (1, 2, 20, 8, 16)
    rng = np.random.default_rng(1)
    fc = {"h": rng.random(shape)}
    ds = forecasts_to_xarray(
        fc,
        grid=grid,
        fields={"h": {"kind": "scalar", "units": "m", "long_name": "h"}},
        init_time=[8 * 3600.0, 12 * 3600.0],
        lead_time=3600.0 * 4 * np.arange(1, 21),
        trajectory=[17],
        truth=fc,
        attrs={"dataset": "galewsky", "model": "sfno", "split": "test"},
    )
    report.plot_maps(ds, "unused.png", leads=(1, 20), init=1)
    (fig,) = figures
    title = fig._suptitle.get_text()
    for word in (
        "sfno",
        "galewsky",
        "test split",
        "trajectory 17",
        "0.50 d",
    ):  # initialised 12 h = 0.50 d after the start
        assert word in title
    panel_titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert any("+0.17 d" in t for t in panel_titles) and any("+3.33 d" in t for t in panel_titles)
    assert not any(" h," in t or t.endswith(" h") for t in panel_titles)


def test_spectra_have_units(figures):
    res = _metrics(0.01)
    res["spectra"] = {"leads": [1, 20], "true": {"h": [[1.0, 2.0, 1.0]] * 2}, "pred": {"h": [[1.0, 2.0, 0.5]] * 2}}
    report.plot_spectra(res, "unused.png")
    (fig,) = figures
    ax = next(ax for ax in fig.axes if ax.get_visible())
    assert ax.get_ylabel() == "P(l) [m²]" and "degree" in ax.get_xlabel()
    assert {"lead +0.17 d", "lead +3.33 d", "truth", "prediction"} <= {t.get_text() for t in fig.legends[0].get_texts()}
