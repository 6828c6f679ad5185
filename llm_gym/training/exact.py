"""Exact evaluation of a policy on a small OpenSpiel game: no sampling, every chance outcome and every opponent move
weighted by its probability (:class:`llm_gym.envs.openspiel.tree.GameTree`).

What it computes, for the policy as it plays (greedy, or with its own probabilities):

* the expected return against the uniformly random opponent, and the probabilities of a win, a draw and a loss,
  per seat and averaged over the env's draw of seats;
* for perfect-information games, the worst return against an adversary that knows the policy (it picks, at every
  turn, the reply that ends worst for the policy; chance stays chance);
* for two-player zero-sum games with imperfect information (poker), the exploitability and NashConv of the policy's
  table over information states (open_spiel's ``exploitability``), and the best response's expected return against
  the random opponent, the most any policy can get there.

The policy is asked once per distinct position (observation and rules text), in batches, breadth first: a greedy
policy on tic-tac-toe is asked about 2,000 positions, on Kuhn poker 12.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from llm_gym.agent import EnvConfig, Policy, act_with_details
from llm_gym.envs.openspiel.tree import Chance, Decision, GameTree, Leaf, Node, Opponent, outcome
from llm_gym.errors import ConfigError, UnsupportedEnvError

MAX_NODES = 2_000_000
"""Game-tree nodes an exact evaluation walks at most before it stops with a one-line error (a game too large)."""

Distribution = dict[int, float]


@dataclass
class Outcomes:
    """Expected return and outcome probabilities of a subtree (and its worst return against an adversary)."""

    expected_return: float = 0.0
    win: float = 0.0
    draw: float = 0.0
    loss: float = 0.0
    worst_return: float = 0.0

    def add(self, other: Outcomes, weight: float) -> None:
        self.expected_return += weight * other.expected_return
        self.win += weight * other.win
        self.draw += weight * other.draw
        self.loss += weight * other.loss


@dataclass
class SeatResult:
    """The exact evaluation with the learner in one seat."""

    seat: int
    probability: float
    """How often the env seats the learner here."""
    expected_return: float
    win: float
    draw: float
    loss: float
    worst_return: float | None
    """Perfect-information games: the return against an adversary that knows the policy (None otherwise)."""


@dataclass
class ExactResult:
    """A policy's exact evaluation on one env (:func:`evaluate_exact`)."""

    env_id: str
    greedy: bool
    expected_return: float
    win: float
    draw: float
    loss: float
    seats: list[SeatResult]
    worst_return: float | None = None
    """Perfect-information games: the lowest of the seats' worst returns."""
    best_response_return: float | None = None
    """Imperfect-information two-player zero-sum games: the best response's expected return against the random
    opponent (seats averaged as for the policy): what the policy's expected return compares with."""
    exploitability: float | None = None
    """Imperfect-information two-player zero-sum games: open_spiel's exploitability of the policy's table."""
    nash_conv: float | None = None
    positions: int = 0
    """Distinct positions the policy was asked about."""
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def evaluate_exact(
    policy: Policy,
    env: EnvConfig,
    *,
    greedy: bool = True,
    batch_size: int = 64,
    on_batch: Callable[[int, int], None] | None = None,
) -> ExactResult:
    """The exact evaluation of ``policy`` on ``env`` (an ``OpenSpiel-*`` env against its uniformly random opponent).

    Args:
        policy: a batched policy (``act``); with ``greedy=False`` it must report its probabilities
            (``act_with_details`` with ``probs`` over the legal actions, as the LM policy does).
        env: the env and its arguments (the same rules text and observations the policy is played with).
        greedy: the policy's own action at each position (what ``play`` and the bench measure), or its whole
            distribution (always for a policy marked ``stochastic``, whose actions are draws).
        batch_size: positions per policy call.
        on_batch: called after each policy call with (positions asked so far, positions known to be left).
    """
    started = time.perf_counter()
    tree = GameTree(env.make())
    # A policy whose actions are draws by nature (``stochastic = True``: the random player) has no greedy action.
    greedy = greedy and not getattr(policy, "stochastic", False)
    walker = _Walker(tree, policy, greedy, batch_size, on_batch)
    walker.explore()
    seats = []
    for seat, probability in tree.seats():
        result = walker.value(tree.root(seat))
        seats.append(SeatResult(seat, probability, result.expected_return, result.win, result.draw, result.loss,
                                result.worst_return if tree.perfect_information else None))  # fmt: skip
    total = Outcomes()
    for seat in seats:
        total.add(Outcomes(seat.expected_return, seat.win, seat.draw, seat.loss), seat.probability)
    out = ExactResult(env.env_id, greedy, total.expected_return, total.win, total.draw, total.loss, seats,
                      positions=len(walker.memo))  # fmt: skip
    if tree.perfect_information:
        out.worst_return = min(s.worst_return for s in seats if s.worst_return is not None)
    elif tree.num_players == 2 and tree.zero_sum:
        out.exploitability, out.nash_conv = walker.exploitability()
        out.best_response_return = best_response_return(tree)
    out.seconds = time.perf_counter() - started
    return out


