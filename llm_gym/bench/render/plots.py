"""The leaderboard's plots as SVG files (matplotlib, Agg; deterministic ids so regenerated files diff cleanly)."""

from __future__ import annotations

import math
from pathlib import Path

from llm_gym.bench.suite import HELDOUT
from llm_gym.bench.summary import Leaderboard


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "llm-gym-leaderboard"
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: smaller files, searchable
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> Path:
    fig.savefig(path, format="svg", bbox_inches="tight", metadata={"Date": None})
    fig.clf()
    return path


def _err(value: float, low: float, high: float) -> tuple[float, float]:
    if math.isnan(low):
        return 0.0, 0.0
    return max(0.0, value - low), max(0.0, high - value)


def aggregate_plot(board: Leaderboard, path: Path) -> Path | None:
    """IQM of normalised scores per entry with its stratified-bootstrap 95% CI."""
    shown = [a for a in board.aggregates if a.iqm.n]
    if not shown:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 0.45 * len(shown) + 1.2))
    names = [a.entry for a in shown][::-1]
    values = [a.iqm.value for a in shown][::-1]
    errors = list(zip(*[_err(a.iqm.value, a.iqm.low, a.iqm.high) for a in shown][::-1], strict=True))
    ax.errorbar(values, range(len(names)), xerr=errors, fmt="o", color="#1f5fa8", capsize=3)
    ax.set_yticks(range(len(names)), names)
    ax.axvline(0.0, color="#999", linewidth=0.8)
    ax.set_xlabel("IQM of normalised score (95% stratified bootstrap CI)")
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, path)


def family_plot(board: Leaderboard, family: str, path: Path) -> Path | None:
    """Mean normalised score per env (x) and entry (marker) with 95% bootstrap CIs, held-out split."""
    labels = [e.label for e in board.envs if e.family == family]
    entries = [e for e in board.entries if any((e, label, HELDOUT) in board.cells for label in labels)]
    if not labels or not entries:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(labels) + 2), 3.6))
    width = 0.8 / len(entries)
    for k, entry in enumerate(entries):
        xs, ys, errs = [], [], []
        for i, label in enumerate(labels):
            cell = board.cells.get((entry, label, HELDOUT))
            if cell is None or cell.normalised.n == 0:
                continue
            xs.append(i - 0.4 + width * (k + 0.5))
            ys.append(cell.normalised.value)
            errs.append(_err(cell.normalised.value, cell.normalised.low, cell.normalised.high))
        if xs:
            ax.errorbar(xs, ys, yerr=list(zip(*errs, strict=True)), fmt="o", capsize=2, label=entry)
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
    ax.set_ylabel({"atari": "human-normalised score", "openspiel": "score (1 win, 0.5 draw)"}.get(family, "score"))
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize="small", bbox_to_anchor=(1.01, 1), loc="upper left")
    return _save(fig, path)


def curve_plot(
    entry: str,
    curve: list[list[float]],
    path: Path,
    metric: str | None = None,
    x_label: str | None = None,
) -> Path | None:
    """A training run's learning curve (episodic return over env steps, unless the run says otherwise)."""
    if not curve:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5, 2.6))
    ax.plot([p[0] for p in curve], [p[1] for p in curve], color="#1f5fa8")
    ax.set_xlabel(x_label or "env steps")
    ax.set_ylabel(metric or "episodic return")
    ax.set_title(entry, fontsize="medium")
    ax.grid(alpha=0.3)
    return _save(fig, path)
