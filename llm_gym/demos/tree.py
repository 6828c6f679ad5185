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

Only small deterministic games fit: no chance nodes, one move at a time, and at most ``max_paths`` complete games.
The system message is that of the env as the caller configured it (e.g. ``opponent=random`` or ``mcts``), which is
what the learner will be told when it plays that env; the walk itself replaces the opponent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_gym.agent import EnvConfig, Policy, policy_action_values
from llm_gym.demos.format import DemoRecord, write_records
from llm_gym.demos.record import DemoSummary, _task_id
from llm_gym.envs.catalog import make as make_env
from llm_gym.errors import ConfigError, UnsupportedEnvError
from llm_gym.lm.prompts import chat_messages

DEFAULT_MAX_PATHS = 200_000
"""Complete games a walk may replay (tic-tac-toe has about 2,000 per seat against a deterministic demonstrator)."""


class _PathEnds(Exception):
    """Raised by the replaying opponent where its path has no move left: the legal moves there are the children."""

    def __init__(self, legal: list[int]) -> None:
        super().__init__("path ends")
        self.legal = legal


class _Replies:
    """An opponent (``(observation, info) -> action``) that plays the moves of one path, in order."""

    def __init__(self) -> None:
        self.path: tuple[int, ...] = ()
        self.position = 0

    def start(self, path: tuple[int, ...]) -> None:
        self.path, self.position = path, 0

    def __call__(self, observation: str, info: Mapping[str, Any]) -> int:
        if self.position == len(self.path):
            raise _PathEnds([int(a) for a in info["legal_actions"]])
        move = self.path[self.position]
        self.position += 1
        return move


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
    max_paths: int = DEFAULT_MAX_PATHS,
    on_path: Callable[[int], None] | None = None,
) -> DemoSummary:
    """Walk every opponent reply of ``env``'s game in every seat (or ``seats``) with ``policy`` deciding, and append
    one :class:`DemoRecord` per distinct decision to ``out``. ``summary.episodes`` counts the complete paths."""
    reference = make_env(env.env_id, **env.kwargs)
    try:
        _check_walkable(reference, env.env_id)
        instructions = str(getattr(reference.unwrapped, "instructions", "") or "")
        num_players = int(reference.unwrapped.num_players)
    finally:
        reference.close()
    replies = _Replies()
    walk_env = make_env(env.env_id, **{**env.kwargs, "opponent": replies})
    nodes: dict[tuple[tuple[str, str], ...], _Node] = {}
    decided: dict[tuple[str, tuple[int, ...]], int] = {}
    summary = DemoSummary(Path(out))
    try:
        for seat in seats if seats is not None else tuple(range(num_players)):
            if not 0 <= seat < num_players:
                raise ConfigError(f"seat {seat} does not exist: {env.env_id} has seats 0..{num_players - 1}")
            stack: list[tuple[tuple[int, ...], float]] = [((), 1.0)]
            while stack:
                path, probability = stack.pop()
                games_before = len(summary.returns)
                children = _play_path(walk_env, replies, policy, seat, seed, path, probability, instructions,
                                      nodes, decided, summary)  # fmt: skip
                if children is None:
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
                share = probability / len(children)
                stack.extend(((*path, move), share) for move in reversed(children))
    finally:
        walk_env.close()
    records = [_record(node, env, source) for node in nodes.values()]
    records.sort(key=lambda r: (r.episode, r.step))
    summary.decisions = write_records(summary.path, records)
    return summary


def _play_path(
    env: Any, replies: _Replies, policy: Policy, seat: int, seed: int, path: tuple[int, ...], probability: float,
    instructions: str, nodes: dict[tuple[tuple[str, str], ...], _Node],
    decided: dict[tuple[str, tuple[int, ...]], int], summary: DemoSummary,
) -> list[int] | None:  # fmt: skip
    """Replay ``path``; return the opponent's legal moves where it ends, or None after a complete game (whose return
    is then added to every decision on the way, weighted by ``probability``). ``decided`` holds the policy's move in
    each position met so far, so a replay asks the policy about new positions only."""
    replies.start(path)
    visited: list[_Node] = []
    try:
        observation, info = env.reset(seed=seed, options={"seat": seat})
        done = False
        while not done:
            legal = [int(a) for a in info["legal_actions"]]
            position = (str(observation), tuple(legal))
            if position not in decided:
                decided[position] = int(policy.act([observation], [info])[0])
            action = decided[position]
            if action not in legal:  # the path is dropped: no answer to record, no return to credit
                summary.unnamed += 1
                return None
            answer = str(info["action_names"][legal.index(action)])
            messages = (*chat_messages(instructions, observation), {"role": "assistant", "content": answer})
            key = tuple((m["role"], m["content"]) for m in messages)
            node = nodes.get(key)
            if node is None:
                names = tuple(str(n) for n in info["action_names"])
                values = policy_action_values(policy, [observation], [info])
                node = nodes[key] = _Node(messages, action, seed, summary.episodes, len(visited), _task_id(info), names,
                                          values[0] if values else ())  # fmt: skip
            visited.append(node)
            observation, reward, terminated, truncated, info = env.step(action)
            node.reward = float(reward)
            done = terminated or truncated
    except _PathEnds as ends:
        return ends.legal
    game_return = sum(n.reward for n in visited)  # the steps' rewards; the last step's holds the outcome
    score = float(info.get("score", game_return))
    for node in visited:
        node.weight += probability
        node.weighted_return += probability * game_return
        node.weighted_score += probability * score
    summary.returns.append(game_return)
    summary.scores.append(score)
    summary.lengths.append(len(visited))
    return None


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