SIZE_PROBES = 64
"""Random paths Knuth's estimator follows to size a game tree before a walk (a fraction of a second, seeded)."""


def check_exact_env(env: EnvConfig) -> None:
    """Refuse, in one line, an env exact evaluation cannot walk (before a model loads or a run starts): a kind of
    game it does not model, or a tree estimated at more than ten times :data:`MAX_NODES` (chess is refused at once
    rather than after minutes of walking; a tree near the limit is still walked, and the walk's own count decides)."""
    made = env.make()
    try:
        tree = GameTree(made)
        size = estimated_tree_size(tree.game, stop_above=10 * MAX_NODES)
        if size > 10 * MAX_NODES:
            raise ConfigError(
                f"{tree.env.game_spec.name} is too large to evaluate exactly (its game tree has about {size:.0e} "
                f"nodes, more than the {MAX_NODES:,} an exact evaluation walks); evaluate it by play "
                "(llm-gym play --episodes N)"
            )
    finally:
        made.close()


def estimated_tree_size(game: Any, probes: int = SIZE_PROBES, stop_above: float = float("inf"), seed: int = 0) -> float:
    """Knuth's (1975) unbiased estimate of the number of nodes of ``game``'s tree: along a uniformly random path, the
    sum over depths of the product of the branching factors so far, averaged over ``probes`` paths. Stops early once
    the running mean exceeds ``stop_above``."""
    rng = random.Random(seed)
    total = 0.0
    for done in range(1, probes + 1):
        state, width, nodes = game.new_initial_state(), 1.0, 1.0
        while not state.is_terminal() and nodes <= stop_above * done:
            moves = [a for a, _ in state.chance_outcomes()] if state.is_chance_node() else state.legal_actions()
            width *= len(moves)
            nodes += width
            state.apply_action(rng.choice(moves))
        total += nodes
        if total / done > stop_above:
            break
    return total / done


def best_response_return(tree: GameTree) -> float:
    """The best response's expected return against the uniformly random opponent, seats weighted as the env draws
    them (open_spiel's ``BestResponsePolicy``)."""
    # open_spiel's Python algorithms: loaded when an exact value is computed, not by the CLI that imports this module
    from llm_gym.envs.openspiel.algorithms import best_response_to_uniform

    root = tree.game.new_initial_state()
    return sum(p * best_response_to_uniform(tree.game, seat).value(root) for seat, p in tree.seats())


