"""Every seat an agent: an OpenSpiel game as a PettingZoo AEC env with text observations and action masks.

Why not Shimmy's ``OpenSpielCompatibilityV0`` underneath: it observes tensors only (the action mask goes in ``infos``),
while llm-gym's point is the text each seat reads; this env is built from the same text, action-name and move-log
modules as the Gymnasium env, so a seat reads exactly the same thing in both. Here:

* ``observe(agent)`` = ``{"observation": float32 vector, "text": str, "action_mask": int8 array}``: the vector is
  OpenSpiel's per-seat information-state tensor (observation tensor where there is none), flattened and zero-padded
  to the largest config variant, for classic multi-agent RL; the text is exactly what
  :class:`~llm_gym.envs.openspiel.env.OpenSpielEnv` shows that seat. Neither holds another seat's private
  information. (PettingZoo's ``api_test`` wants a numeric ``observation``, hence the vector beside the text.)
* chance nodes are sampled from the seeded generator after every move;
* a simultaneous-move round asks each acting seat in turn, showing all of them the state before the round, and
  applies the joint action once everyone has chosen (as OpenSpiel defines it);
* rewards are the change of each seat's return, so they add up to the game's returns; an illegal action is replaced
  by a random legal one with the shared penalty (counted in ``infos``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from pettingzoo import AECEnv

from llm_gym.envs.inputs import action_id, int_option, reset_options
from llm_gym.envs.openspiel import text
from llm_gym.envs.openspiel.catalog import TASK_STRIDE, decode_task_id, game_spec
from llm_gym.envs.openspiel.core import is_perfect_information, is_zero_sum, load_game, sample_chance
from llm_gym.envs.openspiel.env import MAX_OBSERVATION_CHARS
from llm_gym.envs.openspiel.moves import ActionNamer, MoveLog, SeatObservations
from llm_gym.envs.openspiel.scoring import is_success, normalised_score
from llm_gym.envs.protocol import InvalidActionPolicy
from llm_gym.envs.spaces import text_space
from llm_gym.errors import EnvInputError


class OpenSpielAECEnv(SeatObservations, AECEnv):
    """PettingZoo AEC env of one OpenSpiel game; agents are ``player_0`` ... ``player_{n-1}``.

    Args:
        game: OpenSpiel short name.
        config: config variant (as in task ids); ``reset(options={"task_id": N})`` picks another variant.
        params: OpenSpiel parameters overriding the variant's.
        max_turns: moves (all seats together) before every agent is truncated; None = the catalog cap x players.
        invalid_action: penalty for an illegal action (a random legal action is played instead).
        render_mode: ``ansi`` (the state as the seat to move sees it).
    """

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["ansi"],
        "name": "openspiel_text_v0",
        "is_parallelizable": False,
    }

    def __init__(
        self,
        game: str = "tic_tac_toe",
        *,
        config: int = 0,
        params: Mapping[str, Any] | None = None,
        max_turns: int | None = None,
        invalid_action: InvalidActionPolicy | None = None,
        render_mode: str | None = None,
    ) -> None:
        super().__init__()
        self.game_spec = game_spec(game)
        self.overrides = dict(params or {})
        self.max_turns_option = max_turns
        self.invalid_action = invalid_action or InvalidActionPolicy()
        self.render_mode = render_mode
        variants = [load_game(self.game_spec.name, {**v, **self.overrides}) for v in self.game_spec.variants]
        self.num_actions = max(g.num_distinct_actions() for g in variants)
        self.tensor_size = max(int(np.prod(_tensor_shape(g))) for g in variants)
        self._configure(self.game_spec.task_index * TASK_STRIDE + int(config))
        self.possible_agents = [f"player_{p}" for p in range(max(g.num_players() for g in variants))]
        self.action_spaces = {a: gym.spaces.Discrete(self.num_actions) for a in self.possible_agents}
        self.observation_spaces = {
            a: gym.spaces.Dict(
                {
                    "observation": gym.spaces.Box(-np.inf, np.inf, (self.tensor_size,), dtype=np.float32),
                    "text": text_space(MAX_OBSERVATION_CHARS),
                    "action_mask": gym.spaces.Box(0, 1, (self.num_actions,), dtype=np.int8),
                }
            )
            for a in self.possible_agents
        }
        self.state: Any = None
        self.np_random, _ = gym.utils.seeding.np_random(None)

    def _configure(self, task_id: int) -> None:
        task = decode_task_id(task_id)
        if task.game is not self.game_spec:
            raise EnvInputError(f"this env plays {self.game_spec.name}; task id {task_id} is {task.game.name}")
        self.task = task
        self.params = {**task.params, **self.overrides}
        self.game = load_game(self.game_spec.name, self.params)
        self.num_players = self.game.num_players()
        self.max_turns = self.max_turns_option or self.game_spec.max_turns * self.num_players
        self._utility = (self.game.min_utility(), self.game.max_utility())
        self._zero_sum = is_zero_sum(self.game)
        self._perfect = is_perfect_information(self.game)
        self._info_tensor = self.game.get_type().provides_information_state_tensor
        self._namer = ActionNamer(self.num_players, self.game_spec.static_action_names)
        self.instructions = text.instructions(self.game_spec, self.params, self.num_players, "other agents")

    def observation_space(self, agent: str) -> gym.spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> gym.spaces.Space:
        return self.action_spaces[agent]

    # -- the AEC API -------------------------------------------------------------------------------------------

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        options = reset_options(self, seed, options)
        task_id = int_option(self, options, "task_id", 0, None)
        if seed is not None:
            self.np_random, _ = gym.utils.seeding.np_random(seed)
        if task_id is not None:
            self._configure(task_id)
        self._rng = random.Random(int(self.np_random.integers(2**62)))
        self.agents = [f"player_{p}" for p in range(self.num_players)]
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self._returns = [0.0] * self.num_players
        self._invalid = [0] * self.num_players
        self._turns = 0
        self._decisions = [0] * self.num_players  # per seat: a global count would reveal that others moved
        self._pending: dict[int, int] = {}
        self.state = self.game.new_initial_state()
        self._log = MoveLog(self.game_spec, self.num_players, self._perfect, self._namer)
        self._play_chance()
        self._select()

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        player = int(agent.split("_")[1])
        self._cumulative_rewards[agent] = 0.0
        legal = self._legal(player)
        penalty = 0.0
        chosen = action_id(self, action, self.num_actions)
        if chosen not in legal:
            self._invalid[player] += 1
            penalty = self.invalid_action.penalty
            chosen = legal[self._rng.randrange(len(legal))]
        self._turns += 1
        self._decisions[player] += 1
        state = self.state
        if state.is_simultaneous_node():
            self._pending[player] = chosen
            if all(p in self._pending for p in range(self.num_players) if state.legal_actions(p)):
                joint = [self._pending.get(p, 0) for p in range(self.num_players)]
                self._log.record_joint(state, joint)
                state.apply_actions(joint)
                self._pending = {}
        else:
            self._log.record(state, player, chosen)
            state.apply_action(chosen)
        self._play_chance()
        returns = state.returns()
        self.rewards = {a: float(returns[p]) - self._returns[p] for p, a in enumerate(self.agents)}
        self.rewards[agent] -= penalty
        self._returns = [float(r) for r in returns]
        if state.is_terminal():
            self.terminations = dict.fromkeys(self.agents, True)
        elif self._turns >= self.max_turns:
            self.truncations = dict.fromkeys(self.agents, True)
        self._accumulate_rewards()
        self._select()

    def observe(self, agent: str) -> dict[str, Any]:
        player = int(agent.split("_")[1])
        legal = self._legal(player) if self._to_move(player) else []
        mask = np.zeros(self.num_actions, dtype=np.int8)
        mask[legal] = 1
        _, lines = self._namer.lines(self.state, player, legal)
        outcome = None
        if self.state.is_terminal() or self.truncations.get(agent, False):
            score = normalised_score(self._returns, player, *self._utility, self._zero_sum)
            outcome = text.outcome_text(self._returns, player, score)
        observation = self.seat_observation(player, lines, outcome)
        tensor = np.zeros(self.tensor_size, dtype=np.float32)
        values = (
            self.state.information_state_tensor(player) if self._info_tensor else self.state.observation_tensor(player)
        )
        tensor[: len(values)] = values
        return {"observation": tensor, "text": observation[:MAX_OBSERVATION_CHARS], "action_mask": mask}

    def render(self) -> str | None:
        if self.render_mode != "ansi" or self.state is None:
            return None
        return self.observe(self.agent_selection)["text"]

    def close(self) -> None:
        pass

    # -- helpers -----------------------------------------------------------------------------------------------

    def _play_chance(self) -> None:
        state = self.state
        while state.is_chance_node():
            action = sample_chance(state, self._rng)
            self._log.record(state, -1, action)
            state.apply_action(action)

    def _to_move(self, player: int) -> bool:
        state = self.state
        if state.is_terminal():
            return False
        if state.is_simultaneous_node():
            return player not in self._pending and bool(state.legal_actions(player))
        return state.current_player() == player

    def _legal(self, player: int) -> list[int]:
        return list(self.state.legal_actions(player))

    def _select(self) -> None:
        """The next agent to act: the seat to move, the next seat yet to choose in a simultaneous round, or (once
        the game is over) the first agent still listed, so the dead agents step out in order."""
        state = self.state
        if state.is_terminal() or any(self.truncations.values()):
            self.agent_selection = self.agents[0] if self.agents else self.possible_agents[0]
        elif state.is_simultaneous_node():
            waiting = [p for p in range(self.num_players) if p not in self._pending and state.legal_actions(p)]
            self.agent_selection = f"player_{waiting[0]}"
        else:
            self.agent_selection = f"player_{state.current_player()}"
        self.infos = {a: self._info(int(a.split("_")[1])) for a in self.agents}

    def _info(self, player: int) -> dict[str, Any]:
        info: dict[str, Any] = {"invalid_actions": self._invalid[player]}
        if self.state.is_terminal():
            score = normalised_score(self._returns, player, *self._utility, self._zero_sum)
            info.update(returns=tuple(self._returns), score=score, success=is_success(score))
        elif self._to_move(player):
            legal = self._legal(player)
            info.update(legal_actions=legal, action_names=self._namer.lines(self.state, player, legal)[0])
        return info


def _tensor_shape(game: Any) -> list[int]:
    """Shape of the per-seat tensor the env observes: information state where the game has one."""
    if game.get_type().provides_information_state_tensor:
        return game.information_state_tensor_shape()
    return game.observation_tensor_shape()


def aec_env(game: str = "tic_tac_toe", **kwargs: Any) -> OpenSpielAECEnv:
    """PettingZoo-style constructor: ``aec_env("leduc_poker")``."""
    return OpenSpielAECEnv(game, **kwargs)
