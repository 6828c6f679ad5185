"""What every command shares, built in (``llm_gym.cli``) or added by a plugin (``register_commands``): an
:class:`LLMGymError` ends in one line on stderr and exit code 2, output goes to one console, and the help shows no
value type beside a flag.

It sits below the CLI so that a plugin's command (``llm-gym export``) or a module's own ``python -m`` entry
(``llm_gym.learning_demo``) behaves like the built-in commands without importing the CLI package.
"""

from __future__ import annotations

import errno
import functools
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer
import typer.core
from rich.console import Console

from llm_gym.atomic import error_for
from llm_gym.errors import LLMGymError

F = TypeVar("F", bound=Callable[..., Any])
console = Console()
err_console = Console(stderr=True)

EXIT_USER_ERROR = 2


def cli_errors(command: F) -> F:
    """Turn an :class:`LLMGymError` into one line on stderr and exit code 2 (``LLM_GYM_DEBUG=1``: the traceback)."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except LLMGymError as exc:
            if os.environ.get("LLM_GYM_DEBUG") == "1":
                raise
            print(f"error: {exc}", file=sys.stderr)
            raise typer.Exit(EXIT_USER_ERROR) from None
        except OSError as exc:
            # A write no llm_gym.atomic helper wraps (a library's own file): a full disk or a read-only place is
            # still one line naming the file, never a traceback.
            if os.environ.get("LLM_GYM_DEBUG") == "1" or exc.errno not in _DISK_ERRNOS:
                raise
            print(f"error: {error_for(exc.filename or 'a file', exc)}", file=sys.stderr)
            raise typer.Exit(EXIT_USER_ERROR) from None

    return wrapper  # type: ignore[return-value]


_DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG)


# Typer 0.29's rich help shows a value type beside every flag, ``--json <bool>`` and ``--help <bool>``, as if it
# took a value: its rich renderer (``rich_utils._print_options_panel``) calls ``display_type_rich`` for every option,
# where its plain renderer (``get_help_record``) skips flags. This makes ``display_type_rich`` give nothing for a flag
# or a counter (Typer's own convention elsewhere), so no flag shows a type.
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
