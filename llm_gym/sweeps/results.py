"""A sweep's results: per cell, the mean and 95% confidence interval over its seeds of what each run's
``summary.json`` reports (the final greedy evaluation's game score and return, the last training episodes' return),
as a rich table and as ``results.csv`` / ``results.json`` in the sweep directory."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from llm_gym.atomic import write_json_atomic
from llm_gym.runs import read_summary
from llm_gym.stats import mean_ci95
from llm_gym.sweeps.grid import Cell
from llm_gym.sweeps.plan import PlannedRun

METRICS = (
    ("eval_score", "final_eval_score", "greedy eval score"),
    ("eval_return", "final_eval_return", "greedy eval return"),
    ("eval_sampled_score", "final_eval_sampled_score", "sampled eval score"),
    ("train_return", "mean_return", "train return (last rollouts)"),
)
"""(column, summary.json key, heading): what the table reports per cell. The evaluation is the run's last greedy
evaluation (its held-out evaluation seeds) and, for agents that play one (ppo_lora), the sampled evaluation beside it;
the training return is the agent's mean over its last rollouts."""


def collect(runs: Sequence[PlannedRun], grid_cells: Sequence[Cell]) -> list[dict[str, Any]]:
    """One row per cell: its values, the seeds with a summary, and per metric the per-seed values, mean and CI."""
    rows = []
    for cell in grid_cells:
        summaries = {}
        for run in (r for r in runs if r.cell == cell):
            summary = read_summary(run.path)
            if summary:
                summaries[run.seed] = summary
        row: dict[str, Any] = {"cell": cell.label, **cell.as_dict(), "seeds": sorted(summaries)}
        for column, key, _ in METRICS:
            values = [float(s[key]) for _, s in sorted(summaries.items()) if _is_number(s.get(key))]
            mean, ci = mean_ci95(values)
            row[column] = {"values": values, "mean": _or_none(mean), "ci95": _or_none(ci)}
        rows.append(row)
    return rows


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not math.isnan(value)


def _or_none(value: float) -> float | None:
    return None if math.isnan(value) else value


def write(rows: Sequence[dict[str, Any]], keys: Sequence[str], sweep_dir: Path) -> tuple[Path, Path]:
    """``results.json`` (every row with its per-seed values) and ``results.csv`` (one line per cell: the grid's
    values, n, and mean / ci95 per metric). Returns their paths."""
    json_path, csv_path = sweep_dir / "results.json", sweep_dir / "results.csv"
    write_json_atomic(json_path, list(rows))
    header = [*keys, "n_seeds"] + [f"{column}_{part}" for column, _, _ in METRICS for part in ("mean", "ci95", "n")]
    tmp = csv_path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        for row in rows:
            line = [json.dumps(row[k]) if isinstance(row[k], list) else row[k] for k in keys]
            line.append(len(row["seeds"]))
            for column, _, _ in METRICS:
                stat = row[column]
                line += [_cell_number(stat["mean"]), _cell_number(stat["ci95"]), len(stat["values"])]
            writer.writerow(line)
    tmp.replace(csv_path)
    return json_path, csv_path


def _cell_number(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


def table(rows: Sequence[dict[str, Any]], keys: Sequence[str], title: str) -> Table:
    """The rich table: one line per cell, ``mean ± ci95 (n)`` per metric that any run reported."""
    out = Table(title=title)
    for key in keys:
        out.add_column(key)
    out.add_column("seeds")
    # Only the metrics some run reported (an agent without evaluations has no evaluation columns).
    shown = [(c, h) for c, _, h in METRICS if any(row[c]["values"] for row in rows)]
    for _, heading in shown:
        out.add_column(heading, justify="right")
    for row in rows:
        stats = [_format(row[column]) for column, _ in shown]
        out.add_row(*(str(row[k]) for k in keys), ",".join(map(str, row["seeds"])) or "-", *stats)
    return out


def _format(stat: dict[str, Any]) -> str:
    if stat["mean"] is None:
        return "-"
    n = len(stat["values"])
    if stat["ci95"] is None:
        return f"{stat['mean']:.2f} (n={n})"
    return f"{stat['mean']:.2f} ± {stat['ci95']:.2f} (n={n})"
