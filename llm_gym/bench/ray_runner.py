"""Bench episodes on Ray: one actor per worker, each keeping its env + policy (an LM loads once per worker).

The driver ships each actor a :class:`WorkUnit` with the resolved entry (agent name, config, checkpoint path) and the
env spec; the actor plays it with the same :class:`UnitPlayer` as a local run and returns the rows. Only the driver
writes to the SQLite store, so results flow into one file whatever the cluster. ``--ray`` starts a local Ray
instance for this command; ``--ray-address`` joins an existing cluster (its nodes need llm-gym installed and, for a
checkpoint entry, the checkpoint at the same path).
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from llm_gym.bench.entries import ResolvedEntry
from llm_gym.bench.suite import SuiteEnv
from llm_gym.bench.units import RowSink, UnitPlayer, WorkUnit
from llm_gym.errors import ConfigError, LLMGymError
from llm_gym.plugins import get_plugin_manager

INSTALL_HINT = 'Ray is not installed; --ray needs it: pip install "llm-gym[ray]"'


def ray_module() -> Any:
    """The ``ray`` package, or a one-line error that says how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise LLMGymError(INSTALL_HINT) from exc
    return ray


class BenchWorker:
    """A Ray actor's body: plays units and returns their rows (trajectories included)."""

    def __init__(self) -> None:
        get_plugin_manager()  # the agents' imports (torch among them) belong to start-up, not to the first unit
        self.player = UnitPlayer()

    def ready(self) -> bool:
        """Returns once the actor's process is up (llm-gym imported), so start-up can be timed apart from play."""
        return True

    def play(
        self, suite: str, entry: ResolvedEntry, env: SuiteEnv, unit: WorkUnit, record: bool
    ) -> list[tuple[Any, Any]]:
        rows: list[tuple[Any, Any]] = []
        self.player.play(suite, entry, env, unit, record, lambda row, trajectory: rows.append((row, trajectory)))
        return rows


@contextlib.contextmanager
def ray_session(ray: Any, address: str | None = None, num_cpus: int | None = None) -> Iterator[None]:
    """Ray for the length of the block: the running instance where there is one; else a new local one (``num_cpus``
    of this machine's CPUs, default all), or a connection to the cluster at ``address``, shut down at the end. An
    unreachable cluster is one line."""
    if ray.is_initialized():
        yield
        return
    try:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    except ConnectionError as exc:
        raise LLMGymError(f"cannot reach the Ray cluster at {address}: {exc}") from exc
    try:
        yield
    finally:
        ray.shutdown()


def run_on_ray(
    suite: str,
    units: Sequence[WorkUnit],
    resolved: Mapping[str, ResolvedEntry],
    envs: Mapping[str, SuiteEnv],
    record: bool,
    sink: RowSink,
    *,
    address: str | None = None,
    workers: int | None = None,
) -> float:
    """Play ``units`` on ``workers`` Ray actors (default: one per CPU Ray sees), handing each row to ``sink``.
    Returns the seconds spent starting Ray and the actors."""
    start = time.perf_counter()
    ray = ray_module()
    if workers is not None and workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {workers}")
    with ray_session(ray, address, num_cpus=workers):
        count = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        actor_cls = ray.remote(num_cpus=1)(BenchWorker)
        idle = deque(actor_cls.remote() for _ in range(count))
        ray.get([actor.ready.remote() for actor in idle])
        startup = time.perf_counter() - start
        queue = deque(units)
        pending: dict[Any, Any] = {}
        while queue or pending:
            while idle and queue:
                actor, unit = idle.popleft(), queue.popleft()
                ref = actor.play.remote(suite, resolved[unit.entry], envs[unit.env_label], unit, record)
                pending[ref] = actor
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                idle.append(pending.pop(ref))
                for row, trajectory in _get(ray, ref):
                    sink(row, trajectory)
    return startup


def _get(ray: Any, ref: Any) -> Any:
    """``ray.get``, re-raising a worker's own llm-gym error (a one-line message) rather than Ray's wrapper."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, LLMGymError):
            raise cause from None
        raise
