"""Did the model learn the demonstrator's policy, or only its most frequent answer? Agreement per position.

Games won say how well a policy plays; they do not say *what* it learnt. In Kuhn poker a model that always bets
wins almost as often against a random opponent as the exact best response does, while it has learnt one answer
instead of a card-dependent strategy. So the demo also lets the demonstrator play the held-out games, keeps each
distinct position it decides in (the observation text: in a card game, the learner's information state) with how
often it came up and the demonstrator's answer, and asks the model, before and after training, for its greedy
answer in each. Agreement is the share of the demonstrator's held-out decisions the model answers the same way.

The positions are first those the *demonstrator* reaches. A state it never meets (a first-seat jack facing a bet
after its own pass, in Kuhn poker) is in no demonstration, so the model's answer there is generalisation, not
imitation: :func:`unreached_positions` lets another policy (the uniformly random player) play games and keeps the
observations it meets that the demonstrator never did, with the demonstrator's answer and values there, so they are
scored apart. The demonstrator must answer from its observation alone (one action per position); one that does
not is refused, since "its answer" would then be undefined.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llm_gym.actions import legal_action_name
from llm_gym.agent import EnvConfig, Policy, best_value_indices, policy_action_values
from llm_gym.training.evaluation import run_episodes
from llm_gym.training.loop import evaluation_env


@dataclass
class Position:
    """One distinct observation the demonstrator decided in, during the held-out games."""

    observation: Any
    info: Mapping[str, Any]
    action: int
    """The demonstrator's answer (the same every time: checked)."""
    values: tuple[float, ...] = ()
    """The demonstrator's value of each legal action (its ``action_values``), where it has them; else empty."""
    visits: int = 0
    """Times the demonstrator decided here in the held-out games (0 for a position only other play reaches)."""

    def is_best(self, action: int) -> bool:
        """``action`` is worth as much as the best legal action by the demonstrator's values (a tie counts); with
        no values, only the demonstrator's own answer is."""
        if not self.values:
            return action == self.action
        legal = [int(a) for a in self.info.get("legal_actions", ())]
        return action in legal and legal.index(action) in best_value_indices(self.values)

    def name(self, action: int) -> str:
        """The env's name of ``action`` here (its id where the info lists no names)."""
        return legal_action_name(action, self.info) or str(action)


@dataclass
class Positions:
    """Every distinct position of the demonstrator's held-out games, in the order first met."""

    by_key: dict[str, Position] = field(default_factory=dict)

    @property
    def decisions(self) -> int:
        return sum(p.visits for p in self.by_key.values())

    def __len__(self) -> int:
        return len(self.by_key)

    def __iter__(self):
        return iter(self.by_key.values())


class _Recorder:
    """Plays the demonstrator and keeps each distinct observation it decides in."""

    def __init__(self, demonstrator: Policy, positions: Positions) -> None:
        self.demonstrator, self.positions = demonstrator, positions

    def act(self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]) -> list[int]:
        asked = _ask(self.demonstrator, observations, infos)
        for new in asked:
            position = self.positions.by_key.setdefault(str(new.observation), new)
            if position.action != new.action:
                raise ValueError(
                    "the demonstrator answered one observation in two ways "
                    f"({position.name(position.action)}, then {position.name(new.action)}): agreement per position needs "
                    "a demonstrator that acts on its observation alone"
                )
            position.visits += 1
        return [p.action for p in asked]


def _ask(demonstrator: Policy, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]) -> list[Position]:
    """The demonstrator's answer and action values (where it has them) in each observation, as unvisited positions."""
    actions = [int(a) for a in demonstrator.act(observations, infos)]
    values = policy_action_values(demonstrator, observations, infos) or [()] * len(actions)
    return [
        Position(observation, dict(info), action, tuple(row))
        for observation, info, action, row in zip(observations, infos, actions, values, strict=True)
    ]


