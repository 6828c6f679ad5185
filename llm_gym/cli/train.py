"""``llm-gym train``: the one shape every agent is trained with."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from llm_gym.agent import EnvConfig
from llm_gym.atomic import WriteError
from llm_gym.cli.common import ConfigSources, cli_errors, console, parse_env_args, resolve_config
from llm_gym.cli.options import (
    AgentOption,
    BackendOption,
    ConfigOption,
    EnvArgOption,
    EnvOption,
    ModelOption,
    SeedOption,
    SetOption,
)
from llm_gym.config import from_dict, to_dict
from llm_gym.envs.catalog import env_spec
from llm_gym.envs.catalog import make as make_env
from llm_gym.errors import CheckpointError, ConfigError, LLMGymError
from llm_gym.plugins import get_agent
from llm_gym.presets import get_preset
from llm_gym.runs import Run, verify_checkpoint
from llm_gym.training.checkpoints import load_problem
from llm_gym.training.policy_copy import refuse_resume_of_policy_copy
from llm_gym.training.setting_checks import field_settings

DEFAULT_RUNS_ROOT = Path("runs")
"""Where ``train`` puts a new run without ``--run-dir`` / ``--runs-root``."""


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
    run_dir_text: Annotated[
        str | None, typer.Option("--run-dir", metavar="<path>", help="Write the run here instead of runs/<name>.")
    ] = None,
    runs_root_text: Annotated[
        str | None, typer.Option("--runs-root", metavar="<path>", help="Parent of new run directories (default: runs).")
    ] = None,
    resume_text: Annotated[
        str | None, typer.Option("--resume", metavar="<path>", help="Continue this run from its newest checkpoint.")
    ] = None,
    preset_name: Annotated[
        str | None,
        typer.Option(
            "--preset",
            "-p",
            metavar="<name>",
            help="Start from one of the agent's named recipes (see `llm-gym agents AGENT`); --config and --set "
            "change it, and its env is used when --env is not given.",
        ),
    ] = None,
) -> None:
    """Train AGENT on ENV into a run directory (config, TensorBoard, checkpoints, videos, summary.json).

    --preset quick is the smallest honest run of a learning agent: minutes on a 2-core CPU, evaluated before and
    after on held-out seeds."""
    # Taken as text: typer turns '' into Path('.'), and `--run-dir ''` then trained into the current directory.
    run_dir, runs_root, resume = (
        _directory(option, text)
        for option, text in (("--run-dir", run_dir_text), ("--runs-root", runs_root_text), ("--resume", resume_text))
    )
    placed = [name for name, given in (("--run-dir", run_dir), ("--runs-root", runs_root)) if given is not None]
    if resume is not None and placed:
        raise ConfigError(f"--resume continues the run where it is; {' and '.join(placed)} would be ignored: drop it")
    if len(placed) == 2:
        raise ConfigError("give --run-dir (the run's own directory) or --runs-root (the parent of a new one), not both")
    if resume is not None and preset_name is not None:
        raise ConfigError("--resume continues the run with its own config; drop --preset (--set still applies)")
    sources = ConfigSources(config_file, sets, model, backend, seed)
    if resume is not None:
        agent_cls, config, env_config, run = _prepare_resume(resume, agent, env, sources, env_args)
        created = False
    else:
        if agent is None:
            raise ConfigError("train needs --agent NAME and --env ID (or --resume RUN_DIR)")
        agent_cls = get_agent(agent)
        preset = get_preset(agent_cls, preset_name) if preset_name is not None else None
        env = env or (preset.env if preset is not None else None)
        if env is None:
            raise ConfigError("train needs --agent NAME and --env ID (or --resume RUN_DIR)")
        env_spec(env)
        if preset is not None:
            preset.check_ready(agent)
        config = resolve_config(agent_cls.Config, sources, base=preset.apply(agent_cls) if preset is not None else None)
        preset_args = dict(preset.env_args) if preset is not None and preset.env == env else {}
        env_config = EnvConfig(env, {**preset_args, **parse_env_args(env_args)})
        check_env_arguments(env_config)
        created = run_dir is None or not run_dir.exists()  # (a new name under --runs-root is always new)
        run = Run.create(
            env, agent, to_dict(config), root=runs_root or DEFAULT_RUNS_ROOT, path=run_dir, env_kwargs=env_config.kwargs
        )
        console.print(f"run directory: {run.path}" + (f" (preset {preset_name})" if preset_name else ""))
    try:
        summary = agent_cls(config).train(env_config, run)
    except LLMGymError as exc:
        # Refused before it could learn anything (e.g. an agent that does not take this env): leave no run
        # directory behind, so the same command can be run again once fixed. A full disk is no refusal: the run
        # stays, to be resumed once there is room.
        refused = not isinstance(exc, WriteError)
        if refused and created and not run.checkpoints() and not (run.path / "summary.json").exists():
            run.close()
            shutil.rmtree(run.path, ignore_errors=True)
        raise
    finally:
        run.close()
    keys = ("env_steps", "episodes", "mean_return", "ci95", "best_eval_return")
    shown = [f"{k.replace('_', ' ')} {summary[k]:.4g}" for k in keys if isinstance(summary.get(k), (int, float))]
    if shown:  # one readable line, not a dict; summary.json has everything
        console.print(", ".join(shown))
    console.print(f"summary: {run.path / 'summary.json'}")


def _prepare_resume(
    resume: Path, agent: str | None, env: str | None, sources: ConfigSources, env_args: list[str] | None
) -> tuple[type, Any, EnvConfig, Run]:
    """Check everything a resume needs before changing anything in the run; config.json is rewritten last."""
    run = Run.open(resume, claim=True)  # one writer at a time: a second resume of the same run is refused
    with _given_back_if_refused(run):
        saved = run.read_config()
        for given, key in ((agent, "agent"), (env, "env_id")):
            if given is not None and given != saved[key]:
                raise ConfigError(
                    f"{resume} was trained with {key}={saved[key]!r}, not {given!r}; drop the option to resume"
                )
        agent_cls = get_agent(saved["agent"])
        base = from_dict(agent_cls.Config, saved["config"], source=str(run.path / "config.json"))
        config = resolve_config(agent_cls.Config, sources, base=base)
        # The config's own held fields first (the learner a curriculum wraps), then those inside a nested agent config
        # (the shapes in base_config), each as its own agent's fixed_on_resume names them.
        for nested in (False, True):
            before, after = (field_settings(agent_cls, c, "--set/--config", nested=nested) for c in (base, config))
            changed = [f for f, s in after.items() if s.held and f in before and s.value != before[f].value]
            if changed:
                shown = ", ".join(f"{f} ({before[f].value!r} -> {after[f].value!r})" for f in changed)
                raise ConfigError(
                    f"a resume cannot change {shown}: the checkpoints hold their shapes; start a new run to change them"
                )
        env_config = EnvConfig(saved["env_id"], {**saved["env_kwargs"], **parse_env_args(env_args)})
        check_env_arguments(env_config)
        run.resumed_from = _resumable_checkpoint(run, agent_cls(config), env_config)
        refuse_resume_of_policy_copy(run.resumed_from)
        if run.resumed_from is None and run.checkpoints():
            raise CheckpointError(f"no checkpoint of {run.path} verifies (see the notes above); nothing was changed")
        if to_dict(config) != saved["config"]:
            run.update_config(to_dict(config))
        where = f"from {run.resumed_from}" if run.resumed_from else "from the start (no complete checkpoint yet)"
        console.print(f"resuming {run.path} {where}")
        return agent_cls, config, env_config, run


@contextmanager
def _given_back_if_refused(run: Run) -> Iterator[None]:
    """A refused resume gives the run back (a caller in the same process may try again); an accepted one keeps it."""
    try:
        yield
    except BaseException:
        run.close()
        raise


def _resumable_checkpoint(run: Run, agent: Any, env: EnvConfig) -> Path | None:
    """The newest checkpoint that verifies and loads; each one skipped is a note on stderr saying why."""
    for _, path in reversed(run.checkpoints()):
        problem = verify_checkpoint(path) or load_problem(agent, env, path)
        if problem is None:
            return path
        print(f"note: skipping damaged checkpoint {path} ({problem})", file=sys.stderr)
    return None


def _directory(option: str, text: str | None) -> Path | None:
    if text is None:
        return None
    if not text.strip():
        raise ConfigError(f"{option} needs a directory name; it got an empty one")
    return Path(text)


def check_env_arguments(env: EnvConfig) -> None:
    """Make the env once with its arguments, so a bad ``--env-arg`` is reported before a run directory exists."""
    made = make_env(env.env_id, **env.kwargs)
    made.close()


def register(app: typer.Typer) -> None:
    app.command("train")(train)
