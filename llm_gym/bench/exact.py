"""Exact evaluation as a bench metric: for every entry that plays an env marked ``exact = true`` in its suite, the
policy's exact values on that env (:func:`llm_gym.training.exact.evaluate_exact`), stored beside its episodes.

* Once per (entry, env) identity, the identity its episodes have (entry hash, env hash): a rerun computes only what
  the store lacks, and a re-configured entry gets a new evaluation as it gets new episodes.
* With the policy object and env config the entry plays its episodes with (``UnitPlayer.policy_for`` of
  :mod:`llm_gym.bench.units`), after its episodes (so they are played as they would be without exact evaluation).
  A Ray run computes it on the driver, after the workers' episodes.
* The policy's own action at each position, as ``llm-gym play --exact`` without ``--sample``; a policy whose actions
  are draws by nature (``random``) is read by its probabilities. A policy with randomness of its own that is not
  marked so (``mcts``) is evaluated as the one deterministic policy its answers make.
* An evaluation that cannot be made for one entry (its policy adds env arguments exact evaluation refuses, such as
  ``history``) is reported in one line and stored as nothing; the other entries go on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from llm_gym import __version__
from llm_gym.bench.entries import ResolvedEntry, env_hash
from llm_gym.bench.store import EpisodeStore, ExactRow
from llm_gym.bench.suite import Suite, SuiteEnv
from llm_gym.errors import LLMGymError
from llm_gym.training.exact import evaluate_exact

PolicySource = Callable[[ResolvedEntry, SuiteEnv], tuple[Any, Any]]
"""``(entry, env) -> (policy, env config)``: the policy an entry plays ``env`` with and the env config it plays on."""


@dataclass(frozen=True)
class ExactReport:
    """What one bench run did about exact evaluations."""

    planned: int
    """(entry, env) pairs the suite asks exact values for."""
    already_stored: int
    """Of those, pairs the store held before this run."""
    computed: int
    """Pairs evaluated and stored by this run."""
    seconds: float
    """Wall time of the evaluations."""
    failed: dict[str, str] = field(default_factory=dict)
    """``"entry on env"`` -> why it could not be evaluated (nothing stored)."""


def exact_pairs(suite: Suite, resolved: Mapping[str, ResolvedEntry]) -> list[tuple[ResolvedEntry, SuiteEnv]]:
    """Every (entry, env) of the suite with exact values: the env is marked ``exact`` and the entry plays it."""
    return [
        (resolved[entry.name], env)
        for entry in suite.entries
        if entry.name in resolved
        for env in suite.envs
        if env.exact and entry.plays(env)
    ]


def missing_exact(
    suite: Suite, resolved: Mapping[str, ResolvedEntry], store: EpisodeStore
) -> list[tuple[ResolvedEntry, SuiteEnv]]:
    """The pairs of :func:`exact_pairs` whose evaluation the store does not hold."""
    return [
        (identity, env)
        for identity, env in exact_pairs(suite, resolved)
        if not store.has_exact(identity.name, identity.entry_hash, env.label, env_hash(env, identity.reads_text))
    ]


def run_exact(
    suite: Suite,
    resolved: Mapping[str, ResolvedEntry],
    store: EpisodeStore,
    policies: PolicySource,
    machine: Mapping[str, Any],
    *,
    progress: bool = True,
) -> ExactReport:
    """Evaluate and store every pair the store lacks, each in its own transaction (a kill loses only the one being
    computed)."""
    planned = exact_pairs(suite, resolved)
    missing = missing_exact(suite, resolved, store)
    failed: dict[str, str] = {}
    computed = 0
    start = time.perf_counter()
    for identity, env in missing:
        policy, env_config = policies(identity, env)
        with _positions_bar(progress, f"exact {identity.name} on {env.label}") as on_batch:
            try:
                result = evaluate_exact(policy, env_config, on_batch=on_batch)
            except LLMGymError as exc:  # this pair only: e.g. the policy's own env arguments cannot be walked
                failed[f"{identity.name} on {env.label}"] = str(exc)
                continue
        row = ExactRow(
            entry=identity.name,
            entry_hash=identity.entry_hash,
            env_label=env.label,
            env_hash=env_hash(env, identity.reads_text),
            suite=suite.name,
            result=result.as_dict(),
            seconds=result.seconds,
            machine=dict(machine),
            llm_gym_version=__version__,
        )
        computed += store.add_exact(row)
    return ExactReport(len(planned), len(planned) - len(missing), computed, time.perf_counter() - start, failed)


class _positions_bar:
    """A progress bar of the positions the policy was asked (on stderr; a no-op when disabled). Yields the
    ``on_batch`` callback of :func:`llm_gym.training.exact.evaluate_exact`."""

    def __init__(self, enabled: bool, title: str) -> None:
        self.enabled, self.title = enabled, title
        self._bar: Any = None

    def __enter__(self) -> Any:
        if not self.enabled:
            return None

        self._bar = Progress(
            TextColumn(self.title), BarColumn(), MofNCompleteColumn(), TextColumn("positions"), TimeElapsedColumn(),
            console=Console(stderr=True), transient=True,
        )  # fmt: skip
        self._bar.start()
        task = self._bar.add_task("positions", total=None)

        def on_batch(asked: int, left: int) -> None:
            self._bar.update(task, completed=asked, total=asked + left)

        return on_batch

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