class _Walker:
    """Asks the policy about every position it can reach (breadth first, in batches), then computes the values."""

    def __init__(
        self, tree: GameTree, policy: Policy, greedy: bool, batch_size: int, on_batch: Callable[[int, int], None] | None
    ) -> None:
        self.tree, self.policy, self.greedy = tree, policy, greedy
        self.batch_size, self.on_batch = batch_size, on_batch
        self.memo: dict[tuple[str, str], Distribution] = {}
        """Per position (observation, rules text): the policy's distribution over action ids."""
        self.position_of: dict[tuple, tuple[str, str]] = {}
        """Per decision node (seat, history, penalty): its position."""
        self.info_states: dict[str, tuple[int, Distribution]] = {}
        """Per information-state key: (seat, the policy's distribution there)."""
        self.nodes = 0

    def explore(self) -> None:
        frontier: list[Node] = []
        for seat, _ in self.tree.seats():
            self._descend(self.tree.root(seat), frontier)
        while frontier:
            self._ask(frontier)
            following: list[Node] = []
            for node in frontier:
                for action, p in self.memo[self.position_of[_identity(node)]].items():
                    if p > 0:
                        for _, child in self.tree.play(node, action):
                            self._descend(child, following)
            frontier = following

    def _descend(self, node: Node, decisions: list[Node]) -> None:
        """Collect the learner decision nodes below ``node`` (through chance and every opponent move)."""
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise ConfigError(
                f"the game tree of {self.tree.env.game_spec.name} is too large for exact evaluation (over "
                f"{MAX_NODES:,} nodes); evaluate it by play (llm-gym play --episodes N)"
            )
        branch = self.tree.expand(node)
        if isinstance(branch, Decision):
            decisions.append(node)
        elif isinstance(branch, Chance | Opponent):
            for _, child in branch.children:
                self._descend(child, decisions)

    def _ask(self, nodes: Sequence[Node]) -> None:
        """Record every node's position and ask the policy about the positions it has not seen (in batches)."""
        pending: dict[tuple[str, str], tuple[str, Mapping[str, Any]]] = {}
        for node in nodes:
            observation, info = self.tree.observe(node)
            position = (observation, str(info.get("instructions", "")))
            self.position_of[_identity(node)] = position
            if position not in self.memo:
                pending.setdefault(position, (observation, info))
            if not self.tree.perfect_information:
                self._remember_info_state(node, position)
        asked = list(pending.items())
        for lo in range(0, len(asked), self.batch_size):
            batch = asked[lo : lo + self.batch_size]
            observations = [obs for _, (obs, _) in batch]
            infos = [info for _, (_, info) in batch]
            for (position, _), distribution in zip(batch, self._distributions(observations, infos), strict=True):
                self.memo[position] = distribution
            if self.on_batch is not None:
                self.on_batch(len(self.memo), len(asked) - lo - len(batch))
        if not self.tree.perfect_information:
            for node in nodes:
                self._remember_info_state(node, self.position_of[_identity(node)])

    def _distributions(self, observations: list[str], infos: list[Mapping[str, Any]]) -> list[Distribution]:
        if self.greedy:
            return [{int(a): 1.0} for a in self.policy.act(observations, infos)]
        out = []
        for info, detail in zip(infos, act_with_details(self.policy, observations, infos)[1], strict=True):
            probs = detail.get("probs")
            if probs is None:
                raise UnsupportedEnvError("the policy reports no action probabilities: evaluate it greedily")
            out.append({int(a): float(p) for a, p in zip(info["legal_actions"], probs, strict=True)})
        return out

    def _remember_info_state(self, node: Node, position: tuple[str, str]) -> None:
        distribution = self.memo.get(position)
        if distribution is None:
            return
        key = self.tree.information_state(node)
        known = self.info_states.setdefault(key, (node.seat, distribution))
        if known[1] != distribution:
            raise RuntimeError(f"information state {key!r} was shown as two different observations")

    def value(self, node: Node) -> Outcomes:
        """The subtree's outcomes with every position's distribution known (:meth:`explore` first)."""
        branch = self.tree.expand(node)
        if isinstance(branch, Leaf):
            result = outcome(branch.score)
            return Outcomes(branch.learner_return, result == "win", result == "draw", result == "loss",
                            branch.learner_return)  # fmt: skip
        out = Outcomes()
        if isinstance(branch, Chance):
            out.worst_return = 0.0
            for p, child in branch.children:
                sub = self.value(child)
                out.add(sub, p)
                out.worst_return += p * sub.worst_return
            return out
        if isinstance(branch, Opponent):
            share = 1.0 / len(branch.children)
            subs = [self.value(child) for _, child in branch.children]
            for sub in subs:
                out.add(sub, share)
            out.worst_return = min(sub.worst_return for sub in subs)  # the adversary's pick
            return out
        distribution = self.memo[self.position_of[_identity(node)]]
        for action, p in distribution.items():
            for q, child in self.tree.play(node, action):
                if p * q > 0:
                    sub = self.value(child)
                    out.add(sub, p * q)
                    out.worst_return += p * q * sub.worst_return
        return out

    def exploitability(self) -> tuple[float, float]:
        """(exploitability, NashConv) of the policy's table over the information states it reaches (rows it never
        reaches keep open_spiel's uniform default: no opponent can lead it there)."""
        from llm_gym.envs.openspiel.algorithms import exploitability_of  # open_spiel's Python side, as above

        return exploitability_of(
            self.tree.game, {key: distribution for key, (_, distribution) in self.info_states.items()}
        )


def _identity(node: Node) -> tuple:
    return node.seat, tuple(node.state.history()), node.penalty
