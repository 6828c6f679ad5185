"""Learning curves from runs' TensorBoard scalars (``<run>/tb``): read them, group runs that differ only in their
seed (the seeds of one sweep cell), and draw each group as its mean with a 95% confidence band (one line for a
group of one run) into a PNG with matplotlib."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from llm_gym.atomic import write_via, writing
from llm_gym.errors import ConfigError, MissingDependencyError, suggest
from llm_gym.runs import CONFIG_FILE, Run
from llm_gym.stats import mean_ci95

PER_RUN_FIELDS = ("seed", "progress")
"""Config fields that do not make two runs different experiments (runs equal in the rest are seeds of one cell)."""


@dataclass
class Curve:
    """One run's scalar series."""

    run: Path
    steps: np.ndarray
    values: np.ndarray


@dataclass
class Group:
    """Runs that are seeds of one setting, and the label the plot gives them."""

    label: str
    runs: list[Path]


def expand_runs(paths: Sequence[Path]) -> list[Path]:
    """Run directories from the paths given: a run directory as itself, a directory of runs (a sweep's) as the run
    directories in it, sorted."""
    out: list[Path] = []
    for path in paths:
        if (path / CONFIG_FILE).is_file():
            out.append(path)
            continue
        children = sorted(p for p in path.iterdir() if (p / CONFIG_FILE).is_file()) if path.is_dir() else []
        if not children:
            raise ConfigError(f"{path} is not a run directory (no {CONFIG_FILE}) and holds none")
        out += children
    return out


def read_events(tb: Path) -> Any:
    """The TensorBoard events in ``tb``, every scalar kept, as an ``EventAccumulator`` (``.Tags()``, ``.Scalars(tag)``)."""
    # tensorboard's event reader takes about 0.15 s to import: `llm-gym plot` and the bench's rendering pay it, the
    # CLI's other commands (whose import loads this module) do not.
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(tb), size_guidance={"scalars": 0})
    accumulator.Reload()
    return accumulator


