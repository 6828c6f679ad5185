"""``llm-gym train``: the one shape every agent is trained with."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from llm_gym.agent import EnvConfig
from llm_gym.cli.common import (
    AgentOption,
    BackendOption,
    ConfigOption,
    EnvArgOption,
    EnvOption,
    ModelOption,
    SeedOption,
    SetOption,
    cli_errors,
    console,
    parse_env_args,
    resolve_config,
)
from llm_gym.config import from_dict, to_dict
from llm_gym.envs.catalog import env_spec
from llm_gym.errors import ConfigError
from llm_gym.plugins import get_agent
from llm_gym.runs import Run


@cli_errors
def train(
    agent: AgentOption = None,
    env: EnvOption = None,
    model: ModelOption = None,
    backend: BackendOption = None,
    seed: SeedOption = None,
    sets: SetOption = None,
    config_file: ConfigOption = None,
    env_args: EnvArgOption = None,
    run_dir: Annotated[
        Path | None, typer.Option("--run-dir", help="Write the run here instead of runs/<name>.")
    ] = None,
    runs_root: Annotated[Path, typer.Option("--runs-root", help="Parent of new run directories.")] = Path("runs"),
    resume: Annotated[
        Path | None, typer.Option("--resume", help="Continue this run from its newest checkpoint.")
    ] = None,
) -> None:
    """Train AGENT on ENV into a run directory (config, TensorBoard, checkpoints, videos, summary.json)."""
    if resume is not None:
        run = Run.open(resume)
        saved = run.read_config()
        for given, key in ((agent, "agent"), (env, "env_id")):
            if given is not None and given != saved[key]:
                raise ConfigError(
                    f"{resume} was trained with {key}={saved[key]!r}, not {given!r}; drop the option to resume"
                )
        agent_cls = get_agent(saved["agent"])
        base = from_dict(agent_cls.Config, saved["config"], source=str(run.path / "config.json"))
        config = resolve_config(
            agent_cls.Config, config_file=config_file, sets=sets, model=model, seed=seed, backend=backend, base=base
        )
        run.update_config(to_dict(config))
        run.resumed_from = run.latest_checkpoint()
        env_config = EnvConfig(saved["env_id"], {**saved.get("env_kwargs", {}), **parse_env_args(env_args)})
        where = f"from {run.resumed_from}" if run.resumed_from else "from the start (no complete checkpoint yet)"
        console.print(f"resuming {run.path} {where}")
    else:
        if agent is None or env is None:
            raise ConfigError("train needs --agent NAME and --env ID (or --resume RUN_DIR)")
        agent_cls = get_agent(agent)
        env_spec(env)
        config = resolve_config(
            agent_cls.Config, config_file=config_file, sets=sets, model=model, seed=seed, backend=backend
        )
        env_config = EnvConfig(env, parse_env_args(env_args))
        run = Run.create(env, agent, to_dict(config), root=runs_root, path=run_dir, env_kwargs=env_config.kwargs)
        console.print(f"run directory: {run.path}")
    try:
        summary = agent_cls(config).train(env_config, run)
    finally:
        run.close()
    keys = ("env_steps", "episodes", "mean_return", "ci95", "best_eval_return")
    console.print({k: summary[k] for k in keys if k in summary})
    console.print(f"summary: {run.path / 'summary.json'}")


def register(app: typer.Typer) -> None:
    app.command("train")(train)
