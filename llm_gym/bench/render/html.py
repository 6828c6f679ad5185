"""``index.html``: one static page (inline CSS, SVG plots beside it, no scripts, no external URLs)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from llm_gym.bench.render.markdown import SECTIONS
from llm_gym.bench.render.tables import Table

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ddd; margin-top: 2em; } h3 { margin-bottom: .3em; }
table { border-collapse: collapse; margin: .5em 0 1.5em; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; }
th { background: #f3f5f8; } tr:nth-child(even) td { background: #fafbfc; }
.note { color: #555; font-size: .92em; max-width: 70em; }
figure { margin: 1em 0; } figure img { max-width: 100%; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(360px, 1fr)); gap: .5em 1.5em; }
.grid figure { margin: 0; }
"""
GRIDS = ("training",)
"""Sections whose plots are laid out in a grid rather than one per row."""


def table_html(table: Table) -> str:
    out = [f"<h3>{html.escape(table.title)}</h3>"]
    if table.note:
        out.append(f'<p class="note">{html.escape(table.note)}</p>')
    out.append(f'<table data-family="{table.family}"><thead><tr>')
    out += [f"<th>{html.escape(h)}</th>" for h in table.header]
    out.append("</tr></thead><tbody>")
    for i, row in enumerate(table.rows):
        out.append("<tr>")
        for j, cell in enumerate(row):
            text = html.escape(cell)
            if (i, j) in table.links:
                text = f'<a href="{html.escape(table.links[(i, j)])}">{text}</a>'
            if (i, j) in table.link_lists:
                text = " · ".join(
                    f'<a href="{html.escape(href)}">{html.escape(name)}</a>' for name, href in table.link_lists[(i, j)]
                )
            out.append(f"<td>{text}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def render_html(
    title: str, intro: str, tables: Sequence[Table], plots: dict[str, list[Path]], footer: str, out: Path
) -> Path:
    body = [f"<h1>{html.escape(title)}</h1>", f'<p class="note">{html.escape(intro)}</p>']
    for family, section in SECTIONS.items():
        chosen = [t for t in tables if t.family == family]
        if not chosen and not plots.get(family):
            continue
        body.append(f"<h2>{html.escape(section)}</h2>")
        figures = [
            f'<figure><img src="plots/{html.escape(plot.name)}" alt="{html.escape(plot.stem)}"></figure>'
            for plot in plots.get(family, [])
        ]
        # Small plots of one kind (a learning curve per run) side by side, as many per row as the page holds.
        body.append(f'<div class="grid">{"".join(figures)}</div>' if family in GRIDS else "".join(figures))
        body += [table_html(t) for t in chosen]
    body.append(f'<p class="note">{html.escape(footer)}</p>')
    page = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )
    out.write_text(page)
    return out
