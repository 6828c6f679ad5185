"""The hooks a plugin can implement. Built-in agents use exactly these hooks, through the same entry points.

A plugin is a module listed under the ``llm_gym`` entry-point group of its distribution::

    [project.entry-points.llm_gym]
    my_agent = "my_package.plugin"

and implements any of the hooks below with ``@llm_gym.hookimpl``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    import typer

    from llm_gym.agent import Agent

PROJECT = "llm_gym"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def register_agents(register: Callable[[type[Agent]], None]) -> None:
    """Register training agents.

    Call ``register(AgentClass)`` once per agent; the class's ``name`` is what ``--agent`` takes. A second agent with
    a name already taken is reported by ``llm-gym plugins`` and ignored.
    """


@hookspec
def register_backends(register: Callable[[str, Callable[..., Any]], None]) -> None:
    """Register LM inference backends.

    Call ``register(name, factory)``; ``factory(model, **options)`` returns an object with the LM backend interface
    of :mod:`llm_gym.lm`. The name is what ``--backend`` takes.
    """


@hookspec
def register_commands(app: typer.Typer) -> None:
    """Add sub-commands to the ``llm-gym`` CLI with ``@app.command()``."""