def read_scalars(run: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{tag: (steps, values)}`` of every scalar in ``<run>/tb`` (the events of a resumed run as TensorBoard shows
    them: what a kill made stale is purged)."""
    tb = run / "tb"
    if not tb.is_dir():
        raise ConfigError(f"{run} has no TensorBoard scalars ({tb} is missing)")
    accumulator = read_events(tb)
    out = {}
    for tag in accumulator.Tags().get("scalars", []):
        events = accumulator.Scalars(tag)
        out[tag] = (np.array([e.step for e in events]), np.array([e.value for e in events], dtype=float))
    return out


def curves(runs: Sequence[Path], metric: str) -> list[Curve]:
    """``metric`` of every run; a metric no run logged raises with the close matches among the logged ones."""
    found, known = [], set()
    for run in runs:
        scalars = read_scalars(run)
        known |= set(scalars)
        if metric in scalars:
            steps, values = scalars[metric]
            found.append(Curve(run, steps, values))
    if not found:
        close = suggest(metric, sorted(known))
        hint = f"did you mean {', '.join(close)}?" if close else f"logged: {', '.join(sorted(known)) or 'nothing'}"
        raise ConfigError(f"no run logged the metric {metric!r}; {hint}")
    return found


def group_runs(runs: Sequence[Path]) -> list[Group]:
    """Runs grouped by everything but their seed (agent, env, env arguments, config), labelled by the config fields
    that tell the groups apart (or by the agent and env when there is one group)."""
    settings: dict[str, tuple[dict[str, Any], list[Path]]] = {}
    for run in runs:
        saved = Run(run).read_config()
        setting = {
            "agent": saved["agent"],
            "env_id": saved["env_id"],
            "env_kwargs": saved["env_kwargs"],
            **{k: v for k, v in saved["config"].items() if k not in PER_RUN_FIELDS},
        }
        key = json.dumps(setting, sort_keys=True, default=str)
        settings.setdefault(key, (setting, []))[1].append(run)
    values = [s for s, _ in settings.values()]
    differing = [k for k in values[0] if any(v.get(k) != values[0].get(k) for v in values[1:])]
    groups = []
    for setting, members in settings.values():
        if differing:
            label = ", ".join(f"{k}={_short(setting.get(k))}" for k in differing)
        else:
            label = f"{setting['agent']} on {setting['env_id']}"
        groups.append(Group(label, members))
    return groups


def _short(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def smooth(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing moving average over ``window`` points (the first points average what there is)."""
    if window <= 1 or len(values) == 0:
        return values
    sums = np.cumsum(np.insert(values, 0, 0.0))
    counts = np.minimum(np.arange(1, len(values) + 1), window)
    starts = np.arange(1, len(values) + 1) - counts
    return (sums[1:] - sums[starts]) / counts


def mean_band(group: Sequence[Curve]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(steps, mean, 95% CI half-width) of curves on the steps any of them logged, over the steps all of them cover
    (each curve linearly interpolated there); the half-width is 0 for one curve."""
    if len(group) == 1:
        return group[0].steps, group[0].values, np.zeros(len(group[0].values))
    start = max(c.steps[0] for c in group)
    stop = min(c.steps[-1] for c in group)
    steps = np.unique(np.concatenate([c.steps for c in group]))
    steps = steps[(steps >= start) & (steps <= stop)]
    stacked = np.stack([np.interp(steps, c.steps, c.values) for c in group])
    stats = [mean_ci95(list(column)) for column in stacked.T]
    return steps, np.array([m for m, _ in stats]), np.array([0.0 if math.isnan(h) else h for _, h in stats])


def pyplot(what: str, extra: str) -> Any:
    """matplotlib's ``pyplot`` drawing into files only (the Agg backend: no display needed), for every plot the
    package writes; without matplotlib, a :class:`MissingDependencyError` saying that ``what`` needs ``extra``."""
    # matplotlib is optional (the lm and bench extras) and pyplot takes about 0.25 s to import: loaded when drawing.
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise MissingDependencyError(what, extra) from exc
    return plt


def plot(
    runs: Sequence[Path], metrics: Sequence[str], out: Path, smoothing: int = 1, title: str | None = None
) -> Mapping[str, int]:
    """Draw ``metrics`` (one panel each) of ``runs`` into the PNG ``out``: per group of seeds its mean and 95% CI
    band. Returns ``{metric: curves drawn}``."""
    plt = pyplot("llm-gym plot", "bench")
    groups = group_runs(runs)
    figure, axes = plt.subplots(len(metrics), 1, figsize=(8, 3.2 * len(metrics)), squeeze=False)
    drawn: dict[str, int] = {}
    for axis, metric in zip(axes[:, 0], metrics, strict=True):
        by_run = {c.run: c for c in curves(runs, metric)}
        drawn[metric] = 0
        for group in groups:
            members = [by_run[r] for r in group.runs if r in by_run and len(by_run[r].steps)]
            if not members:
                continue
            members = [Curve(c.run, c.steps, smooth(c.values, smoothing)) for c in members]
            steps, mean, half = mean_band(members)
            seeds = f" ({len(members)} seeds)" if len(members) > 1 else ""
            (line,) = axis.plot(steps, mean, label=group.label + seeds)
            if len(members) > 1:
                axis.fill_between(steps, mean - half, mean + half, color=line.get_color(), alpha=0.2)
            drawn[metric] += 1
        axis.set_title(metric + (f" (moving average of {smoothing})" if smoothing > 1 else ""))
        axis.set_xlabel("env steps")
        axis.grid(alpha=0.3)
        axis.legend(fontsize="small")
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    try:
        with writing(out):
            out.parent.mkdir(parents=True, exist_ok=True)
        write_via(out, lambda tmp: figure.savefig(tmp, dpi=110, format="png"))  # the old plot stays on a failure
    finally:
        plt.close(figure)
    return drawn
