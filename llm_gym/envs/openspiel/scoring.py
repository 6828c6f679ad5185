"""A game's returns -> one normalised score in [0, 1] for the learner's seat, and ``success = score > 0.5``.

* one player: min-max over the game's utility range (2048: the fraction of the target tile's score, and so on);
* two players, zero-sum (or constant-sum): min-max over the utility range, so a draw is 0.5;
* two players, general-sum: 1 if the learner's return beats the other's, 0.5 on a tie, 0 below;
* more than two players: by rank, ``(players beaten + 0.5 * players tied) / (players - 1)``, so partners who share a
  team result (bridge, euchre) tie with each other.
"""

from __future__ import annotations

from collections.abc import Sequence


def normalised_score(
    returns: Sequence[float], player: int, min_utility: float, max_utility: float, zero_sum: bool
) -> float:
    """The learner's score in [0, 1] from everyone's returns (see the module docstring for the rules)."""
    mine = float(returns[player])
    players = len(returns)
    if players <= 2 and (players == 1 or zero_sum):
        span = max_utility - min_utility
        if span <= 0:
            return 0.5
        return min(1.0, max(0.0, (mine - min_utility) / span))
    others = [float(r) for i, r in enumerate(returns) if i != player]
    if players == 2:
        return 1.0 if mine > others[0] else 0.5 if mine == others[0] else 0.0
    beaten = sum(mine > r for r in others)
    tied = sum(mine == r for r in others)
    return (beaten + 0.5 * tied) / len(others)


def is_success(score: float) -> bool:
    """The shared success rule."""
    return score > 0.5
