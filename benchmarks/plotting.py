"""Figure helpers shared by the rollout report and the leaderboard: a headless pyplot, atomic PNG files."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt

__all__ = ["pyplot", "save_figure"]


def pyplot():
    """``matplotlib.pyplot`` on the non-interactive Agg backend (unless the caller chose a backend already)."""
    matplotlib.use("Agg", force=False)
    return plt


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
