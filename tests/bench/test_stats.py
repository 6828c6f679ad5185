from __future__ import annotations

import math

import numpy as np
import pytest

from llm_gym.bench.references import ATARI_REFERENCES
from llm_gym.bench.stats import bootstrap_mean, iqm, stratified_bootstrap_iqm, wilson


def test_wilson_matches_hand_computed_values() -> None:
    # 5 of 10: centre 0.5, half-width 1.96 * sqrt(0.025 + 0.0096) / 1.384 = 0.2634 (z = 1.96).
    estimate = wilson(5, 10)
    assert estimate.value == 0.5
    assert estimate.low == pytest.approx(0.2366, abs=1e-4)
    assert estimate.high == pytest.approx(0.7634, abs=1e-4)
    # 0 of 20 keeps a non-zero upper bound (the normal approximation would give [0, 0]).
    none = wilson(0, 20)
    assert none.low == 0.0 and none.high == pytest.approx(0.1611, abs=1e-4)
    assert math.isnan(wilson(0, 0).value)


def test_iqm_is_the_mean_of_the_middle_half() -> None:
    assert iqm([1, 2, 3, 4, 5, 6, 7, 8]) == pytest.approx(4.5)
    assert iqm([0, 0, 10, 10, 10, 10, 100, 1000]) == pytest.approx(10.0)


def test_bootstrap_mean_brackets_the_mean_and_is_reproducible() -> None:
    values = [1.0, 2.0, 3.0, 4.0, 10.0]
    a, b = bootstrap_mean(values), bootstrap_mean(values)
    assert a == b
    assert a.value == pytest.approx(4.0)
    assert a.low < a.value < a.high
    assert math.isnan(bootstrap_mean([3.0]).low)


def test_stratified_bootstrap_resamples_within_games() -> None:
    rng = np.random.default_rng(0)
    games = [rng.normal(0.2, 0.05, 10), rng.normal(0.8, 0.05, 10)]
    estimate = stratified_bootstrap_iqm(games)
    assert estimate.value == pytest.approx(iqm(np.concatenate(games)))
    assert estimate.low < estimate.value < estimate.high
    # Strata keep each game's share fixed, so the interval stays narrow although the two games differ a lot
    # (a plain bootstrap over the pooled episodes would move whole episodes between games).
    assert estimate.high - estimate.low < 0.3
    constant = stratified_bootstrap_iqm([[1.0, 1.0], [1.0, 1.0, 1.0]])
    assert constant.low == constant.high == 1.0


def test_human_normalised_scores_use_the_published_references() -> None:
    breakout, pong = ATARI_REFERENCES["breakout"], ATARI_REFERENCES["pong"]
    assert breakout.normalise(1.7) == 0.0 and breakout.normalise(30.5) == pytest.approx(1.0)
    assert pong.normalise(-20.7) == 0.0 and pong.normalise(14.6) == pytest.approx(1.0)