def demonstrator_positions(demonstrator: Policy, env: EnvConfig, episodes: int, seed: int) -> Positions:
    """The demonstrator plays ``episodes`` games (episode ``i`` resets with ``seed + i``, as the evaluation's do);
    returns the positions it decided in."""
    positions = Positions()
    run_episodes(
        _Recorder(demonstrator, positions), evaluation_env(env), episodes, seed=seed, num_envs=min(episodes, 8)
    )
    return positions


class _Explorer:
    """Plays another policy and keeps each distinct observation it meets that is not among ``reached``."""

    def __init__(self, explorer: Policy, reached: Positions) -> None:
        self.explorer, self.reached = explorer, reached
        self.found: dict[str, tuple[Any, dict[str, Any]]] = {}

    def act(self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]) -> list[int]:
        for observation, info in zip(observations, infos, strict=True):
            key = str(observation)
            if key not in self.reached.by_key:
                self.found.setdefault(key, (observation, dict(info)))
        return [int(a) for a in self.explorer.act(observations, infos)]


def unreached_positions(
    demonstrator: Policy, explorer: Policy, env: EnvConfig, episodes: int, seed: int, reached: Positions
) -> Positions:
    """The positions ``explorer`` meets in ``episodes`` games (seeds ``seed + i``) that are not in ``reached``, each
    with the demonstrator's answer and values there (it is asked, not played; ``visits`` stays 0)."""
    recorder = _Explorer(explorer, reached)
    run_episodes(recorder, evaluation_env(env), episodes, seed=seed, num_envs=min(episodes, 8))
    found = list(recorder.found.values())
    asked = _ask(demonstrator, [o for o, _ in found], [i for _, i in found]) if found else []
    return Positions({str(p.observation): p for p in asked})


@dataclass
class Agreement:
    """A policy's greedy answers in the demonstrator's positions."""

    label: str
    answers: list[int]
    """Parallel to the positions."""
    positions: Positions

    @property
    def agreed_positions(self) -> int:
        return sum(a == p.action for a, p in zip(self.answers, self.positions, strict=True))

    @property
    def agreed_decisions(self) -> int:
        """The demonstrator's held-out decisions (each position weighted by its visits) answered the same way."""
        return sum(p.visits for a, p in zip(self.answers, self.positions, strict=True) if a == p.action)

    @property
    def best_decisions(self) -> int:
        """The held-out decisions answered with an action as good as the demonstrator's (by its values: a tie with
        its answer counts; without values, the same as ``agreed_decisions``)."""
        return sum(p.visits for a, p in zip(self.answers, self.positions, strict=True) if p.is_best(a))

    @property
    def best_positions(self) -> int:
        """Positions answered with an action as good as the demonstrator's (unweighted: for positions it never
        visits, where decisions cannot be counted)."""
        return sum(p.is_best(a) for a, p in zip(self.answers, self.positions, strict=True))

    def as_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "agreed_positions": self.agreed_positions,
            "best_positions": self.best_positions,
            "positions": len(self.positions),
            "agreed_decisions": self.agreed_decisions,
            "best_decisions": self.best_decisions,
            "decisions": self.positions.decisions,
            "answers": [p.name(a) for a, p in zip(self.answers, self.positions, strict=True)],
        }


def agreement(policy: Policy, label: str, positions: Positions) -> Agreement:
    """``policy``'s answer in every position, asked all at once (a greedy policy answers each the same way in
    whichever game it comes up, so one question per position is the answer in all its visits)."""
    items = list(positions)
    answers = [int(a) for a in policy.act([p.observation for p in items], [p.info for p in items])] if items else []
    return Agreement(label, answers, positions)


def positions_as_dicts(positions: Positions) -> list[dict[str, Any]]:
    """The positions for the JSON result: observation text, the demonstrator's answer by name, its action values
    (legal-action order), visits."""
    return [
        {
            "observation": str(p.observation),
            "demonstrator": p.name(p.action),
            "values": list(p.values),
            "visits": p.visits,
        }
        for p in positions
    ]
