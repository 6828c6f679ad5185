"""Playing one unit of bench work: a :class:`WorkUnit` (one entry, one env, one split, consecutive seeds) played by a
:class:`UnitPlayer` through :func:`llm_gym.training.evaluation.run_episodes`, each finished episode handed on as an
:class:`~llm_gym.bench.store.EpisodeRow`. The same code plays a unit in this process (:mod:`llm_gym.bench.runner`)
and on a Ray worker (:mod:`llm_gym.bench.ray_runner`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from llm_gym import __version__
from llm_gym.bench.entries import ResolvedEntry, canonical_json, env_hash
from llm_gym.bench.recording import BenchEnvConfig, DetailsBoard, RecordingPolicy
from llm_gym.bench.store import EpisodeRow
from llm_gym.bench.suite import SuiteEnv
from llm_gym.envs.catalog import env_family
from llm_gym.training.evaluation import EpisodeResult, run_episodes

RowSink = Callable[[EpisodeRow, Any], None]
"""Receives each finished episode and its trajectory (None when not recorded)."""


@dataclass(frozen=True)
class WorkUnit:
    """Consecutive episodes of one (entry, env, split): episode ``k`` plays ``seeds[k]`` and ``task_ids[k]``."""

    entry: str
    env_label: str
    split: str
    seeds: tuple[int, ...]
    task_ids: tuple[int | None, ...]
    num_envs: int = 4
    """Envs stepped in lockstep."""

    def __len__(self) -> int:
        return len(self.seeds)


class UnitPlayer:
    """Plays work units, keeping one policy per (entry, env) for the life of the process (or Ray worker)."""

    def __init__(self) -> None:
        self._policies: dict[tuple[str, str, str], tuple[Any, Any]] = {}

    def policy_for(self, entry: ResolvedEntry, env: SuiteEnv) -> tuple[Any, Any]:
        """The policy ``entry`` plays ``env`` with and the env config it plays on (made once, then kept)."""
        key = (entry.name, entry.entry_hash, env.label)
        if key not in self._policies:
            self._policies[key] = entry.policy(env)
        return self._policies[key]

    def play(
        self,
        suite: str,
        entry: ResolvedEntry,
        env: SuiteEnv,
        unit: WorkUnit,
        record: bool,
        sink: RowSink,
        on_steps: Callable[[int], None] | None = None,
    ) -> None:
        """Play ``unit``, handing each finished episode to ``sink``; ``on_steps(n)`` hears of every lockstep step
        (``n`` envs acted), so that progress moves within episodes that last an hour (an LM on a 1000-step game)."""
        policy, env_config = self.policy_for(entry, env)
        # Details are collected whenever the policy reports them (tokens per episode); steps only when recording.
        board = DetailsBoard() if (record or hasattr(policy, "act_with_details")) else None
        finished: dict[int, list[dict[str, Any]]] | None = {} if record else None
        bench_env = BenchEnvConfig(env_config.env_id, env_config.kwargs, board=board, finished=finished)
        tasks = [t for t in unit.task_ids if t is not None]

        def on_episode(result: EpisodeResult) -> None:
            trajectory = finished.pop(result.seed, None) if finished is not None else None
            sink(episode_row(suite, entry, env, unit, result), trajectory)

        acting = RecordingPolicy(policy, board) if board is not None else policy
        run_episodes(
            StepCounting(acting, on_steps) if on_steps is not None else acting,
            bench_env,
            len(unit),
            seed=unit.seeds[0],
            num_envs=unit.num_envs,
            max_steps=env.max_steps,
            task_ids=tasks or None,
            on_episode=on_episode,
        )


def episode_row(suite: str, entry: ResolvedEntry, env: SuiteEnv, unit: WorkUnit, result: EpisodeResult) -> EpisodeRow:
    """The stored form of one finished episode."""
    info = dict(result.final_info)
    wall = float(info.pop("bench_wall_seconds", 0.0))
    tokens = info.pop("bench_tokens", None)
    # What "score" means per family: Atari game points, OpenSpiel's normalised score, Trace's partial credit.
    score = info.get("partial") if env_family(env.env_id) == "trace" else info.get("score")
    k = unit.seeds.index(result.seed)
    return EpisodeRow(
        suite=suite,
        split=unit.split,
        entry=entry.name,
        entry_hash=entry.entry_hash,
        agent=entry.agent_name,
        checkpoint_hash=entry.checkpoint_hash,
        env_label=env.label,
        game=env.game,
        env_id=env.env_id,
        env_args=canonical_json(dict(env.args)),
        env_hash=env_hash(env, entry.reads_text),
        task_id=unit.task_ids[k],
        seed=result.seed,
        episode_return=float(result.episode_return),
        raw_return=float(result.raw_return),
        score=None if score is None else float(score),
        length=int(result.length),
        truncated=bool(result.truncated),
        invalid_actions=int(result.invalid_actions),
        decisions=int(result.length),
        tokens=None if tokens is None else int(tokens),
        wall_seconds=wall,
        llm_gym_version=__version__,
        final_info=info,
    )


class StepCounting:
    """Wraps a policy: tells ``on_steps`` how many envs acted in each call (the rest is the wrapped policy's)."""

    def __init__(self, policy: Any, on_steps: Callable[[int], None]) -> None:
        self.policy, self.on_steps = policy, on_steps

    def __getattr__(self, name: str) -> Any:
        return getattr(self.policy, name)

    def act(self, observations: Sequence[Any], infos: Sequence[Any]) -> list[Any]:
        actions = self.policy.act(observations, infos)
        self.on_steps(len(observations))
        return actions
