"""``leaderboard.md``: the tables in GitHub markdown, with the plots linked as images.

Every text that comes from a store or a suite (entry, label, game and suite names, machine descriptions; a merged
store may come from anyone) is escaped (:func:`escape_markdown`): HTML tags and entities show as text, and ``](``,
backticks and pipes cannot make links, code or cells, as ``index.html`` and the viewer escape them too.
"""

from __future__ import annotations

import html
import urllib.parse
from collections.abc import Sequence
from pathlib import Path

from llm_gym.bench.render.tables import Table

SECTIONS = {
    "aggregate": "Comparisons: entries ranked only on the envs all of them played",
    "atari": "Atari",
    "openspiel": "OpenSpiel (opponent ladder)",
    "exact": "Exact values (small games against random)",
    "trace": "Trace",
    "training": "Training",
    "trajectories": "Trajectories",
}


def escape_markdown(text: str) -> str:
    """``text`` shown as it is in GitHub markdown, on one line: no HTML, link, code span or table cell made of it."""
    text = html.escape(" ".join(str(text).split()), quote=False)
    for special in ("\\", "`", "|"):
        text = text.replace(special, "\\" + special)
    return text.replace("](", "\\](")  # a link needs "](": "[0.88, 1.24]" stays as it reads


def _cell(text: str) -> str:
    return escape_markdown(text)


def _target(link: str) -> str:
    return urllib.parse.quote(link, safe="/.#-_~?=&")


def table_markdown(table: Table) -> str:
    lines = [f"### {escape_markdown(table.title)}", ""]
    if table.note:
        lines += [escape_markdown(table.note), ""]
    lines.append("| " + " | ".join(_cell(h) for h in table.header) + " |")
    lines.append("|" + "|".join(" --- " for _ in table.header) + "|")
    for i, row in enumerate(table.rows):
        cells = [
            " · ".join(f"[{_cell(name)}]({_target(href)})" for name, href in table.link_lists[(i, j)])
            if (i, j) in table.link_lists
            else f"[{_cell(c)}]({_target(table.links[(i, j)])})"
            if (i, j) in table.links
            else _cell(c)
            for j, c in enumerate(row)
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _image_grid(images: Sequence[str], columns: int) -> str:
    """Images in a table without a header text, ``columns`` to a row (GitHub shows them side by side)."""
    lines = ["|" + " |" * columns, "|" + " --- |" * columns]
    for start in range(0, len(images), columns):
        row = list(images[start : start + columns]) + [""] * (columns - len(images[start : start + columns]))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def render_markdown(header: str, tables: Sequence[Table], plots: dict[str, list[Path]], footer: str, out: Path) -> Path:
    parts = [header]
    for family, title in SECTIONS.items():
        chosen = [t for t in tables if t.family == family]
        if not chosen and not plots.get(family):
            continue
        parts.append(f"## {title}\n")
        images = [f"![{escape_markdown(plot.stem)}](plots/{_target(plot.name)})" for plot in plots.get(family, [])]
        if family == "training" and len(images) > 1:  # learning curves side by side, three to a row
            parts.append(_image_grid(images, 3))
        else:
            parts += [f"{image}\n" for image in images]
        parts += [table_markdown(t) for t in chosen]
    parts.append(footer)
    out.write_text("\n".join(parts))
    return out
