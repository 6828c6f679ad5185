"""``llm-gym sweep``: one training run per (grid cell, seed), then mean ± 95% CI per cell."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer

from llm_gym.agent import EnvConfig
from llm_gym.atomic import write_json_atomic
from llm_gym.cli.common import ConfigSources, cli_errors, console, parse_env_args
from llm_gym.cli.common import resolve_config as resolve_agent_config
from llm_gym.cli.options import AgentOption, EnvArgOption, EnvOption, SetOption
from llm_gym.cli.train import check_env_arguments
from llm_gym.envs.catalog import env_spec
from llm_gym.errors import ConfigError
from llm_gym.plugins import get_agent
from llm_gym.sweeps import execute, grid, plan, results


@cli_errors
def sweep(
    agent: AgentOption = None,
    env: EnvOption = None,
    grid_items: Annotated[
        list[str] | None,
        typer.Option(
            "--grid", help="A config field and its values: key=v1,v2,v3 (repeatable; the cross product runs)."
        ),
    ] = None,
    seeds: Annotated[str, typer.Option("--seeds", help="Seeds of every cell: 0,1,2 or 0-4.")] = "0",
    sets: SetOption = None,
    env_args: EnvArgOption = None,
    runs_root: Annotated[Path, typer.Option("--runs-root", help="Parent of the sweep's directory.")] = Path("runs"),
    name: Annotated[
        str | None, typer.Option("--name", help="The sweep's directory under --runs-root (default: ENV__AGENT__sweep).")
    ] = None,
    parallel: Annotated[
        int | None, typer.Option("--parallel", min=1, help="Local runs at a time (default 1; not with --ray).")
    ] = None,
    ray: Annotated[bool, typer.Option("--ray", help="Run each (cell, seed) as a Ray task.")] = False,
    ray_address: Annotated[
        str | None, typer.Option("--ray-address", help="Join this Ray cluster (with --ray) instead of a local one.")
    ] = None,
    cpus_per_run: Annotated[
        int | None, typer.Option("--cpus-per-run", min=1, help="CPUs a Ray task reserves (with --ray; default 1).")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the runs and their state; run nothing.")] = False,
) -> None:
    """Train AGENT on ENV once per (grid cell, seed), each a normal run directory; a rerun skips finished runs and
    resumes killed ones. Ends with a table of mean ± 95% CI over seeds per cell (also results.csv / results.json)."""
    if agent is None or env is None:
        raise ConfigError("sweep needs --agent NAME and --env ID")
    if ray_address and not ray:
        raise ConfigError("--ray-address needs --ray")
    if cpus_per_run is not None and not ray:
        raise ConfigError(
            "--cpus-per-run is what a Ray task reserves; add --ray, or drop it (--parallel N: local runs)"
        )
    if parallel is not None and ray:
        raise ConfigError("--parallel is for local runs; with --ray, Ray runs as many at once as --cpus-per-run allows")
    agent_cls = get_agent(agent)
    env_spec(env)
    values = grid.parse_grid(grid_items or [], agent_cls.Config)
    seed_list = grid.parse_seeds(seeds)
    grid.check_run_count(values, seed_list)
    if name is not None and (not name.strip() or name in (".", "..") or "/" in name or "\\" in name or "\0" in name):
        raise ConfigError(f"--name {name!r} must be one folder name under --runs-root (no '/', not '.' or '..')")
    base = resolve_agent_config(agent_cls.Config, ConfigSources(sets=sets))
    overlap = sorted(set(values) & {item.partition("=")[0].strip() for item in sets or []})
    if overlap:
        raise ConfigError(f"{', '.join(overlap)} is both in --grid and --set; keep one")
    grid_cells = grid.cells(values)
    grid.check_cells(base, grid_cells)
    env_config = EnvConfig(env, parse_env_args(env_args))
    check_env_arguments(env_config)

    spec = plan.SweepSpec(agent, env, values, tuple(seed_list), tuple(sets or ()), tuple(env_args or ()))
    sweep_dir = runs_root / (name or f"{env}__{agent}__sweep")
    runs = plan.plan(spec, base, env_config.kwargs, grid_cells, sweep_dir)
    todo = [run for run in runs if run.state != "done"]
    counts = {state: sum(r.state == state for r in runs) for state in ("done", "resume", "new")}
    console.print(
        f"sweep {sweep_dir}: {len(grid_cells)} cells x {len(seed_list)} seeds = {len(runs)} runs "
        f"({counts['done']} finished, {counts['resume']} to resume, {counts['new']} new)",
        soft_wrap=True,
    )
    if dry_run:
        for run in runs:
            console.print(f"  {run.state:6} {run.name}", markup=False, soft_wrap=True)
        return
    sweep_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(sweep_dir / plan.SWEEP_FILE, dataclasses.asdict(spec))  # its fields, tuples as JSON lists

    def report(line: str) -> None:
        console.print(line, markup=False, soft_wrap=True)

    logs = sweep_dir / execute.LOGS_DIR
    if ray:
        outcomes = execute.run_ray(spec, todo, logs, cpus_per_run or 1, report, address=ray_address)
    else:
        outcomes = execute.run_local(spec, todo, logs, parallel or 1, report)

    keys = list(values) or ["cell"]
    rows = results.collect(runs, grid_cells)
    json_path, csv_path = results.write(rows, keys, sweep_dir)
    console.print(results.table(rows, keys, f"{agent} on {env}: mean ± 95% CI over seeds"))
    console.print(f"results: {csv_path} {json_path}", soft_wrap=True)
    failed = [o for o in outcomes if not o.ok]
    if failed:
        names = ", ".join(o.run.name for o in failed)
        console.print(
            f"{len(failed)} run(s) failed: {names}; see {logs}; rerun the same command to retry them", soft_wrap=True
        )
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("sweep")(sweep)
