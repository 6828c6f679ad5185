"""Small statistics for reporting returns: mean with a 95% confidence interval (Student's t)."""

from __future__ import annotations

import math
from collections.abc import Sequence

# Two-sided 95% critical values of Student's t for 1..30 degrees of freedom; beyond 30 the normal 1.96 is close.
_T95 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)


def mean_ci95(values: Sequence[float]) -> tuple[float, float]:
    """(mean, half-width of the 95% CI). The half-width is nan for fewer than two values."""
    n = len(values)
    if n == 0:
        return math.nan, math.nan
    mean = sum(values) / n
    if n < 2:
        return mean, math.nan
    variance = sum((v - mean) ** 2 for v in values) / (n - 1)
    t = _T95[n - 2] if n - 1 <= len(_T95) else 1.96
    return mean, t * math.sqrt(variance / n)


def format_mean_ci(values: Sequence[float], digits: int = 2) -> str:
    """``"12.30 ± 1.05 (n=20)"``."""
    mean, half = mean_ci95(values)
    if math.isnan(half):
        return f"{mean:.{digits}f} (n={len(values)})"
    return f"{mean:.{digits}f} ± {half:.{digits}f} (n={len(values)})"


def wilson_ci95(successes: int, n: int) -> tuple[float, float]:
    """95% Wilson score interval of a success rate (sound at small n and at rates near 0 or 1)."""
    if n == 0:
        return math.nan, math.nan
    z = 1.959964
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)
