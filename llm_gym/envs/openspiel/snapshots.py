"""Exact snapshots of an :class:`~llm_gym.envs.openspiel.env.OpenSpielEnv`: game state, generators, opponents and
counters, so a different action can be tried from a point (the reflection agent replays its corrections from here).

A mixin over the env's own state, as :class:`~llm_gym.envs.openspiel.moves.SeatObservations` is: snapshots read and
write the attributes the env's setup and play keep. A snapshot holds live pyspiel states and generator objects: it
lives in memory (:mod:`llm_gym.envs.state_codec` registers no OpenSpiel types).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from llm_gym.envs.openspiel.catalog import Task
from llm_gym.envs.openspiel.moves import MoveLog
from llm_gym.envs.openspiel.opponents import Opponent


@dataclass(frozen=True)
class OpenSpielSnapshot:
    """Everything :meth:`Snapshots.restore_state` needs to continue from a point (generators included)."""

    task: Task
    params: Mapping[str, Any]
    seat: int
    state: Any
    rngs: tuple[random.Random, random.Random]
    """The generator objects themselves (random opponents share the second) and, below, their states."""
    rng_states: tuple[Any, Any]
    opponents: tuple[tuple[int, Opponent, Any], ...]
    counters: tuple[tuple[int, ...], int, float, bool]
    log: Any


class Snapshots:
    """``clone_state`` / ``restore_state`` for the OpenSpiel env (its attributes; ``_load``, ``_observe`` its own)."""

    task: Task
    params: dict[str, Any]
    seat: int
    state: Any

    def clone_state(self) -> OpenSpielSnapshot:
        """Snapshot game, generators, opponents and counters so a different action can be tried from here."""
        if self.state is None:
            raise gym.error.ResetNeeded("call reset() before clone_state()")
        return OpenSpielSnapshot(
            task=self.task,
            params=dict(self.params),
            seat=self.seat,
            state=self.state.clone(),
            rngs=(self._chance_rng, self._fallback_rng),
            rng_states=(self._chance_rng.getstate(), self._fallback_rng.getstate()),
            opponents=tuple((p, o, o.snapshot()) for p, o in self._opponents.items()),
            counters=(tuple(self._decisions), self._invalid, self._previous_return, self._forfeit),
            log=self._log.snapshot(),
        )

    def restore_state(self, snapshot: OpenSpielSnapshot) -> None:
        """Return to a snapshot taken with :meth:`clone_state` on this env."""
        if snapshot.task != self.task or dict(snapshot.params) != self.params:
            self.task_id = snapshot.task.task_id
            self._load(snapshot.task)
        self.seat = snapshot.seat
        self.state = snapshot.state.clone()
        self._chance_rng, self._fallback_rng = snapshot.rngs
        self._chance_rng.setstate(snapshot.rng_states[0])
        self._fallback_rng.setstate(snapshot.rng_states[1])
        self._opponents = {}
        for player, opponent, opponent_state in snapshot.opponents:
            opponent.restore(opponent_state)
            self._opponents[player] = opponent
        self._policy_opponents = [o for o in self._opponents.values() if hasattr(o, "invalid_actions")]
        decisions, self._invalid, self._previous_return, self._forfeit = snapshot.counters
        self._decisions = list(decisions)
        self._log = MoveLog(self.game_spec, self.num_players, self._perfect, self._namer)
        self._log.restore(snapshot.log)
        self._scored = (None, 0.5)
        self._observe(0.0, False)
        self._done = self.state.is_terminal() or self._forfeit or self._decisions[self.seat] >= self.max_turns
