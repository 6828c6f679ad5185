"""The ``llm-gym`` command: one module per sub-command, plus whatever plugins add through ``register_commands``.

Every mistake on the command line (an unknown sub-command or option, a bad option value, an ``LLMGymError``) ends
in one line on stderr and exit code 2; ``LLM_GYM_DEBUG=1`` shows the traceback instead.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import typer
import typer.core
import typer.main

from llm_gym import __version__
from llm_gym.cli import agents, bench, copy_policy, demos, envs, play, plot, plugins, select, serve, sweep, train
from llm_gym.cli.common import EXIT_USER_ERROR
from llm_gym.cli.help_format import reflow_commands
from llm_gym.commands import hide_flag_types
from llm_gym.errors import LLMGymError, suggest
from llm_gym.plugins import call_plugin, command_conflicts, get_plugin_manager

BUILTIN_COMMANDS = (envs, agents, plugins, train, sweep, select, play, demos, plot, bench, copy_policy, serve)

hide_flag_types()  # no `--help <bool>` in the help screens (llm_gym/commands.py says why)

# Typer's click exception classes (recent Typer versions ship their own copy of click, older ones use click).
_UsageError = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
_ClickException = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


class _Commands(typer.core.TyperGroup):
    """Typer's group with an unknown sub-command named with its close matches (as env and agent ids are)."""

    def resolve_command(self, ctx: typer.Context, args: list[str]) -> Any:
        name = str(args[0]) if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            known = self.list_commands(ctx)
            matches = suggest(name, known)
            hint = f"did you mean {', '.join(repr(m) for m in matches)}?" if matches else "see `llm-gym --help`"
            raise _UsageError(f"unknown command {name!r}; {hint}", ctx)
        return super().resolve_command(ctx, args)


def _command_names(app: typer.Typer) -> list[str]:
    names = [info.name or typer.main.get_command_name(info.callback.__name__) for info in app.registered_commands]
    return names + [
        info.name or getattr(info.typer_instance.info, "name", None) or "" for info in app.registered_groups
    ]


def build_app() -> typer.Typer:
    """A fresh Typer app with the built-in commands and every plugin's commands."""
    app = typer.Typer(
        name="llm-gym",
        help="Train language models to play games with reinforcement learning.",
        add_completion=False,
        pretty_exceptions_enable=False,
        cls=_Commands,
    )

    @app.callback(invoke_without_command=True)
    def root(
        ctx: typer.Context,
        version: bool = typer.Option(False, "--version", help="Print the llm-gym version and exit."),
    ) -> None:
        if version:
            print(f"llm-gym {__version__}")
            raise typer.Exit()
        if ctx.invoked_subcommand is None:
            print(ctx.get_help())
            raise typer.Exit()

    for module in BUILTIN_COMMANDS:
        module.register(app)
    manager = get_plugin_manager()
    command_conflicts.clear()
    taken = set(_command_names(app))
    for impl in manager.hook.register_commands.get_hookimpls():
        owner = manager.get_name(impl.plugin)
        # Each plugin adds to an app of its own, then only new names move over: it never sees, so can neither
        # replace nor remove, the built-in commands or another plugin's.
        staging = typer.Typer()
        error = call_plugin(impl.function, app=staging)
        if error is not None:  # a broken plugin command must not take the CLI down
            command_conflicts.append(f"register_commands of plugin {owner!r} failed: {error}; its commands ignored")
            continue
        if staging.registered_callback is not None:
            command_conflicts.append(f"register_commands: plugin {owner!r} set the app's callback; ignored")
        _move_new_commands(staging, app, taken, owner, command_conflicts)
    reflow_commands(app)
    return app


def _move_new_commands(staging: typer.Typer, app: typer.Typer, taken: set[str], owner: Any, out: list[str]) -> None:
    """Add what a plugin registered to ``app``, but for names already taken (a built-in, an earlier plugin's),
    which are reported."""
    for source, target in ((staging.registered_commands, app.registered_commands),
                           (staging.registered_groups, app.registered_groups)):  # fmt: skip
        for info in source:
            name = getattr(info, "name", None)
            if name is None and getattr(info, "callback", None) is not None:
                name = typer.main.get_command_name(info.callback.__name__)
            if name is None and getattr(info, "typer_instance", None) is not None:
                name = getattr(info.typer_instance.info, "name", None)
            if name in taken:
                out.append(f"register_commands: command {name!r} from plugin {owner!r} ignored; it is taken")
                continue
            target.append(info)
            if name:
                taken.add(name)


def main() -> None:
    """Entry point of the ``llm-gym`` script."""
    debug = os.environ.get("LLM_GYM_DEBUG") == "1"
    try:
        code = build_app()(prog_name="llm-gym", args=sys.argv[1:], standalone_mode=False)
    except _UsageError as exc:
        if debug:
            raise
        message = " ".join(exc.format_message().split())
        if "--help" not in message:
            message += f" (see `{exc.ctx.command_path if exc.ctx is not None else 'llm-gym'} --help`)"
        print(f"error: {message}", file=sys.stderr)
        sys.exit(EXIT_USER_ERROR)
    except LLMGymError as exc:  # raised outside a command's own handler (a plugin command, the app itself)
        if debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(EXIT_USER_ERROR)
    except typer.Abort:
        print("aborted", file=sys.stderr)
        sys.exit(1)
    except _ClickException as exc:
        print(f"error: {' '.join(exc.format_message().split())}", file=sys.stderr)
        sys.exit(exc.exit_code)
    sys.exit(code if isinstance(code, int) else 0)
