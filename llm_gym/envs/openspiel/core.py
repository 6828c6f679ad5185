"""The small pyspiel helpers every OpenSpiel module shares: loading games (cached), sampling chance outcomes,
replaying a history."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from llm_gym.errors import ConfigError, MissingDependencyError


def pyspiel_module() -> Any:
    """``pyspiel``, or a one-line error naming the extra to install."""
    try:
        import pyspiel
    except ImportError as exc:  # pragma: no cover - the extra is installed in development
        raise MissingDependencyError("OpenSpiel environments", "openspiel") from exc
    return pyspiel


@functools.lru_cache(maxsize=256)
def _load(name: str, params: tuple[tuple[str, Any], ...]) -> Any:
    pyspiel = pyspiel_module()
    try:
        return pyspiel.load_game(name, dict(params))
    except pyspiel.SpielError as exc:
        raise ConfigError(f"OpenSpiel cannot load {name} with {dict(params)}: {str(exc).splitlines()[-1]}") from exc


def load_game(name: str, params: Mapping[str, Any]) -> Any:
    """``pyspiel.load_game(name, params)``, cached (games are immutable); bad parameters raise ConfigError."""
    return _load(name, tuple(sorted(params.items())))


def sample_chance(state: Any, rng: Any) -> int:
    """One chance outcome of ``state`` drawn with ``rng`` (anything with ``random()``; one uniform draw per node)."""
    outcomes = state.chance_outcomes()
    u = rng.random()
    total = 0.0
    for action, probability in outcomes:
        total += probability
        if u < total:
            return int(action)
    return int(outcomes[-1][0])  # rounding: the probabilities may sum to slightly less than 1


def is_zero_sum(game: Any) -> bool:
    """True for OpenSpiel ``ZERO_SUM`` games: their score is a min-max over the utility range (affinetes' rule; a
    constant-sum game is scored like a general-sum one there, and so here)."""
    return game.get_type().utility.name == "ZERO_SUM"


def is_perfect_information(game: Any) -> bool:
    """True when every player sees the whole state (simultaneous moves aside)."""
    return game.get_type().information.name == "PERFECT_INFORMATION"


def replay(game: Any, history: Sequence[int]) -> Any:
    """The state after ``history``; a simultaneous round takes one action per player from the history."""
    state = game.new_initial_state()
    index, players = 0, game.num_players()
    while index < len(history):
        if state.is_simultaneous_node():
            state.apply_actions(list(history[index : index + players]))
            index += players
        else:
            state.apply_action(history[index])
            index += 1
    return state
