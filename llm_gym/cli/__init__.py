"""The ``llm-gym`` command: one module per sub-command, plus whatever plugins add through ``register_commands``."""

from __future__ import annotations

import sys

import typer

from llm_gym.cli import agents, bench, envs, play, plugins, train
from llm_gym.cli.common import err_console

BUILTIN_COMMANDS = (envs, agents, plugins, train, play, bench)


def build_app() -> typer.Typer:
    """A fresh Typer app with the built-in commands and every plugin's commands."""
    from llm_gym.plugins import get_plugin_manager

    app = typer.Typer(
        name="llm-gym",
        help="Train language models to play games with reinforcement learning.",
        add_completion=False,
        pretty_exceptions_enable=False,
    )

    @app.callback(invoke_without_command=True)
    def root(
        ctx: typer.Context,
        version: bool = typer.Option(False, "--version", help="Print the llm-gym version and exit."),
    ) -> None:
        if version:
            from llm_gym import __version__

            print(f"llm-gym {__version__}")
            raise typer.Exit()
        if ctx.invoked_subcommand is None:
            print(ctx.get_help())
            raise typer.Exit()

    for module in BUILTIN_COMMANDS:
        module.register(app)
    manager = get_plugin_manager()
    for impl in manager.hook.register_commands.get_hookimpls():
        try:
            impl.function(app=app)
        except Exception as exc:  # a broken plugin command must not take the CLI down
            err_console.print(f"plugin {manager.get_name(impl.plugin)!r} failed to add commands: {exc}", markup=False)
    return app


def main() -> None:
    """Entry point of the ``llm-gym`` script."""
    build_app()(prog_name="llm-gym", args=sys.argv[1:])
