"""open_spiel's Python algorithms llm-gym uses, in one place: the exact best response to the uniformly random
policy (the ``best_response`` agent, exact evaluation) and exploitability (exact evaluation).

Importing this module loads open_spiel's Python side (pyspiel and its algorithm modules), so its callers import it
inside the function that needs it: the CLI and the bench load the modules that call it on every run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from open_spiel.python import policy
from open_spiel.python.algorithms import exploitability
from open_spiel.python.algorithms.best_response import BestResponsePolicy


def best_response_to_uniform(game: Any, seat: int) -> BestResponsePolicy:
    """open_spiel's exact ``BestResponsePolicy`` for ``seat`` against the uniformly random policy at the other seats."""
    return BestResponsePolicy(game, seat, policy.UniformRandomPolicy(game))


def exploitability_of(game: Any, rows: Mapping[str, Mapping[int, float]]) -> tuple[float, float]:
    """(exploitability, NashConv) of the policy that plays ``rows[info_state_key]`` (action -> probability) at the
    information states it names and open_spiel's uniform default everywhere else."""
    table = policy.TabularPolicy(game)
    for key, distribution in rows.items():
        row = table.policy_for_key(key)
        row[:] = 0.0
        for action, p in distribution.items():
            row[action] = p
    return float(exploitability.exploitability(game, table)), float(exploitability.nash_conv(game, table))
