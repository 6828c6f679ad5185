"""Run a suite: find the episodes the store does not hold yet, play them, store each one as it finishes.

Work is cut into :class:`WorkUnit` s (one entry, one env, one split, a run of consecutive seeds) and played by a
:class:`UnitPlayer` through :func:`llm_gym.evaluation.run_episodes`, here or on Ray workers
(:mod:`llm_gym.bench.ray_runner`). Only this process writes to the store, one transaction per episode, so a
``kill -9`` at any moment loses only episodes that were still being played, and the next run plays exactly those.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_gym.bench.entries import ResolvedEntry, canonical_json, env_hash, keep_stored_identity, resolve_entry
from llm_gym.bench.exact import ExactReport, run_exact
from llm_gym.bench.recording import BenchEnvConfig, DetailsBoard, RecordingPolicy
from llm_gym.bench.store import EpisodeRow, EpisodeStore
from llm_gym.bench.suite import Suite, SuiteEnv
from llm_gym.bench.training import training_info
from llm_gym.evaluation import EpisodeResult, run_episodes

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


@dataclass(frozen=True)
class BenchReport:
    """What one ``run_suite`` call did."""

    planned: int
    """Episodes the suite asks for."""
    already_stored: int
    """Of those, episodes the store held before this run."""
    played: int
    """Episodes played and stored by this run."""
    seconds: float
    """Wall time of playing."""
    skipped: dict[str, str]
    """Entries not played, and why."""
    startup_seconds: float = 0.0
    """Of ``seconds``, the time spent starting Ray and its actors (0 for a local run)."""
    exact: ExactReport | None = None
    """The exact evaluations of the suite's ``exact`` envs (:mod:`llm_gym.bench.exact`); not in ``seconds``."""

    @property
    def episodes_per_second(self) -> float:
        return self.played / max(self.seconds, 1e-9)


def resolve_entries(suite: Suite, store: EpisodeStore | None = None) -> tuple[dict[str, ResolvedEntry], dict[str, str]]:
    """Every entry of the suite checked and hashed (bad agents or settings raise before anything plays), and the
    checkpoint entries whose checkpoint is not on this machine (skipped: their stored episodes stay and render)."""
    resolved, skipped = {}, {}
    stored = store.entry_info() if store is not None else {}
    for entry in suite.entries:
        if entry.checkpoint is not None and not _checkpoint_exists(entry.checkpoint):
            held = store.count_entry(entry.name, suite.name) if store is not None else 0
            skipped[entry.name] = f"checkpoint {entry.checkpoint} is not here; nothing played for it" + (
                f" (the store's {held} episodes of it stay in the leaderboard)" if held else ""
            )
            continue
        resolved[entry.name] = keep_stored_identity(resolve_entry(entry, suite.name), stored)
    return resolved, skipped


def _checkpoint_exists(checkpoint: str) -> bool:
    from llm_gym.bench.entries import REPO_ROOT

    return Path(checkpoint).exists() or (REPO_ROOT / checkpoint).exists()


def plan(
    suite: Suite, resolved: dict[str, ResolvedEntry], store: EpisodeStore, chunk: int | None = None
) -> tuple[list[WorkUnit], int]:
    """The units of episodes still missing from the store (each at most ``chunk`` long), and how many are stored."""
    units: list[WorkUnit] = []
    stored = 0
    for entry in suite.entries:
        if entry.name not in resolved:
            continue
        identity = resolved[entry.name]
        for env in suite.envs:
            if not entry.plays(env):
                continue
            have = store.keys(entry.name, identity.entry_hash, env.label, env_hash(env, identity.reads_text))
            for split in suite.entry_splits(entry):
                specs = suite.episodes_of(entry, env, split)
                missing = [s for s in specs if (s.seed, s.task_id) not in have]
                stored += len(specs) - len(missing)
                for run in _consecutive(missing, chunk):
                    units.append(
                        WorkUnit(
                            entry.name,
                            env.label,
                            split,
                            tuple(s.seed for s in run),
                            tuple(s.task_id for s in run),
                            entry.num_envs or suite.num_envs,
                        )
                    )
    return units, stored


def _consecutive(specs: Sequence[Any], chunk: int | None) -> Iterator[list[Any]]:
    run: list[Any] = []
    for spec in specs:
        if run and (spec.seed != run[-1].seed + 1 or (chunk and len(run) >= chunk)):
            yield run
            run = []
        run.append(spec)
    if run:
        yield run


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
    from llm_gym import __version__
    from llm_gym.envs.catalog import env_family

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


