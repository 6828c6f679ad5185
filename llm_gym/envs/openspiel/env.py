"""The Gymnasium env: one OpenSpiel game as text, the learner in one seat, opponents in the others.

``step(action)`` plays one learner decision, then chance nodes (sampled from the env's seeded generator) and the
opponents' moves until the learner must decide again or the game ends. Simultaneous-move rounds (goofspiel) are
played as one joint action: the opponents choose from the same state as the learner, without seeing its choice.

Setup, play and observation read and write the same private game state, so they stay in this one class; what a seat
is told (:class:`~llm_gym.envs.openspiel.moves.SeatObservations`) and exact snapshots
(:class:`~llm_gym.envs.openspiel.snapshots.Snapshots`) are mixins over that state, each in its own module.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from llm_gym.envs.inputs import action_id, int_option, reset_options
from llm_gym.envs.openspiel import text
from llm_gym.envs.openspiel.affinetes import affinetes_seat
from llm_gym.envs.openspiel.catalog import GAMES, PROFILES, TASK_STRIDE, GameSpec, Task, decode_task_id, game_spec
from llm_gym.envs.openspiel.core import is_perfect_information, is_zero_sum, load_game, sample_chance
from llm_gym.envs.openspiel.moves import ActionNamer, MoveLog, SeatObservations
from llm_gym.envs.openspiel.opponents import (
    MCTSConfig,
    Opponent,
    OpponentSpec,
    affinetes_opponents,
    describe_opponents,
    make_opponent,
)
from llm_gym.envs.openspiel.scoring import is_success, normalised_score
from llm_gym.envs.openspiel.snapshots import Snapshots
from llm_gym.envs.protocol import InvalidActionPolicy
from llm_gym.envs.spaces import text_space
from llm_gym.errors import ConfigError, EnvInputError, UnknownNameError

MAX_OBSERVATION_CHARS = 65_536
"""Upper bound of an observation's length; the legal-action list is shortened in the rare case it would exceed it."""
_MAX_REDEALS = 100
_ILLEGAL_IDS_HINT = " (ids in that range that are illegal now are played as invalid moves, with the penalty)"
_CHANCE, _SIMULTANEOUS, _TERMINAL = -1, -2, -4  # pyspiel.PlayerId values, as plain ints for a fast comparison


@functools.lru_cache(maxsize=64)
def _max_actions(games: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]) -> int:
    return max(load_game(name, dict(params)).num_distinct_actions() for name, params in games)


