"""The leaderboard's plots as SVG files (matplotlib, Agg; deterministic ids so regenerated files diff cleanly)."""

from __future__ import annotations

import math
from pathlib import Path

from llm_gym.bench.render.tables import FAMILY_NAMES
from llm_gym.bench.suite import HELDOUT
from llm_gym.bench.summary import Leaderboard
from llm_gym.training.curves import pyplot


def _pyplot():
    plt = pyplot("the leaderboard's plots", "bench")
    plt.rcParams["svg.hashsalt"] = "llm-gym-leaderboard"
    plt.rcParams["svg.fonttype"] = "none"  # text stays text: smaller files, searchable
    return plt


def _save(fig, path: Path) -> Path:
    fig.savefig(path, format="svg", bbox_inches="tight", metadata={"Date": None})
    # pyplot keeps every figure it made until closed: a leaderboard makes dozens
    pyplot("the leaderboard's plots", "bench").close(fig)
    return path


def _err(value: float, low: float, high: float) -> tuple[float, float]:
    if math.isnan(low):
        return 0.0, 0.0
    return max(0.0, value - low), max(0.0, high - value)


def aggregate_plot(board: Leaderboard, path: Path) -> Path | None:
    """One panel per ranked comparison (entries that played the same envs), in a grid of two columns: each entry's
    IQM of normalised scores on those envs with its stratified-bootstrap 95% CI. Entries of different panels are
    not compared."""
    shown = [c for c in board.comparisons if c.ranked and any(s.iqm.n for s in c.standings)]
    if not shown:
        return None
    plt = _pyplot()
    columns = min(2, len(shown))
    rows = math.ceil(len(shown) / columns)
    tallest = [max(len(c.standings) for c in shown[r * columns : (r + 1) * columns]) for r in range(rows)]
    fig, axes = plt.subplots(
        rows, columns, figsize=(7.0 * columns, sum(0.32 * n + 1.1 for n in tallest)), squeeze=False,
        gridspec_kw={"height_ratios": [0.32 * n + 1.1 for n in tallest]},
    )  # fmt: skip
    for ax, comparison in zip(axes.flat, shown, strict=False):
        standings = [s for s in comparison.standings if s.iqm.n][::-1]
        values = [s.iqm.value for s in standings]
        errors = list(zip(*[_err(s.iqm.value, s.iqm.low, s.iqm.high) for s in standings], strict=True))
        ax.errorbar(values, range(len(standings)), xerr=errors, fmt="o", color="#1f5fa8", capsize=3)
        ax.set_yticks(range(len(standings)), [s.entry for s in standings], fontsize="small")
        ax.set_ylim(-0.6, len(standings) - 0.4)
        ax.axvline(0.0, color="#999", linewidth=0.8)
        ax.set_title(comparison.describe(FAMILY_NAMES, most=2), fontsize="small", loc="left")
        ax.set_xlabel("IQM of normalised score (95% CI)", fontsize="small")
        ax.grid(axis="x", alpha=0.3)
    for ax in list(axes.flat)[len(shown) :]:
        ax.set_visible(False)
    fig.tight_layout()
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
