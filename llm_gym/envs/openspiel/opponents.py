"""Who plays the seats the learner does not hold: ``random``, ``mcts`` (OpenSpiel's own MCTSBot with random rollouts)
or any policy (an llm-gym :class:`~llm_gym.agent.Policy`, or a plain function ``(observation, info) -> action``).

Every opponent draws from its own seeded generator (``random.Random``: cheap to create and to draw from, which
matters at tens of thousands of steps a second), so a task id and a seed fix its play. ``snapshot()`` /
``restore()`` capture that generator, which is what :meth:`OpenSpielEnv.clone_state` needs to replay from a point.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from llm_gym.config import apply_overrides
from llm_gym.envs.openspiel.affinetes import GAMES as AFFINETES
from llm_gym.envs.openspiel.affinetes import UCT_C
from llm_gym.envs.openspiel.catalog import GameSpec
from llm_gym.envs.openspiel.core import pyspiel_module
from llm_gym.envs.openspiel.determinize import Determinizer
from llm_gym.errors import ConfigError, UnsupportedEnvError

Observe = Callable[[Any, int], tuple[str, dict[str, Any]]]
"""``(state, player) -> (observation text, info)`` for that seat: what a policy opponent is shown."""


@dataclass(frozen=True)
class MCTSConfig:
    """Budget of the MCTS opponent (and of the ``mcts`` agent)."""

    simulations: int | None = None
    """Simulations per move; None = the game's default from the catalog (sized for well under a second a move)."""
    rollouts: int = 1
    """Random rollouts per leaf evaluation."""
    uct_c: float = 2.0
    """UCT exploration constant."""
    rollout_length: int | None = None
    """Cut each rollout after this many moves; None = the game's default, 0 = play rollouts to the end."""
    determinizations: int = 4
    """Sampled states searched per move where information is hidden (the simulations are split between them)."""
    omniscient: bool = False
    """Search the real state, hidden cards and dice included, instead of states sampled from the bot's own
    information (what affinetes' MCTS opponent does; ``profile="affinetes"`` sets it)."""
    solve: bool | None = None
    """Back up solved (proven won/lost) nodes; None = only in deterministic perfect-information games."""

    def __post_init__(self) -> None:
        if self.simulations is not None and self.simulations < 1:
            raise ConfigError(f"mcts simulations must be >= 1, got {self.simulations}")
        if self.rollouts < 1 or self.determinizations < 1:
            raise ConfigError("mcts rollouts and determinizations must be >= 1")

    def for_game(self, spec: GameSpec) -> MCTSConfig:
        """This config with the game's defaults filled in."""
        length = spec.mcts_rollout_length if self.rollout_length is None else self.rollout_length
        return replace(self, simulations=self.simulations or spec.mcts_simulations, rollout_length=length or 0)

    @classmethod
    def coerce(cls, value: MCTSConfig | Mapping[str, Any] | None) -> MCTSConfig:
        """Accept a config, a dict of its fields (what ``--env-arg mcts='{...}'`` gives) or None."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, Mapping):
            # Each value converted and checked as a config field is (``"abc"`` for an int: one line naming it).
            return apply_overrides(cls(), {str(k): v for k, v in value.items()}, source="mcts")
        raise ConfigError(f"mcts must be a dict of {sorted(cls.__dataclass_fields__)}, got {value!r}")


class Opponent(Protocol):
    """Chooses the action of one seat."""

    def act(self, state: Any, player: int) -> int: ...

    def snapshot(self) -> Any: ...

    def restore(self, snapshot: Any) -> None: ...


class RandomOpponent:
    """Uniform over the seat's legal actions, drawn from a generator the env may share between its random seats
    (seeding a generator costs more than a whole tic-tac-toe move, so an env seeds one per reset, not one per seat).
    """

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def act(self, state: Any, player: int) -> int:
        legal = state.legal_actions(player)
        return legal[self.rng.randrange(len(legal))]

    def snapshot(self) -> Any:
        return self.rng.getstate()

    def restore(self, snapshot: Any) -> None:
        self.rng.setstate(snapshot)


class MCTSOpponent:
    """OpenSpiel's ``MCTSBot`` + ``RandomRolloutEvaluator``; determinized where information is hidden.

    Simultaneous-move games are searched in OpenSpiel's turn-based conversion of the game: the seats that come
    earlier in the round get random (hidden) actions in each determinization, so the bot never sees this round's
    bids. Imperfect-information games are searched on states sampled by :class:`Determinizer`.
    """

    def __init__(self, game: Any, spec: GameSpec, config: MCTSConfig, seed: int) -> None:
        from open_spiel.python.algorithms import mcts  # open_spiel's Python side: only when an MCTS bot plays

        pyspiel = pyspiel_module()
        game_type = game.get_type()
        if game_type.reward_model != pyspiel.GameType.RewardModel.TERMINAL:
            raise UnsupportedEnvError(
                f"OpenSpiel's MCTS needs games with terminal rewards; {spec.name} pays rewards every move"
            )
        self.config = config.for_game(spec)
        self.simultaneous = game_type.dynamics == pyspiel.GameType.Dynamics.SIMULTANEOUS
        self.search_game = pyspiel.convert_to_turn_based(game) if self.simultaneous else game
        hidden = self.simultaneous or (spec.determinize != "none" and not self.config.omniscient)
        self.determinizations = self.config.determinizations if hidden else 1
        self.rng = random.Random(seed)
        # MCTSBot and the evaluator want a legacy RandomState; they share one, seeded from our generator.
        self.random_state = np.random.RandomState(self.rng.getrandbits(31))
        evaluator = mcts.RandomRolloutEvaluator(
            self.config.rollouts, self.random_state, max_length=self.config.rollout_length or None
        )
        deterministic = game_type.chance_mode == pyspiel.GameType.ChanceMode.DETERMINISTIC
        self.bot = mcts.MCTSBot(
            self.search_game,
            self.config.uct_c,
            # MCTSBot expands the root on its second simulation: with one, the root has no children to choose from.
            max(2, self.config.simulations // self.determinizations),
            evaluator,
            solve=deterministic and not hidden if self.config.solve is None else self.config.solve,
            random_state=self.random_state,
        )
        self.determinizer = Determinizer(game, "none" if self.config.omniscient else spec.determinize, self.rng)

    def act(self, state: Any, player: int) -> int:
        visits: dict[int, float] = {}
        for _ in range(self.determinizations):
            root = self.bot.mcts_search(self._sample(state, player))
            for child in root.children:
                visits[child.action] = visits.get(child.action, 0.0) + child.explore_count
            if self.determinizations == 1:
                return int(root.best_child().action)
        return int(max(sorted(visits), key=lambda a: visits[a]))

    def _sample(self, state: Any, player: int) -> Any:
        if not self.simultaneous:
            return self.determinizer.sample(state, player)
        turn_based = self.search_game.new_initial_state()
        for action in state.history():
            turn_based.apply_action(action)
        while turn_based.current_player() != player:  # earlier seats of this round: hidden bids
            legal = turn_based.legal_actions()
            turn_based.apply_action(legal[self.rng.randrange(len(legal))])
        return turn_based

    def snapshot(self) -> Any:
        return self.rng.getstate(), self.random_state.get_state(), self.determinizer.method

    def restore(self, snapshot: Any) -> None:
        rng_state, random_state, self.determinizer.method = snapshot
        self.rng.setstate(rng_state)
        self.random_state.set_state(random_state)


class PolicyOpponent:
    """A policy playing a seat from that seat's own text observation (self-play, a frozen snapshot, a scripted bot).

    An illegal answer is replaced by a random legal action and counted in :attr:`invalid_actions`.
    """

    def __init__(self, policy: Any, observe: Observe, rng: random.Random) -> None:
        self.policy = policy
        self.observe = observe
        self.rng = rng
        self.invalid_actions = 0

    def act(self, state: Any, player: int) -> int:
        observation, info = self.observe(state, player)
        if hasattr(self.policy, "act"):
            action = self.policy.act([observation], [info])[0]
        else:
            action = self.policy(observation, info)
        legal = info["legal_actions"]
        try:
            action = int(action)
        except (TypeError, ValueError):
            action = -1
        if action not in legal:
            self.invalid_actions += 1
            action = int(legal[self.rng.randrange(len(legal))])
        return action

    def snapshot(self) -> Any:
        return self.rng.getstate(), self.invalid_actions

    def restore(self, snapshot: Any) -> None:
        rng_state, self.invalid_actions = snapshot
        self.rng.setstate(rng_state)


OpponentSpec = str | Any
"""``"random"``, ``"mcts"``, a Policy (has ``act``) or a callable ``(observation, info) -> action``."""


def make_opponent(
    spec: OpponentSpec,
    game: Any,
    game_spec: GameSpec,
    mcts_config: MCTSConfig,
    seed: int,
    observe: Observe,
    shared_rng: random.Random,
) -> Opponent:
    """Build the opponent named by ``spec`` for one seat (``seed`` for MCTS, ``shared_rng`` for the others)."""
    if isinstance(spec, str):
        if spec == "random":
            return RandomOpponent(shared_rng)
        if spec == "mcts":
            return MCTSOpponent(game, game_spec, mcts_config, seed)
        raise ConfigError(
            f"unknown opponent {spec!r}; use 'random', 'mcts', a Policy or a function (obs, info) -> action"
        )
    if hasattr(spec, "act") or callable(spec):
        return PolicyOpponent(spec, observe, shared_rng)
    raise ConfigError(f"an opponent must be 'random', 'mcts', a Policy or a function, got {spec!r}")


def describe_opponents(specs: list[OpponentSpec]) -> str:
    """``random``, ``mcts`` or ``a policy`` (joined when seats differ), for the instructions text."""
    names = []
    for spec in specs:
        name = spec if isinstance(spec, str) else "a policy"
        name = {"random": "a uniformly random player", "mcts": "an MCTS player"}.get(name, name)
        if name not in names:
            names.append(name)
    return " and ".join(names) or "nobody"


def affinetes_opponents(game_name: str, simultaneous: bool, specs: list[Any], mcts: Any) -> tuple[list[Any], Any]:
    """``profile="affinetes"``: the opponent specs with ``mcts`` made random where affinetes plays random, and the
    MCTS config affinetes uses for this game (``mcts``, a dict of MCTSConfig fields, overrides single settings).
    Games outside the 22 keep ``mcts`` as given."""
    game = AFFINETES.get(game_name)
    if game is None:
        return specs, MCTSConfig.coerce(mcts)
    if game.mcts is None or simultaneous:
        return ["random" if isinstance(s, str) and s == "mcts" else s for s in specs], MCTSConfig.coerce(mcts)
    simulations, rollouts = game.mcts
    settings: dict[str, Any] = {
        "simulations": simulations,
        "rollouts": rollouts,
        "uct_c": UCT_C,
        "rollout_length": 0,
        "determinizations": 1,
        "omniscient": True,
        "solve": True,
    }
    if isinstance(mcts, MCTSConfig):
        return specs, mcts
    return specs, MCTSConfig.coerce({**settings, **dict(mcts or {})})
