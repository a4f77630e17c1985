"""Numbers as text in the reports (leaderboards, transfer tables): enough significant figures that a ratio computed
from two printed values is close to the printed ratio, and a seed spread that never prints as zero."""

from __future__ import annotations

import math

__all__ = ["decimals", "fmt_value", "fmt_mean_std"]


def decimals(x: float, figures: int = 4) -> int:
    """Decimal places that show ``x`` with at least ``figures`` significant figures, and never fewer than 4
    (4 for ``|x| >= 0.1`` at 4 figures, 6 for 0.0033); 4 for a non-finite or zero ``x``."""
    if not math.isfinite(x) or x == 0:
        return 4
    return max(4, figures - 1 - math.floor(math.log10(abs(x))))


def fmt_value(x: float, digits: int | None = None) -> str:
    """``x`` with :func:`decimals` places (or ``digits``)."""
    return f"{x:.{decimals(x) if digits is None else digits}f}"


def fmt_mean_std(m: float, s: float) -> str:
    """``mean ± std``: the mean at its :func:`decimals`, the std at the same places or more, enough for two
    significant figures (``0.2704 ± 0.000031``, not ``± 0.0000``); ``± n/a`` for a NaN std (one seed)."""
    d = decimals(m)
    if not math.isfinite(s):
        return fmt_value(m, d) + " ± n/a"
    return fmt_value(m, d) + " ± " + fmt_value(s, d if s == 0 else max(d, 1 - math.floor(math.log10(abs(s)))))
