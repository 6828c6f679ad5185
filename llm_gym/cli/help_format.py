"""Help screens that read well at 80 columns, whatever Typer version renders them.

Two things Typer 0.29's rich help gets wrong, and what this module does about each:

- Every flag shows a value type, ``--json <bool>`` and ``--help <bool>``, as if it took a value. Typer's rich
  renderer (``rich_utils._print_options_panel``) calls ``display_type_rich`` for every option, where its plain
  renderer (``get_help_record``) skips flags. :func:`hide_flag_types` makes ``display_type_rich`` give nothing for a
  flag or a counter (Typer's own convention elsewhere), so no flag shows a type.
- A docstring's line breaks inside a paragraph are kept after its first paragraph (``_fix_linebreaks`` joins the
  paragraphs without removing them), so a 120-column docstring is cut mid-sentence at 80. :func:`reflow` joins the
  lines of each paragraph; :func:`reflow_commands` applies it to the help of every command of an app.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import typer
import typer.core


def hide_flag_types() -> None:
    """Make the rich help show no value type beside a flag (``--json``, ``--help``); idempotent."""
    option = typer.core.TyperOption
    original = getattr(option, "display_type_rich", None)
    if original is None or getattr(original, "_hides_flags", False):
        return

    @functools.wraps(original)
    def display_type_rich(self: Any, ctx: Any) -> str | None:
        if getattr(self, "is_flag", False) or getattr(self, "count", False):
            return None
        return original(self, ctx)

    display_type_rich._hides_flags = True  # type: ignore[attr-defined]
    option.display_type_rich = display_type_rich  # type: ignore[method-assign]


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
