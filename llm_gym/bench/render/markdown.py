"""``leaderboard.md``: the tables in GitHub markdown, with the plots linked as images."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from llm_gym.bench.render.tables import Table

SECTIONS = {
    "aggregate": "Aggregate",
    "atari": "Atari",
    "openspiel": "OpenSpiel (opponent ladder)",
    "trace": "Trace",
    "training": "Training",
    "trajectories": "Trajectories",
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table_markdown(table: Table) -> str:
    lines = [f"### {table.title}", ""]
    if table.note:
        lines += [table.note, ""]
    lines.append("| " + " | ".join(_cell(h) for h in table.header) + " |")
    lines.append("|" + "|".join(" --- " for _ in table.header) + "|")
    for i, row in enumerate(table.rows):
        cells = [
            f"[{_cell(c)}]({table.links[(i, j)]})" if (i, j) in table.links else _cell(c) for j, c in enumerate(row)
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def render_markdown(header: str, tables: Sequence[Table], plots: dict[str, list[Path]], footer: str, out: Path) -> Path:
    parts = [header]
    for family, title in SECTIONS.items():
        chosen = [t for t in tables if t.family == family]
        if not chosen and not plots.get(family):
            continue
        parts.append(f"## {title}\n")
        for plot in plots.get(family, []):
            parts.append(f"![{plot.stem}](plots/{plot.name})\n")
        parts += [table_markdown(t) for t in chosen]
    parts.append(footer)
    out.write_text("\n".join(parts))
    return out
