"""Which steps of an episode deserve a reflection: credit assignment for delayed rewards.

The rule: a step's *outcome* is its discounted reward-to-go within its episode,

    outcome_t = r_t + gamma * r_{t+1} + gamma^2 * r_{t+2} + ...   (gamma = ``credit_gamma``)

so a reward that arrives k steps after a move is charged to that move with weight ``gamma**k``. In Pong a point is
lost many frames after the paddle was last in a position to reach the ball; with gamma = 0.9 the twenty steps
before a lost point carry at least 0.12 of it (0.9**20), the steps right before it nearly all of it, and a step far
from any reward carries almost nothing. In a board game the final result is charged to every move, the late ones
most. The ``rate`` share of each episode's steps with the lowest outcome are chosen (at least one), but only steps
whose outcome is below ``threshold`` (default 0: a step after which nothing bad happened is never "poor"). Ties go to the earlier step, which had more time to act.

Games that punish by taking a life rather than by a negative reward (Breakout) would show no poor step at all, so a
lost life (``info["lives"]`` going down) counts as ``-life_penalty`` in the rewards this rule sees, and in the
outcome of the verification replays; returns and scores are reported as the game gives them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


def credit_reward(
    reward: float, info_before: Mapping[str, Any], info_after: Mapping[str, Any], life_penalty: float
) -> float:
    """The reward a step counts with for credit assignment: the env's, minus ``life_penalty`` per life lost."""
    lost = 0
    if "lives" in info_before and "lives" in info_after:
        lost = max(0, int(info_before["lives"]) - int(info_after["lives"]))
    return float(reward) - life_penalty * lost


def discounted_outcomes(rewards: Sequence[float], gamma: float) -> np.ndarray:
    """The discounted reward-to-go of every step of one episode."""
    outcomes = np.zeros(len(rewards), dtype=np.float64)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = float(rewards[t]) + gamma * running
        outcomes[t] = running
    return outcomes


def choose_poor_steps(outcomes: np.ndarray, rate: float, threshold: float = 0.0) -> list[int]:
    """Indices (ascending) of the ``rate`` share of steps with the lowest outcome, among those below ``threshold``."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"reflection rate must be in [0, 1], got {rate}")
    if len(outcomes) == 0 or rate == 0.0:
        return []
    count = max(1, math.ceil(rate * len(outcomes)))
    order = np.lexsort((np.arange(len(outcomes)), outcomes))  # by outcome, then by step index
    chosen = [int(i) for i in order[:count] if outcomes[i] < threshold]
    return sorted(chosen)
