"""The options several commands share, declared once as ``Annotated`` aliases (huggingface_hub's ``hf`` style): the
flag, its short form and its help text read the same in every command that takes it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

AgentOption = Annotated[str | None, typer.Option("--agent", "-a", help="Agent name (see `llm-gym agents`).")]
EnvOption = Annotated[str | None, typer.Option("--env", "-e", help="Env id (see `llm-gym envs`).")]
SeedOption = Annotated[
    int | None, typer.Option("--seed", "-s", min=0, help="Seed, >= 0 (overrides the config's seed).")
]
ModelOption = Annotated[
    str | None, typer.Option("--model", "-m", help="Model for LM agents: smollm2-135m, an HF id or a local dir.")
]
BackendOption = Annotated[
    str | None, typer.Option("--backend", help="LM backend for LM agents: hf, openai, vllm (see `llm-gym plugins`).")
]
SetOption = Annotated[
    list[str] | None, typer.Option("--set", help="Override one config field: key=value (repeatable).")
]
ConfigOption = Annotated[Path | None, typer.Option("--config", help="TOML (or JSON) file of config fields.")]
EnvArgOption = Annotated[
    list[str] | None,
    typer.Option("--env-arg", help="Keyword argument for gym.make: key=value, value as JSON or text (repeatable)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for machines instead of a table.")]
MaxStepsOption = Annotated[
    int | None, typer.Option("--max-steps", min=1, help="Cut each episode after this many steps.")
]
TaskIdsOption = Annotated[
    str | None,
    typer.Option("--task-ids", help="Task ids FIRST-LAST: each in turn, or uniform draws when more than episodes."),
]
