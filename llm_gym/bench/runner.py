"""Run a suite: find the episodes the store does not hold yet, play them, store each one as it finishes.

Work is cut into :class:`~llm_gym.bench.units.WorkUnit` s (one entry, one env, one split, a run of consecutive seeds) and played by a
:class:`~llm_gym.bench.units.UnitPlayer` through :func:`llm_gym.training.evaluation.run_episodes`, here or on Ray workers
(:mod:`llm_gym.bench.ray_runner`). Only this process writes to the store, one transaction per episode, so a
``kill -9`` at any moment loses only episodes that were still being played, and the next run plays exactly those.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from llm_gym.bench.entries import (
    REPO_ROOT,
    ResolvedEntry,
    env_hash,
    keep_stored_identity,
    resolve_entry,
)
from llm_gym.bench.exact import ExactReport, run_exact
from llm_gym.bench.ray_runner import run_on_ray
from llm_gym.bench.store import EpisodeRow, EpisodeStore
from llm_gym.bench.suite import Suite
from llm_gym.bench.training import training_info
from llm_gym.bench.units import UnitPlayer, WorkUnit


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
        columns = [TextColumn(f"bench {self.name}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn()]
        if self.count_steps:
            columns.append(TextColumn("{task.fields[steps]}"))
        self._bar = Progress(*columns, console=Console(stderr=True))
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
