"""OpenSpiel games as text environments: a Gymnasium env (the learner in one seat, opponents in the others) and a
PettingZoo AEC env (every seat an agent, for self-play and multi-agent training).

Importing this package is cheap: pyspiel loads only when an env is made. Ids: ``OpenSpiel-<game>-v0`` for each game
in :data:`~llm_gym.envs.openspiel.catalog.GAMES` and ``OpenSpiel-v0`` (any game, by ``options={"task_id": N}``).
"""

from __future__ import annotations

import importlib
from typing import Any

from llm_gym.envs.openspiel.catalog import GAME_NAMES, GAMES, TASK_STRIDE, GameSpec, Task, decode_task_id, task_id_of

_LAZY = {
    "OpenSpielEnv": "llm_gym.envs.openspiel.env",
    "OpenSpielSnapshot": "llm_gym.envs.openspiel.snapshots",
    "MCTSConfig": "llm_gym.envs.openspiel.opponents",
    "OpenSpielAECEnv": "llm_gym.envs.openspiel.pettingzoo_env",
    "aec_env": "llm_gym.envs.openspiel.pettingzoo_env",
}

__all__ = ["GAMES", "GAME_NAMES", "TASK_STRIDE", "GameSpec", "Task", "decode_task_id", "task_id_of", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
