"""Help screens that read well at 80 columns, whatever Typer version renders them.

Two things Typer 0.29's rich help gets wrong, and what this module does about each:

- Every flag shows a value type, ``--json <bool>`` and ``--help <bool>``, as if it took a value:
  :func:`llm_gym.commands.hide_flag_types` (beside the error policy, since commands outside the CLI use it too).
- A docstring's line breaks inside a paragraph are kept after its first paragraph (``_fix_linebreaks`` joins the
  paragraphs without removing them), so a 120-column docstring is cut mid-sentence at 80. :func:`reflow` joins the
  lines of each paragraph; :func:`reflow_commands` applies it to the help of every command of an app.
"""

from __future__ import annotations

import inspect

import typer


def reflow(doc: str | None) -> str | None:
    """``doc`` with the lines of each paragraph joined into one (paragraphs stay apart; a paragraph that starts
    with ``\\b`` keeps its lines, as click's convention says)."""
    if doc is None:
        return None
    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(p if p.startswith("\b") else " ".join(p.split()) for p in paragraphs)


def reflow_commands(app: typer.Typer) -> None:
    """Give every command of ``app`` that has no help of its own its docstring, reflowed."""
    for info in app.registered_commands:
        if info.help is None and info.callback is not None:
            info.help = reflow(inspect.getdoc(info.callback))
