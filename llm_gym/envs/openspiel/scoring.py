"""A game's returns -> one normalised score in [0, 1] for the learner's seat, and ``success = score > 0.5``.

The rules are affinetes' (``Actor._compute_score`` in AffineFoundation/affinetes
``environments/openspiel/env.py``), so a score here is the score there:

* zero-sum games (OpenSpiel's ``ZERO_SUM`` utility), whatever the number of players: min-max over the game's
  utility range, so a two-player draw is 0.5 and a four-player team game (euchre, bridge) scores the team's result;
  a game whose range is empty scores 0;
* otherwise, more than two players: by rank, ``1 - rank / (players - 1)`` where ``rank`` counts the players with a
  strictly higher return, so players who tie share the *best* of their places (all four tied in hearts: 1.0 each);
* otherwise, two players: 1 if the learner's return beats the other's, 0.5 on a tie, 0 below;
* otherwise (one player: blackjack, 2048, solitaire): min-max over the utility range (0.5 if the range is empty).

Scores are clipped to [0, 1] (OpenSpiel keeps returns inside the utility range, so this never changes one).
"""

from __future__ import annotations

from collections.abc import Sequence


def normalised_score(
    returns: Sequence[float], player: int, min_utility: float, max_utility: float, zero_sum: bool
) -> float:
    """The learner's score in [0, 1] from everyone's returns (see the module docstring for the rules)."""
    mine = float(returns[player])
    players = len(returns)
    span = max_utility - min_utility
    if zero_sum:
        return _clip((mine - min_utility) / span) if span > 0 else 0.0
    if players > 2:
        rank = sum(float(r) > mine for r in returns)
        return 1.0 - rank / (players - 1)
    if players == 2:
        other = float(returns[1 - player])
        return 1.0 if mine > other else 0.0 if mine < other else 0.5
    return _clip((mine - min_utility) / span) if span > 0 else 0.5


def _clip(score: float) -> float:
    return min(1.0, max(0.0, score))


def is_success(score: float) -> bool:
    """The shared success rule (affinetes' ``success = score > 0.5``)."""
    return score > 0.5
