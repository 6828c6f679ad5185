"""Running a sweep's planned runs: each as an ``llm-gym train`` process (the normal train path, its own memory and
threads, killable on its own), locally one or ``parallel`` at a time, or as Ray tasks (``--ray``) on a local
instance or a cluster whose nodes have llm-gym installed and see the runs' directory at the same path.

Ray tasks rather than Ray Tune trials: every cell already is a run directory that checkpoints and resumes itself;
Tune's own trial directories, checkpoints and schedulers would be a second copy of that. Each task runs the same
command line as a local sweep, so a cell behaves the same wherever it runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from llm_gym.bench.ray_runner import ray_module, ray_session
from llm_gym.errors import ConfigError
from llm_gym.sweeps.plan import PlannedRun, SweepSpec

LOGS_DIR = "logs"
"""Under the sweep directory: each run's train output, ``<run name>.log``."""


@dataclass(frozen=True)
class Outcome:
    """How one run's train process ended."""

    run: PlannedRun
    returncode: int
    seconds: float
    log: Path

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def train_command(args: Sequence[str]) -> list[str]:
    """``llm-gym train ARGS`` with the interpreter of this process (the script beside it is the same program)."""
    return [sys.executable, "-m", "llm_gym.cli", "train", *args]


def _thread_env(parallel: int) -> dict[str, str]:
    """The environment of a train process: torch threads split between the runs that share the machine, unless the
    user set them."""
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // parallel)))
    env.setdefault("COLUMNS", "160")  # the logs are files: long paths on one line
    return env


def run_local(
    spec: SweepSpec,
    runs: Sequence[PlannedRun],
    logs: Path,
    parallel: int,
    report: Callable[[str], None],
) -> list[Outcome]:
    """Run ``runs`` as train processes, at most ``parallel`` at a time; returns their outcomes in run order. On an
    interrupt (Ctrl-C) the processes this started are stopped; each run resumes on the next ``llm-gym sweep``."""
    if parallel < 1:
        raise ConfigError(f"--parallel must be >= 1, got {parallel}")
    logs.mkdir(parents=True, exist_ok=True)
    env = _thread_env(parallel)
    queue = list(runs)
    active: dict[subprocess.Popen, tuple[PlannedRun, float, Path]] = {}
    outcomes: dict[Path, Outcome] = {}
    try:
        while queue or active:
            while queue and len(active) < parallel:
                run = queue.pop(0)
                log = logs / f"{run.name}.log"
                with open(log, "a") as handle:
                    process = subprocess.Popen(
                        train_command(run.command_args(spec)), stdout=handle, stderr=subprocess.STDOUT, env=env
                    )
                active[process] = (run, time.perf_counter(), log)
                report(f"{'resume' if run.state == 'resume' else 'start'} {run.name}")
            for process in [p for p in active if p.poll() is not None]:
                run, started, log = active.pop(process)
                outcome = Outcome(run, process.returncode, time.perf_counter() - started, log)
                outcomes[run.path] = outcome
                report(_finished_line(outcome))
            if active:
                time.sleep(0.2)
    finally:
        for process in active:  # only on an interrupt or an error: stop the runs this sweep started
            process.terminate()
        for process in active:
            process.wait()
    return [outcomes[run.path] for run in runs]


def _finished_line(outcome: Outcome) -> str:
    if outcome.ok:
        return f"done {outcome.run.name} ({outcome.seconds:.0f} s)"
    return f"FAILED {outcome.run.name} (exit code {outcome.returncode}; see {outcome.log})"


def _ray_train(args: list[str], log: str, threads: int) -> tuple[int, float]:
    """A Ray task's body: the same train process as a local sweep, its output appended to ``log``."""
    env = {"COLUMNS": "160", **os.environ, "OMP_NUM_THREADS": str(threads)}
    started = time.perf_counter()
    with open(log, "a") as handle:
        code = subprocess.run(train_command(args), stdout=handle, stderr=subprocess.STDOUT, env=env).returncode
    return code, time.perf_counter() - started


def run_ray(
    spec: SweepSpec,
    runs: Sequence[PlannedRun],
    logs: Path,
    cpus_per_run: int,
    report: Callable[[str], None],
    address: str | None = None,
) -> list[Outcome]:
    """Run ``runs`` as Ray tasks of ``cpus_per_run`` CPUs each (Ray schedules as many at once as the cluster has
    CPUs for); starts a local Ray instance unless ``address`` names a cluster."""
    if cpus_per_run < 1:
        raise ConfigError(f"--cpus-per-run must be >= 1, got {cpus_per_run}")
    ray = ray_module()
    logs.mkdir(parents=True, exist_ok=True)
    with ray_session(ray, address):
        task = ray.remote(num_cpus=cpus_per_run)(_ray_train)
        pending = {}
        for run in runs:
            log = logs / f"{run.name}.log"
            pending[task.remote(run.command_args(spec), str(log), cpus_per_run)] = (run, log)
            report(f"{'resume' if run.state == 'resume' else 'start'} {run.name} (Ray task)")
        outcomes: dict[Path, Outcome] = {}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                run, log = pending.pop(ref)
                code, seconds = ray.get(ref)
                outcomes[run.path] = Outcome(run, code, seconds, log)
                report(_finished_line(outcomes[run.path]))
    return [outcomes[run.path] for run in runs]
