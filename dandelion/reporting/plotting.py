"""Figure helpers shared by the rollout report and the leaderboard: a headless pyplot, atomic PNG files."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

__all__ = ["pyplot", "save_figure", "plain_log_ticks"]


def pyplot():
    """``matplotlib.pyplot`` on the non-interactive Agg backend (unless the caller chose a backend already)."""
    matplotlib.use("Agg", force=False)
    return plt


def _plain(v: float) -> str:
    """A tick value as a plain number: two significant figures below 100 (0.004, 0.05, 20), whole numbers with
    thousands separators from 100 (200, 1,500), never a power of ten."""
    return f"{v:.2g}" if v < 100 else f"{v:,.0f}"


def plain_log_ticks(ax, axis: str = "y") -> None:
    """On a log ``axis`` (``"x"`` or ``"y"`` of ``ax``) whose data span less than about 1.5 decades, label ticks as
    plain numbers (0.004, 0.005, ...; 200, 500, 1,000; at 1-2-5 steps above a factor 3), which read better than
    powers of ten that may not appear at all. Call it after plotting (it reads the data limits).

    Raises:
        ValueError: ``axis`` is neither ``"x"`` nor ``"y"``."""
    if axis not in ("x", "y"):
        raise ValueError(f"plain_log_ticks(axis={axis!r}): pass axis='x' or axis='y'")
    lo, hi = (float(v) for v in (ax.dataLim.intervalx if axis == "x" else ax.dataLim.intervaly))
    if not (0 < lo < hi) or hi / lo > 30:
        return
    subs = (1.0, 2.0, 5.0) if hi / lo > 3 else tuple(range(1, 10))
    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_locator(LogLocator(base=10, subs=subs))
    target.set_major_formatter(FuncFormatter(lambda v, _pos: _plain(v)))
    target.set_minor_formatter(NullFormatter())


def save_figure(fig, path, dpi: int = 100) -> Path:
    """Save ``fig`` as a PNG at ``path`` (``dpi`` dots per inch) atomically (temporary name in the same folder, then
    rename) and close it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.png")
    fig.savefig(tmp, dpi=dpi)  # fixed layout (no constrained/tight layout: they cost seconds per figure)
    plt.close(fig)
    os.replace(tmp, path)
    return path
