"""Demonstrations over a whole game tree: the demonstrator's decision at every position it can face.

Episodes against a random opponent cover the common positions many times and the rare ones never (2,500 solver
games of tic-tac-toe hold 9,040 decisions but 521 distinct prompts), yet a learner that is to lose no game must
know the move in every position its own play can lead to. :func:`record_demo_tree` plays the demonstrator in every
seat against **every legal reply** of the opponents instead of sampled ones: each opponent turn branches into one
path per legal move, so the file holds each distinct decision of the demonstrator's policy exactly once.

How: the env is replayed from its reset along a path of opponent moves (a callable opponent reads them from the
path, so the text is the env's own, history lines included); where the path ends, the opponent's legal moves are
the children. A decision is kept once per distinct chat (system, user, answer). Its ``return_to_go`` is the
expected return of the demonstrator from there against a uniformly random opponent (the paths through it weighted
by the probability a random opponent plays them), so the value head that ``sft`` warms up learns that value.

The policy is asked once per distinct position (observation and legal moves): a path replayed from the reset
reuses the moves already decided on the way, so a walk costs one decision per position, not one per game and step,
and a stochastic policy is walked as the one deterministic policy its first answers make. Because every reply is
walked, the lowest return of a complete game in a seat is this policy's return there against the best possible
opponent (``summary.worst_return_by_seat``): for a greedy checkpoint, whether *any* opponent can beat it.

With ``all_best`` the demonstrator's turns branch too, over every move it values as highly as its own: a learner
taught that any best move is right (sft's ``choice_target=best``) may play another one and reach positions the
demonstrator's own line never meets (in tic-tac-toe, a corner reply where the solver takes the centre). Those
positions are then in the file as well, each with the demonstrator's own answer.

Only small deterministic games fit: no chance nodes, one move at a time, and at most ``max_paths`` complete games.
The system message is that of the env as the caller configured it (e.g. ``opponent=random`` or ``mcts``), which is
what the learner will be told when it plays that env; the walk itself replaces the opponent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_gym.agent import EnvConfig, Policy, best_value_indices, policy_action_values
from llm_gym.demos.format import DemoRecord, write_records
from llm_gym.demos.record import DemoSummary, _task_id
from llm_gym.envs.catalog import make as make_env
from llm_gym.errors import ConfigError, UnsupportedEnvError
from llm_gym.lm.prompts import chat_messages

DEFAULT_MAX_PATHS = 200_000
"""Complete games a walk may replay (tic-tac-toe has about 2,000 per seat against a deterministic demonstrator)."""


class _PathEnds(Exception):
    """Raised where a path has no move left: the moves there are the children. ``split``: an opponent's turn, where
    a uniformly random opponent would pick each child with an equal share of the path's probability; a branch over
    the demonstrator's own equally good moves (``all_best``) keeps the whole probability on each."""

    def __init__(self, moves: list[int], *, split: bool = True) -> None:
        super().__init__("path ends")
        self.moves = moves
        self.split = split


class _Path:
    """The moves of one path, taken in the order of play at each branch point (the opponents' turns, and with
    ``all_best`` the demonstrator's turns with more than one best move). Called, it is the opponent the env
    plays (``(observation, info) -> action``)."""

    def __init__(self) -> None:
        self.moves: tuple[int, ...] = ()
        self.position = 0

    def start(self, moves: tuple[int, ...]) -> None:
        self.moves, self.position = moves, 0

    def take(self, children: list[int], *, split: bool = True) -> int:
        if self.position == len(self.moves):
            raise _PathEnds(children, split=split)
        move = self.moves[self.position]
        self.position += 1
        return move

    def __call__(self, observation: str, info: Mapping[str, Any]) -> int:
        return self.take([int(a) for a in info["legal_actions"]])


@dataclass
class _Node:
    """One distinct decision: the record's fields and the random-opponent weighted sum of its paths' returns."""

    messages: tuple[Mapping[str, str], ...]
    action: int
    seed: int
    path_index: int
    step: int
    task_id: int | None
    choices: tuple[str, ...] = ()
    choice_values: tuple[float, ...] = ()
    reward: float = 0.0
    weight: float = 0.0
    weighted_return: float = 0.0
    weighted_score: float = 0.0