class OpenSpielEnv(SeatObservations, Snapshots, gym.Env):
    """An OpenSpiel game with text observations for the learner's seat.

    Args:
        game: OpenSpiel short name (``OpenSpiel-<game>-v0``); None = any game, chosen by ``options["task_id"]``
            (``OpenSpiel-v0``).
        config: default config variant of the game (index into its catalog variants).
        params: OpenSpiel parameters that override the variant's (e.g. ``{"board_size": 9}``).
        opponent: ``"random"``, ``"mcts"``, a Policy, a function ``(observation, info) -> action``, or a list with
            one of those per other seat (in seat order); None = ``random`` (``mcts`` with the affinetes profile).
            ``options["opponent"]`` picks another for one episode.
        mcts: :class:`MCTSConfig` (or a dict of its fields) for ``mcts`` opponents (``options["mcts"]``: one episode).
        seat: the learner's seat; None = drawn from the seed each reset (``options["seat"]`` overrides both).
        profile: ``default``, or ``affinetes``: task ids wrap around the 22 affinetes games, the opponent is
            affinetes' (MCTS with its per-game budget, searching the real state; random where it plays random) and
            the seat of a seeded reset is ``(seed % 2) % players``, as in affinetes (docs/guides/openspiel.md).
        max_turns: learner decisions before the episode is truncated; None = the game's catalog cap.
        invalid_action: penalty for an illegal action id; the env then plays a random legal action instead (board
            games have no no-op, so ``fallback="noop"`` also means a random legal action).
        max_invalid_actions: allow this many illegal actions in an episode; the next one forfeits the game
            (terminated, worst return, score 0). None = never forfeit.
        render_mode: ``ansi`` (the learner's observation text).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(
        self,
        game: str | None = None,
        *,
        config: int = 0,
        params: Mapping[str, Any] | None = None,
        opponent: OpponentSpec | Sequence[OpponentSpec] | None = None,
        mcts: MCTSConfig | Mapping[str, Any] | None = None,
        seat: int | None = None,
        max_turns: int | None = None,
        invalid_action: InvalidActionPolicy | Mapping[str, Any] | None = None,
        max_invalid_actions: int | None = None,
        render_mode: str | None = None,
        profile: str = "default",
    ) -> None:
        if profile not in PROFILES:
            raise UnknownNameError("OpenSpiel profile", str(profile), PROFILES)
        self.profile = profile
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be 'ansi' or None, got {render_mode!r}")
        self.render_mode = render_mode
        self.fixed_game = game_spec(game) if game is not None else None
        self.overrides = dict(params or {})
        self.default_opponent = opponent if opponent is not None else "mcts" if profile == "affinetes" else "random"
        self.opponent = self.default_opponent
        self.default_mcts = self.mcts_option = mcts
        self.mcts = MCTSConfig.coerce(mcts)
        self.seat_option = seat
        self.max_turns_option = max_turns
        if isinstance(invalid_action, Mapping):
            try:
                invalid_action = InvalidActionPolicy(**invalid_action)
            except TypeError as exc:
                raise ConfigError(f"invalid_action takes fallback and penalty, got {dict(invalid_action)}") from exc
        self.invalid_action = invalid_action or InvalidActionPolicy()
        self.max_invalid_actions = max_invalid_actions
        specs = [self.fixed_game] if self.fixed_game else list(GAMES)
        variants = tuple((s.name, tuple(sorted({**v, **self.overrides}.items()))) for s in specs for v in s.variants)
        self.action_space = gym.spaces.Discrete(_max_actions(variants))
        self._num_actions = int(self.action_space.n)
        self.observation_space = text_space(MAX_OBSERVATION_CHARS)
        self.noop_action = None  # board games have no no-op; the shared parser falls back to a random legal action
        base = self.fixed_game.task_index * TASK_STRIDE if self.fixed_game else 0
        self.task_id = base + int(config)
        self._load(self._decode(self.task_id))
        self.state: Any = None
        self._chance_rng: random.Random | None = None

    # -- setting up a game ---------------------------------------------------------------------------------------

    def _decode(self, task_id: int) -> Task:
        task = decode_task_id(task_id, self.profile)  # type: ignore[arg-type]
        if self.fixed_game is not None and task.game is not self.fixed_game:
            first = self.fixed_game.task_index * TASK_STRIDE
            raise EnvInputError(
                f"{self.fixed_game.env_id} plays {self.fixed_game.name} (task ids {first}..{first + TASK_STRIDE - 1}); "
                f"task id {task_id} is {task.game.name}: use OpenSpiel-v0 for any game"
            )
        return task

    def _load(self, task: Task) -> None:
        self.task = task
        self.game_spec: GameSpec = task.game
        self.params = {**task.params, **self.overrides}
        self.game = load_game(self.game_spec.name, self.params)
        self.num_players = self.game.num_players()
        self.max_turns = self.max_turns_option or self.game_spec.max_turns
        self._perfect = is_perfect_information(self.game)
        self._zero_sum = is_zero_sum(self.game)
        self._utility = (self.game.min_utility(), self.game.max_utility())
        self._game_string = str(self.game)
        self._namer = ActionNamer(self.num_players, self.game_spec.static_action_names)
        specs = self.opponent if isinstance(self.opponent, (list, tuple)) else [self.opponent] * (self.num_players - 1)
        if len(specs) != self.num_players - 1:
            raise ConfigError(
                f"{self.game_spec.name} has {self.num_players - 1} opponent seats, got {len(specs)} opponents"
            )
        self._opponent_specs, self._mcts = list(specs), self.mcts
        if self.profile == "affinetes":
            simultaneous = self.game.get_type().dynamics.name == "SIMULTANEOUS"
            self._opponent_specs, self._mcts = affinetes_opponents(
                self.game_spec.name, simultaneous, self._opponent_specs, self.mcts_option
            )
        self.instructions: str = text.instructions(
            self.game_spec, self.params, self.num_players, describe_opponents(self._opponent_specs)
        )

    # -- the gymnasium API -----------------------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        options = reset_options(self, seed, options)
        highest = None if self.profile == "affinetes" else len(GAMES) * TASK_STRIDE - 1  # affinetes ids wrap around
        task_id = int_option(self, options, "task_id", 0, highest, " (game index * 10**8 + config)")
        task_id = self.task_id if task_id is None else task_id
        opponent = options.get("opponent", self.default_opponent)
        mcts = options.get("mcts", self.default_mcts)
        reload = task_id != self.task.task_id or opponent != self.opponent or mcts != self.mcts_option
        task = self._decode(task_id) if reload else None
        mcts_config = MCTSConfig.coerce(mcts) if reload else self.mcts
        seat = int_option(self, options, "seat", 0, None)
        super().reset(seed=seed)
        self.state = None  # from here on a failure leaves "reset needed", never a half-loaded game
        if task is not None:  # a new game, variant or opponent (an unchanged task keeps its action-name cache)
            self.opponent, self.mcts_option, self.mcts = opponent, mcts, mcts_config
            self._load(task)
        self.task_id = task_id
        if seed is not None or self._chance_rng is None:
            # Chance has its own stream, so whoever sits in the other seats never changes the deal or the dice; the
            # random seats and the illegal-action fallback share a second one. Both are seeded here and then run on
            # across resets (like ``np_random``): seeding a generator costs more than a tic-tac-toe move.
            base = int(self.np_random.integers(2**62)) << 8
            self._chance_rng = random.Random(base)
            self._fallback_rng = random.Random(base | 1)
        # Draw the seat even when it is given, so the chance outcomes do not depend on the option.
        drawn = self._chance_rng.randrange(self.num_players)
        seat = self.seat_option if seat is None else seat
        if seat is None and seed is not None and self.profile == "affinetes":
            seat = affinetes_seat(seed, self.num_players)
        if seat is not None and not 0 <= seat < self.num_players:
            raise EnvInputError(f"{self.game_spec.name} has seats 0..{self.num_players - 1}, got seat {seat}")
        self.seat = drawn if seat is None else seat
        others = [p for p in range(self.num_players) if p != self.seat]
        self._opponents: dict[int, Opponent] = {
            p: make_opponent(
                spec,
                self.game,
                self.game_spec,
                self._mcts,
                self._fallback_rng.getrandbits(62) if isinstance(spec, str) and spec == "mcts" else 0,
                self._observe_seat,
                self._fallback_rng,
            )
            for p, spec in zip(others, self._opponent_specs, strict=True)
        }
        self._policy_opponents = [o for o in self._opponents.values() if hasattr(o, "invalid_actions")]
        for _ in range(_MAX_REDEALS):  # a game may end before the learner's first decision (rare): deal again
            self._start()
            if not self.state.is_terminal():
                break
        else:
            raise ConfigError(f"{self.game_spec.name} with {self.params} ends before seat {self.seat} ever moves")
        return self._observe(0.0, False)

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.state is None or self._done:
            raise gym.error.ResetNeeded("the game is over (or never started): call reset() first")
        chosen = action_id(self, action, self._num_actions, _ILLEGAL_IDS_HINT)
        penalty = 0.0
        invalid = chosen not in self._legal
        if invalid:
            self._invalid += 1
            penalty = self.invalid_action.penalty
            chosen = self._legal[self._fallback_rng.randrange(len(self._legal))]
            if self.max_invalid_actions is not None and self._invalid > self.max_invalid_actions:
                self._forfeit = True
        if not self._forfeit:
            self._play_learner(chosen)
            self._decisions[self.seat] += 1
            self._advance()
        obs, info = self._observe(penalty, invalid)
        reward = info["game_return"] - self._previous_return - penalty
        self._previous_return = info["game_return"]
        terminated = self._done
        truncated = not terminated and self._decisions[self.seat] >= self.max_turns
        self._done = terminated or truncated
        return obs, reward, terminated, truncated, info

    def render(self) -> str | None:
        return self._last_text if self.render_mode == "ansi" else None

    # -- playing -------------------------------------------------------------------------------------------------

    def _start(self) -> None:
        self.state = self.game.new_initial_state()
        self._invalid, self._previous_return = 0, 0.0
        self._decisions = [0] * self.num_players  # per seat: what a seat is told must not count the others' turns
        self._forfeit = self._done = False
        self._log = MoveLog(self.game_spec, self.num_players, self._perfect, self._namer)
        self._scored: tuple[tuple[float, ...] | None, float] = (None, 0.5)
        self._advance()

    def _play_learner(self, action: int) -> None:
        state = self.state
        if state.is_simultaneous_node():
            joint = [action if p == self.seat else self._opponent_move(p) for p in range(self.num_players)]
            self._log_joint(joint)
            state.apply_actions(joint)
        else:
            self._log.record(state, self.seat, action)
            state.apply_action(action)

    def _advance(self) -> None:
        """Play chance and opponents until the learner must decide or the game is over."""
        state, seat = self.state, self.seat
        while True:
            # One call tells the node kind: a seat >= 0, or OpenSpiel's chance (-1), simultaneous (-2), terminal (-4).
            player = state.current_player()
            if player in (seat, _TERMINAL):
                return
            if player == _CHANCE:
                action = sample_chance(state, self._chance_rng)
                self._log.record(state, -1, action)
                state.apply_action(action)
            elif player == _SIMULTANEOUS:
                if state.legal_actions(seat):
                    return
                joint = [self._opponent_move(p) if p != seat else 0 for p in range(self.num_players)]
                self._log_joint(joint)
                state.apply_actions(joint)
            else:
                action = self._opponent_move(player)
                self._log.record(state, player, action)
                state.apply_action(action)

    def _opponent_move(self, player: int) -> int:
        action = self._opponents[player].act(self.state, player)
        self._decisions[player] += 1
        return action

    def _log_joint(self, joint: list[int]) -> None:
        self._log.record_joint(self.state, joint)

    # -- what the learner (or an opponent policy) sees ---------------------------------------------------------------

    def _view(self, player: int, legal: list[int], outcome: str | None) -> tuple[str, list[str]]:
        names, lines = self._namer.lines(self.state, player, legal)
        body = self.seat_observation(player, lines, outcome)
        if len(body) > MAX_OBSERVATION_CHARS:
            body = body[: MAX_OBSERVATION_CHARS - 40] + "\n... (list cut; see info['legal_actions'])"
        return body, names

    def _observe(self, penalty: float, invalid: bool) -> tuple[str, dict[str, Any]]:
        state = self.state
        self._done = state.is_terminal() or self._forfeit
        legal: list[int] = [] if self._done else state.legal_actions(self.seat)
        returns = tuple(state.returns())
        game_return = self._utility[0] if self._forfeit else returns[self.seat]
        if returns != self._scored[0]:  # most games pay only at the end: score once per distinct returns
            self._scored = (returns, normalised_score(returns, self.seat, *self._utility, self._zero_sum))
        score = 0.0 if self._forfeit else self._scored[1]
        outcome = text.outcome_text(returns, self.seat, score, self._forfeit) if self._done else None
        observation, names = self._view(self.seat, legal, outcome)
        self._legal = legal
        self._last_text = observation
        info = {
            "legal_actions": legal,
            "action_names": names,
            "action_mask": self._mask(legal),
            "game": self.game_spec.name,
            "task_id": self.task.task_id,
            "variant": self.task.variant,
            # Each game, variant and opponent has its own rules text; a curriculum changes them between episodes.
            "instructions": self.instructions,
            "player": self.seat,
            "num_players": self.num_players,
            "turn": self._decisions[self.seat],
            "returns": returns,
            "game_return": game_return,
            "score": score,
            "success": is_success(score),
            "forfeit": self._forfeit,
            "invalid_action": invalid,
            "invalid_action_penalty": penalty,
            "invalid_actions": self._invalid,
            "opponent_invalid_actions": sum(o.invalid_actions for o in self._policy_opponents)
            if self._policy_opponents
            else 0,
            # For search agents that determinize (they must not peek): the whole history, hidden moves included.
            "game_string": self._game_string,
            "history": tuple(state.history()),
        }
        return observation, info

    def _mask(self, legal: list[int]) -> np.ndarray:
        """A fresh int8 mask (a bytearray filled in a loop: faster than numpy fancy indexing for short lists)."""
        mask = bytearray(self._num_actions)
        for action in legal:
            mask[action] = 1
        return np.frombuffer(mask, dtype=np.int8)

    def _observe_seat(self, state: Any, player: int) -> tuple[str, dict[str, Any]]:
        """What a policy opponent in ``player``'s seat sees (same format as the learner's observation)."""
        legal = state.legal_actions(player)
        observation, names = self._view(player, legal, None)
        info = {
            "legal_actions": legal,
            "action_names": names,
            "action_mask": self._mask(legal),
            "player": player,
            "game": self.game_spec.name,
            "game_string": self._game_string,
            "history": tuple(state.history()),
        }
        return observation, info

    def observe_at(self, state: Any, seat: int, log: MoveLog, decisions: Sequence[int]) -> tuple[str, dict[str, Any]]:
        """The observation and info the learner gets in ``seat`` at ``state``, after the moves in ``log`` and with
        ``decisions`` made per seat: what exact evaluation (:mod:`llm_gym.envs.openspiel.tree`) shows a policy at each
        node of the game tree it walks itself. Leaves this env at that node (exact evaluation uses one of its own)."""
        if self.state is None:
            raise gym.error.ResetNeeded("call reset() once before observe_at() (it sets up the opponents)")
        self.state, self.seat, self._log, self._decisions = state, seat, log, list(decisions)
        self._invalid, self._forfeit = 0, False
        return self._observe(0.0, False)