def run_suite(
    suite: Suite,
    store: EpisodeStore,
    *,
    record: bool = False,
    ray: bool = False,
    ray_address: str | None = None,
    workers: int | None = None,
    progress: bool = True,
) -> BenchReport:
    """Play every episode of ``suite`` that ``store`` does not hold, storing each as it finishes."""
    resolved, skipped = resolve_entries(suite, store)
    machine = machine_info()
    envs = {env.label: env for env in suite.envs}
    chunk = min(e.num_envs or suite.num_envs for e in suite.entries) if (ray or ray_address) else None
    units, stored = plan(suite, resolved, store, chunk)
    playing = {unit.entry for unit in units}
    for identity in resolved.values():
        training = None
        if identity.checkpoint:
            training = training_info(identity.checkpoint)
            if identity.entry.trained_on:
                training["device"] = identity.entry.trained_on
        store.add_entry(
            identity.name,
            identity.entry_hash,
            identity.agent_name,
            dataclasses.asdict(identity.config),
            str(identity.checkpoint) if identity.checkpoint else None,
            training,
            # The machines that played its episodes: one with nothing to play (a rerun, exact values only) is not one.
            machine if identity.name in playing else {},
        )
    total = sum(len(u) for u in units)
    played, startup = 0, 0.0
    start = time.perf_counter()
    remote = bool(ray or ray_address)
    player = UnitPlayer()  # local episodes and the exact evaluations after them share its policies
    with _progress(progress, total, suite.name, count_steps=not remote) as bar:

        def sink(row: EpisodeRow, trajectory: Any) -> None:
            nonlocal played
            if trajectory is not None:
                trajectory = {"steps": trajectory, "tokens": sum(s.get("tokens", 0) for s in trajectory) or None}
            if store.add(row, trajectory):
                played += 1
            bar.episode()

        if remote:
            from llm_gym.bench.ray_runner import run_on_ray

            startup = run_on_ray(suite.name, units, resolved, envs, record, sink, address=ray_address, workers=workers)
        else:
            on_steps = bar.steps if bar.shows_steps else None  # no wrapper around the policy without a bar
            for unit in units:
                player.play(suite.name, resolved[unit.entry], envs[unit.env_label], unit, record, sink, on_steps)
    seconds = time.perf_counter() - start
    exact = run_exact(suite, resolved, store, player.policy_for, machine, progress=progress)
    return BenchReport(total + stored, stored, played, seconds, skipped, startup, exact)


def machine_info() -> dict[str, Any]:
    """Where the bench ran (shown beside timings in the leaderboard); ``gpus`` names the NVIDIA GPUs the driver
    lists (the LM entries use one when torch sees it), read from /proc so that no agent's torch is imported here."""
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "python": platform.python_version(),
    }
    gpus = nvidia_gpus()
    if gpus:
        info["gpus"] = gpus
    return info


def nvidia_gpus(root: Path = Path("/proc/driver/nvidia/gpus")) -> list[str]:
    """Model names of the NVIDIA GPUs the kernel driver lists (empty without the driver)."""
    names = []
    for information in sorted(root.glob("*/information")) if root.is_dir() else []:
        for line in information.read_text(errors="replace").splitlines():
            if line.startswith("Model:"):
                names.append(line.split(":", 1)[1].strip())
    return names


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


class _progress:
    """A rich progress bar over episodes, with the env steps played and their rate beside it (local runs: Ray
    workers report whole episodes only). A no-op when ``enabled`` is false."""

    def __init__(self, enabled: bool, total: int, name: str, *, count_steps: bool = True) -> None:
        self.enabled, self.total, self.name, self.count_steps = enabled, total, name, count_steps
        self._bar: Any = None
        self._task: Any = None
        self._steps = 0
        self._start = time.perf_counter()

    def __enter__(self) -> _progress:
        if not self.enabled:
            return self
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        from llm_gym.cli.common import err_console

        columns = [TextColumn(f"bench {self.name}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn()]
        if self.count_steps:
            columns.append(TextColumn("{task.fields[steps]}"))
        self._bar = Progress(*columns, console=err_console)
        self._bar.start()
        self._task = self._bar.add_task("episodes", total=self.total, steps="")
        return self

    @property
    def shows_steps(self) -> bool:
        return self.enabled and self.count_steps

    def episode(self) -> None:
        if self._bar is not None:
            self._bar.advance(self._task)

    def steps(self, n: int) -> None:
        self._steps += n
        if self._bar is not None:
            rate = self._steps / max(time.perf_counter() - self._start, 1e-9)
            self._bar.update(self._task, steps=f"{self._steps:,} env steps ({rate:.1f}/s)")

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