def record_demo_tree(
    policy: Policy,
    env: EnvConfig,
    out: str | Path,
    *,
    source: Mapping[str, Any],
    seed: int = 0,
    seats: tuple[int, ...] | None = None,
    all_best: bool = False,
    max_paths: int = DEFAULT_MAX_PATHS,
    on_path: Callable[[int], None] | None = None,
) -> DemoSummary:
    """Walk every opponent reply of ``env``'s game in every seat (or ``seats``) with ``policy`` deciding, and append
    one :class:`DemoRecord` per distinct decision to ``out``. ``summary.episodes`` counts the complete paths.

    ``all_best``: at the policy's turns, also walk every other move its ``action_values`` rate as highly as the
    best (ties within 1e-9). A learner trained to take *any* best move (sft's ``choice_target=best``) reaches the
    positions after those moves too, which the policy's own play never meets. Each such position is recorded with
    the policy's own answer there. Its return is that of the paths that follow the policy from it, as before."""
    reference = make_env(env.env_id, **env.kwargs)
    try:
        _check_walkable(reference, env.env_id)
        instructions = str(getattr(reference.unwrapped, "instructions", "") or "")
        num_players = int(reference.unwrapped.num_players)
    finally:
        reference.close()
    if all_best and getattr(policy, "action_values", None) is None:
        raise ConfigError(
            "all_best walks the moves an agent values as highly as its own; this agent has no action values "
            "(the solver has): drop --all-best or use --agent solver"
        )
    path_moves = _Path()
    walk_env = make_env(env.env_id, **{**env.kwargs, "opponent": path_moves})
    walk = _Walk(policy, instructions, seed, all_best)
    summary = DemoSummary(Path(out))
    try:
        for seat in seats if seats is not None else tuple(range(num_players)):
            if not 0 <= seat < num_players:
                raise ConfigError(f"seat {seat} does not exist: {env.env_id} has seats 0..{num_players - 1}")
            stack: list[tuple[tuple[int, ...], float]] = [((), 1.0)]
            while stack:
                path, probability = stack.pop()
                games_before = len(summary.returns)
                ends = walk.play_path(walk_env, path_moves, seat, path, probability, summary)
                if ends is None:
                    if len(summary.returns) > games_before:  # a complete game (a path with an illegal move is not)
                        game_return, worst = summary.returns[-1], summary.worst_return_by_seat
                        worst[seat] = min(worst.get(seat, game_return), game_return)
                    summary.episodes += 1
                    if on_path is not None:
                        on_path(summary.episodes)
                    if summary.episodes > max_paths:
                        raise UnsupportedEnvError(
                            f"{env.env_id}'s tree has more than {max_paths} games against every reply; "
                            "it is too big to walk: record episodes instead (drop --all-replies)"
                        )
                    continue
                share = probability / len(ends.moves) if ends.split else probability
                stack.extend(((*path, move), share) for move in reversed(ends.moves))
    finally:
        walk_env.close()
    if all_best:
        source = {**source, "all_best": "also every move the demonstrator values as highly as its own"}
    records = [_record(node, env, source) for node in walk.nodes.values()]
    records.sort(key=lambda r: (r.episode, r.step))
    summary.decisions = write_records(summary.path, records)
    return summary


