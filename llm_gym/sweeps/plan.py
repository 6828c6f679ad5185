"""What a sweep runs: one training run per (grid cell, seed), each a normal run directory under the sweep's
directory, and for each whether it is finished, to be resumed (killed or extended) or new.

Every run is started with the ``llm-gym train`` command line a user would type (``--run-dir`` for a new one,
``--resume`` for one that has a ``config.json`` but no finished summary), so a sweep run is an ordinary run: it
plots, plays, resumes and exports like any other.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from llm_gym.config import apply_overrides, to_dict
from llm_gym.errors import CheckpointError, ConfigError
from llm_gym.runs import CONFIG_FILE, read_summary
from llm_gym.sweeps.grid import Cell

SWEEP_FILE = "sweep.json"
"""The sweep's own record in its directory: agent, env, grid, seeds, settings."""
EXTENDABLE = ("total_steps", "progress")
"""Fields a rerun may change in a run it finds: a longer budget resumes finished runs; the rest must match."""

State = Literal["done", "resume", "new"]


@dataclass(frozen=True)
class SweepSpec:
    """Everything that names a sweep's runs."""

    agent: str
    env_id: str
    grid: dict[str, list[Any]]
    seeds: tuple[int, ...]
    sets: tuple[str, ...] = ()
    """``--set key=value`` items applied to every run (before the cell's own values)."""
    env_args: tuple[str, ...] = ()
    """``--env-arg key=value`` items of every run."""


@dataclass(frozen=True)
class PlannedRun:
    """One (cell, seed) of a sweep."""

    cell: Cell
    seed: int
    path: Path
    state: State
    config: dict[str, Any]
    """The resolved agent config this run trains with (``config.json``'s ``config``)."""

    @property
    def name(self) -> str:
        return self.path.name

    def command_args(self, spec: SweepSpec) -> list[str]:
        """The ``llm-gym train`` arguments (after ``train``) that start or resume this run."""
        sets = [*spec.sets, *(f"{key}={_arg(value)}" for key, value in self.cell.overrides)]
        args = ["--resume", str(self.path)] if self.state == "resume" else [
            "--agent", spec.agent, "--env", spec.env_id, "--run-dir", str(self.path),
        ]  # fmt: skip
        args += ["--seed", str(self.seed)]
        args += [arg for item in sets for arg in ("--set", item)]
        if self.state == "new":  # a resume keeps the env arguments it was started with
            args += [arg for item in spec.env_args for arg in ("--env-arg", item)]
        return args


def _arg(value: Any) -> str:
    """A value as ``--set`` reads it back (lists and tuples as JSON, booleans as true/false)."""
    if isinstance(value, list | tuple):
        return json.dumps(list(value))
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def run_dir(sweep_dir: Path, cell: Cell, seed: int) -> Path:
    """``<sweep dir>/<cell label>__seed_<seed>``."""
    return sweep_dir / f"{cell.slug}__seed_{seed}"


def plan(
    spec: SweepSpec, base_config: Any, env_kwargs: dict[str, Any], grid_cells: Sequence[Cell], sweep_dir: Path
) -> list[PlannedRun]:
    """Every (cell, seed) run, with its state read from its directory. A directory that holds a run of other
    settings (another agent, env, env arguments or config) raises :class:`ConfigError`: a sweep never mixes them."""
    runs = []
    for cell in grid_cells:
        for seed in spec.seeds:
            config = to_dict(apply_overrides(base_config, {**cell.as_dict(), "seed": seed}, source="--grid"))
            path = run_dir(sweep_dir, cell, seed)
            runs.append(PlannedRun(cell, seed, path, _state(path, spec, config, env_kwargs), config))
    return runs


def _state(path: Path, spec: SweepSpec, config: dict[str, Any], env_kwargs: dict[str, Any]) -> State:
    if not (path / CONFIG_FILE).is_file():
        return "new"
    try:
        saved = json.loads((path / CONFIG_FILE).read_text())
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path / CONFIG_FILE} is unreadable ({exc}); remove {path} to run it again") from exc
    fixed = {k: v for k, v in config.items() if k not in EXTENDABLE}
    found = {k: v for k, v in saved.get("config", {}).items() if k not in EXTENDABLE}
    mismatch = [
        f"{key}={saved.get(key)!r} (this sweep: {want!r})"
        for key, want in (("agent", spec.agent), ("env_id", spec.env_id), ("env_kwargs", env_kwargs))
        if saved.get(key) != want
    ] + [f"{k}={found.get(k)!r} (this sweep: {v!r})" for k, v in fixed.items() if found.get(k) != v]
    if mismatch:
        raise ConfigError(
            f"{path} holds a run with other settings: {'; '.join(mismatch[:3])}; "
            "use another --name (or --runs-root) for a different sweep"
        )
    return "done" if is_finished(path, config) else "resume"


def is_finished(path: Path, config: dict[str, Any]) -> bool:
    """A run is finished when its summary exists and covers the config's ``total_steps`` (a run a callback stopped
    early, or one whose budget was raised since, is resumed)."""
    summary = read_summary(path)
    if not summary:
        return False
    total = config.get("total_steps")
    return not isinstance(total, int) or int(summary.get("env_steps", 0)) >= total
