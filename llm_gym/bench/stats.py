"""Interval estimates for the leaderboard.

* returns and scores: the mean with a percentile bootstrap 95% CI;
* win and exact-match rates: the Wilson score interval (good at small n and at rates near 0 or 1);
* the aggregate over games: the interquartile mean (IQM) with a stratified bootstrap CI, the estimator of rliable
  (Agarwal et al., "Deep RL at the Edge of the Statistical Precipice", NeurIPS 2021), implemented here with NumPy and
  SciPy rather than importing rliable: each game's episodes are resampled with replacement on their own (strata =
  games), the IQM is taken over all resampled scores, and the CI is the 2.5/97.5 percentile of those IQMs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

BOOTSTRAP_SAMPLES = 2000
"""Resamples per bootstrap; enough for stable 2.5/97.5 percentiles at the sizes a bench run has."""
_SEED = 20211206  # fixed, so a leaderboard renders the same CIs from the same episodes


@dataclass(frozen=True)
class Estimate:
    """A point estimate with a 95% interval; ``n`` is the number of episodes behind it."""

    value: float
    low: float
    high: float
    n: int

    def format(self, digits: int = 2, percent: bool = False) -> str:
        if self.n == 0 or math.isnan(self.value):
            return "–"
        scale, suffix = (100.0, "%") if percent else (1.0, "")
        v, lo, hi = self.value * scale, self.low * scale, self.high * scale
        if math.isnan(lo):
            return f"{v:.{digits}f}{suffix}"
        return f"{v:.{digits}f}{suffix} [{lo:.{digits}f}, {hi:.{digits}f}]"


def bootstrap_mean(values: Sequence[float], samples: int = BOOTSTRAP_SAMPLES) -> Estimate:
    """Mean and percentile-bootstrap 95% CI (the CI is nan for fewer than two values)."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return Estimate(math.nan, math.nan, math.nan, 0)
    if x.size < 2:
        return Estimate(float(x.mean()), math.nan, math.nan, 1)
    rng = np.random.default_rng(_SEED)
    means = x[rng.integers(0, x.size, size=(samples, x.size))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return Estimate(float(x.mean()), float(low), float(high), int(x.size))


def wilson(successes: int, n: int, z: float = 1.959963984540054) -> Estimate:
    """Rate and Wilson score 95% interval of ``successes`` out of ``n``."""
    if n == 0:
        return Estimate(math.nan, math.nan, math.nan, 0)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return Estimate(p, max(0.0, centre - half), min(1.0, centre + half), n)


def iqm(values: Sequence[float] | np.ndarray) -> float:
    """Interquartile mean: the mean of the middle 50% (scipy's 25% trimmed mean, as rliable computes it)."""
    return float(scipy_stats.trim_mean(np.asarray(values, dtype=float), proportiontocut=0.25, axis=None))


def stratified_bootstrap_iqm(per_game: Sequence[Sequence[float]], samples: int = BOOTSTRAP_SAMPLES) -> Estimate:
    """IQM over every game's episodes, with a stratified bootstrap 95% CI (games are the strata)."""
    groups = [np.asarray(g, dtype=float) for g in per_game if len(g)]
    if not groups:
        return Estimate(math.nan, math.nan, math.nan, 0)
    point = iqm(np.concatenate(groups))
    n = sum(g.size for g in groups)
    if n < 2:
        return Estimate(point, math.nan, math.nan, n)
    rng = np.random.default_rng(_SEED)
    resampled = np.concatenate([g[rng.integers(0, g.size, size=(samples, g.size))] for g in groups], axis=1)
    estimates = scipy_stats.trim_mean(resampled, proportiontocut=0.25, axis=1)
    low, high = np.percentile(estimates, [2.5, 97.5])
    return Estimate(point, float(low), float(high), n)