class _Walk:
    """The policy's decisions met so far: its move in each position (so a replay asks it about new positions
    only), its action values there, and one node per distinct decision."""

    def __init__(self, policy: Policy, instructions: str, seed: int, all_best: bool) -> None:
        self.policy, self.instructions, self.seed, self.all_best = policy, instructions, seed, all_best
        self.nodes: dict[tuple[tuple[str, str], ...], _Node] = {}
        self.decided: dict[tuple[str, tuple[int, ...]], tuple[int, tuple[float, ...]]] = {}

    def decide(self, observation: Any, info: Mapping[str, Any], legal: list[int]) -> tuple[int, tuple[float, ...]]:
        position = (str(observation), tuple(legal))
        if position not in self.decided:
            action = int(self.policy.act([observation], [info])[0])
            values = policy_action_values(self.policy, [observation], [info])
            self.decided[position] = (action, values[0] if values else ())
        return self.decided[position]

    def play_path(
        self, env: Any, path_moves: _Path, seat: int, path: tuple[int, ...], probability: float,
        summary: DemoSummary,
    ) -> _PathEnds | None:  # fmt: skip
        """Replay ``path``; return where it ends (the children to walk), or None after a complete game, whose
        return is then credited, weighted by ``probability``, to the decisions after the path's last move other
        than the policy's own (those before it were not followed by the policy's play)."""
        path_moves.start(path)
        visited: list[_Node] = []
        followed_from = 0  # the first visited decision whose own move and every later one are the policy's
        game_return = 0.0  # the steps' rewards; the last step's holds the outcome
        try:
            observation, info = env.reset(seed=self.seed, options={"seat": seat})
            done = False
            while not done:
                legal = [int(a) for a in info["legal_actions"]]
                action, values = self.decide(observation, info, legal)
                if action not in legal:  # the path is dropped: no answer to record, no return to credit
                    summary.unnamed += 1
                    return None
                node = self._node(observation, info, legal, action, values, summary.episodes, len(visited))
                visited.append(node)
                move = action
                best = _best_moves(legal, values, action) if self.all_best else [action]
                if len(best) > 1:
                    move = path_moves.take(best, split=False)
                    if move != action:
                        followed_from = len(visited)
                observation, reward, terminated, truncated, info = env.step(move)
                game_return += float(reward)
                if move == action:  # the record's reward is that of its own answer
                    node.reward = float(reward)
                done = terminated or truncated
        except _PathEnds as ends:
            return ends
        score = float(info.get("score", game_return))
        for node in visited[followed_from:]:
            node.weight += probability
            node.weighted_return += probability * game_return
            node.weighted_score += probability * score
        summary.returns.append(game_return)
        summary.scores.append(score)
        summary.lengths.append(len(visited))
        return None

    def _node(
        self, observation: Any, info: Mapping[str, Any], legal: list[int], action: int, values: tuple[float, ...],
        path_index: int, step: int,
    ) -> _Node:  # fmt: skip
        answer = str(info["action_names"][legal.index(action)])
        messages = (*chat_messages(self.instructions, observation), {"role": "assistant", "content": answer})
        key = tuple((m["role"], m["content"]) for m in messages)
        node = self.nodes.get(key)
        if node is None:
            names = tuple(str(n) for n in info["action_names"])
            node = self.nodes[key] = _Node(messages, action, self.seed, path_index, step, _task_id(info), names, values)
        return node


def _best_moves(legal: list[int], values: tuple[float, ...], action: int) -> list[int]:
    """The legal moves valued as highly as the best (:func:`~llm_gym.agent.best_value_indices`), the policy's own
    first; just its own where it has no values."""
    return [action, *(legal[i] for i in best_value_indices(values) if legal[i] != action)]


def _record(node: _Node, env: EnvConfig, source: Mapping[str, Any]) -> DemoRecord:
    weight = node.weight or 1.0
    expected = node.weighted_return / weight
    return DemoRecord(
        messages=node.messages,
        env_id=env.env_id,
        env_args=dict(env.kwargs),
        seed=node.seed,
        episode=node.path_index,
        step=node.step,
        task_id=node.task_id,
        action=node.action,
        choices=node.choices,
        choice_values=node.choice_values,
        reward=node.reward,
        return_to_go=expected,
        episode_return=expected,
        episode_score=node.weighted_score / weight,
        source={**source, "walk": "every opponent reply (return: expected against a uniformly random opponent)"},
    )


def _check_walkable(env: Any, env_id: str) -> None:
    game = getattr(env.unwrapped, "game", None)
    if game is None or not hasattr(game, "get_type"):
        raise UnsupportedEnvError(f"--all-replies walks OpenSpiel game trees; {env_id} is not an OpenSpiel env")
    kind = game.get_type()
    if kind.chance_mode.name != "DETERMINISTIC" or kind.dynamics.name != "SEQUENTIAL":
        raise UnsupportedEnvError(
            f"--all-replies needs a deterministic turn-based game; {env_id} has chance or simultaneous moves: "
            "record episodes instead"
        )
