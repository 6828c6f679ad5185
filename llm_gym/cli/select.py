"""``llm-gym select``: choose the best of several runs on validation seeds, report it on test seeds it never saw."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from llm_gym.agent import EnvConfig, policy_env_kwargs
from llm_gym.atomic import write_json_atomic
from llm_gym.cli.checkpoint_settings import checkpoint_overrides
from llm_gym.cli.common import ConfigSources, cli_errors, console, err_console, parse_env_args, print_json
from llm_gym.cli.options import EnvArgOption, EnvOption, JsonOption, SetOption
from llm_gym.cli.play import check_same_action_set, note_training_env_args_left_out
from llm_gym.envs.catalog import env_spec
from llm_gym.errors import ConfigError
from llm_gym.runs import Run
from llm_gym.training.checkpoints import load_policy
from llm_gym.training.evaluation import run_episodes
from llm_gym.training.selection import (
    CRITERIA,
    LATEST,
    Candidate,
    Evaluation,
    SeedBlock,
    check_by,
    check_seed_blocks,
    find_candidates,
)
from llm_gym.training.selection import select as choose


@cli_errors
def select(
    runs: Annotated[
        list[Path], typer.Argument(help="Run directories, checkpoints, or directories of runs (a sweep's).")
    ],
    val_seed: Annotated[int, typer.Option("--val-seed", min=0, help="First validation seed.")] = 10_000,
    val_episodes: Annotated[int, typer.Option("--val-episodes", min=1, help="Validation games per candidate.")] = 8,
    test_seed: Annotated[int, typer.Option("--test-seed", min=0, help="First test seed.")] = 100,
    test_episodes: Annotated[int, typer.Option("--test-episodes", min=1, help="Test games of the chosen run.")] = 8,
    test_all: Annotated[
        bool, typer.Option("--test-all", help="Also play every other candidate on the test seeds.")
    ] = False,
    by: Annotated[
        str,
        typer.Option(
            "--by",
            help=f"Rank the validation games by their {' or '.join(CRITERIA)}: median ignores one outlying game.",
        ),
    ] = "mean",
    checkpoint_name: Annotated[
        str,
        typer.Option(
            "--checkpoint-name", help="Which checkpoint of each run: latest (newest that verifies), best, step_N."
        ),
    ] = LATEST,
    env: EnvOption = None,
    env_args: EnvArgOption = None,
    sets: SetOption = None,
    num_envs: Annotated[int, typer.Option("--num-envs", min=1, help="Envs stepped in lockstep (batched).")] = 8,
    max_steps: Annotated[
        int | None, typer.Option("--max-steps", min=1, help="Cut each game after this many steps.")
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Also write the report to this JSON file.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Play every run greedily on the same validation games, choose the highest mean (or --by median) return, and
    play the chosen run on test games disjoint from them: its test score is the one to report (the best validation
    score of several runs overstates what the chosen run does on new games; --test-all shows by how much).

    Each candidate plays as `llm-gym play --checkpoint` would (the same --env, --env-arg, --set and --max-steps for
    all of them), so the chosen run's test score is what that command gives on the test seeds."""
    validation, test = SeedBlock(val_seed, val_episodes), SeedBlock(test_seed, test_episodes)
    check_by(by)  # before anything is loaded
    check_seed_blocks(validation, test)
    if out is not None and out.suffix.lower() != ".json":
        raise ConfigError(f"--out must name a .json file, got {str(out)!r}")
    candidates = find_candidates(runs, checkpoint_name)
    env_kwargs = parse_env_args(env_args)
    env_id = env or _common_env(candidates)
    if env is not None:
        env_spec(env)
        for candidate in candidates:
            check_same_action_set(candidate.played, EnvConfig(env, env_kwargs))
    sources = ConfigSources(sets=sets)
    overrides = {c.label: checkpoint_overrides(c.played, sources) for c in candidates}  # all refusals first
    noted: set[str] = set()

    def play(candidate: Candidate, block: SeedBlock) -> list[float]:
        policy, _ = load_policy(candidate.played, EnvConfig(env_id, env_kwargs), overrides[candidate.label])
        # As in `play`: the env arguments a policy carries (nanogpt_ppo's grid) apply, --env-arg wins.
        played = EnvConfig(env_id, {**policy_env_kwargs(policy), **env_kwargs})
        if candidate.label not in noted:
            noted.add(candidate.label)
            note_training_env_args_left_out(candidate.played, played)
        results = run_episodes(policy, played, block.episodes, seed=block.first, num_envs=num_envs, max_steps=max_steps)
        return [r.episode_return for r in results]

    def progress(stage: str, candidate: Candidate, result: Evaluation) -> None:
        if not as_json:
            err_console.print(
                f"{stage:10s} {candidate.label}: {result.mean:.2f} ± {result.ci95:.2f}", markup=False, soft_wrap=True
            )

    selection = choose(candidates, validation, test, play, test_all=test_all, on_result=progress, by=by)
    report = {"env_id": env_id, "env_kwargs": env_kwargs, "max_steps": max_steps, **selection.as_dict()}
    if out is not None:
        write_json_atomic(out, report)
    if as_json:
        print_json(report)
        return
    _print_table(report, env_id, validation, test)
    if out is not None:
        console.print(f"report: {out}", markup=False)


def _common_env(candidates: list[Candidate]) -> str:
    """The env every candidate trained on; candidates of different envs need --env to be compared on one."""
    envs = {c.label: Run.open(c.run).read_config()["env_id"] for c in candidates}
    if len(set(envs.values())) > 1:
        listed = ", ".join(f"{label}: {env_id}" for label, env_id in envs.items())
        raise ConfigError(f"the runs trained on different envs ({listed}); pass --env ID to play them all on one")
    return next(iter(envs.values()))


def _print_table(report: dict[str, Any], env_id: str, validation: SeedBlock, test: SeedBlock) -> None:
    def cell(result: dict[str, Any] | None) -> str:
        if result is None:
            return "-"
        return f"{result['mean_return']:.2f} ± {result['ci95']:.2f}"

    table = Table("", "candidate", f"validation ({validation})", f"test ({test})", title=f"select on {env_id}")
    table.columns[1].overflow = "fold"  # a label is a path: folded, never cut
    for row in report["candidates"]:
        table.add_row("*" if row["chosen"] else "", row["label"], cell(row["validation"]), cell(row["test"]))
    console.print(table)
    chosen = report["chosen_test"]
    console.print(
        f"chosen (by validation {report['chosen_by']}): {report['chosen']}; test mean return "
        f"{chosen['mean_return']:.2f} ± {chosen['ci95']:.2f} (95% CI, n={len(chosen['returns'])}): "
        "the score to report",
        markup=False,
        soft_wrap=True,
    )
    tested = [row["test"] for row in report["candidates"] if row["test"] is not None]
    if len(tested) == len(report["candidates"]):
        blind = sum(r["mean_return"] for r in tested) / len(tested)
        console.print(f"a run picked blindly: {blind:.2f} on the test seeds on average", markup=False)


def register(app: typer.Typer) -> None:
    app.command("select")(select)
