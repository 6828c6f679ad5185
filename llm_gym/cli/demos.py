"""``llm-gym demos``: play episodes with any policy (or, on ``Trace-v0``, ground truth) and write every decision as
a chat-format JSONL line (:mod:`llm_gym.demos.format`): the messages the LM agents would see and the answer."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any

import gymnasium as gym
import typer

from llm_gym import __version__
from llm_gym.agent import EnvConfig, Policy, policy_env_kwargs, sampling_policy
from llm_gym.cli.checkpoint_settings import checkpoint_overrides
from llm_gym.cli.common import ConfigSources, cli_errors, console, parse_env_args, print_json, resolve_config
from llm_gym.cli.options import (
    BackendOption,
    ConfigOption,
    EnvArgOption,
    EnvOption,
    JsonOption,
    MaxStepsOption,
    ModelOption,
    SetOption,
    TaskIdsOption,
)
from llm_gym.cli.task_report import episode_task_ids
from llm_gym.config import parse_assignments, to_dict
from llm_gym.demos.record import Answerer, DemoSummary, record_demos, trace_expected_stdout, trace_worked_answer
from llm_gym.demos.tree import record_demo_tree
from llm_gym.envs.catalog import env_family, env_ids, env_spec
from llm_gym.envs.catalog import make as make_env
from llm_gym.envs.tasks import TaskRange
from llm_gym.errors import ConfigError, UnsupportedEnvError
from llm_gym.plugins import get_agent
from llm_gym.stats import mean_ci95
from llm_gym.training.checkpoints import load_policy
from llm_gym.training.setting_checks import check_untrained_settings

DEFAULT_EPISODES = 10
"""``--episodes`` when not given."""

GROUND_TRUTH = "ground_truth"
"""The ``--agent`` of Trace demos from the generator's ground truth (the default on ``Trace-v0``)."""


@cli_errors
def demos(
    env: EnvOption = None,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            "-a",
            help="Agent name (scripted, mcts, random, lm, ...) or a checkpoint/run directory; on Trace-v0 the "
            "default is ground_truth (the expected stdout).",
        ),
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="The JSONL file to write.")] = None,
    episodes: Annotated[
        int | None, typer.Option("--episodes", "-n", min=1, help="Episodes to play (default 10).")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", "-s", min=0, help="Episode k resets with seed + k.")] = 0,
    max_steps: MaxStepsOption = None,
    num_envs: Annotated[
        int | None, typer.Option("--num-envs", min=1, help="Envs stepped in lockstep (batched; default 1).")
    ] = None,
    task_ids: TaskIdsOption = None,
    append: Annotated[bool, typer.Option("--append", help="Add to an existing --out file.")] = False,
    all_replies: Annotated[
        bool,
        typer.Option(
            "--all-replies",
            help="Walk the game tree instead of playing --episodes: the agent in every seat against every legal "
            "opponent move, one line per distinct decision (small deterministic turn-based OpenSpiel games).",
        ),
    ] = False,
    all_best: Annotated[
        bool,
        typer.Option(
            "--all-best",
            help="With --all-replies, also walk every move the agent values as highly as its own (the solver's "
            "ties): the positions a learner that plays another best move reaches are in the file too.",
        ),
    ] = False,
    sample: Annotated[
        bool,
        typer.Option(
            "--sample",
            help="Sample each action from the policy's distribution (seeded by --seed) instead of taking the most "
            "likely one: varied demonstrations from one checkpoint.",
        ),
    ] = False,
    explore: Annotated[
        float,
        typer.Option(
            "--explore",
            min=0.0,
            max=0.99,
            help="With this probability per decision, play a uniformly random legal action instead of the agent's "
            "(seeded by --seed) while the line keeps the agent's answer: the agent labels positions a learner "
            "that strays from it reaches (noise injection). Returns are those of the play that happened.",
        ),
    ] = 0.0,
    model: ModelOption = None,
    backend: BackendOption = None,
    sets: SetOption = None,
    config_file: ConfigOption = None,
    env_args: EnvArgOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write demonstrations: one JSONL line per decision with the exact chat messages the LM agents see and the
    answer (the action's name as score mode rates it; Trace: the expected stdout), seeds and provenance.

    The policy plays greedily unless --sample (the LM agents, nanogpt_ppo); every line's source says which."""
    if env is None or out is None:
        raise ConfigError("demos needs --env ID and --out FILE.jsonl (and --agent NAME or a checkpoint directory)")
    env_spec(env)
    if out.is_dir():
        raise ConfigError(f"--out {out} is a folder; give a file name such as {out / 'demos.jsonl'}")
    if out.exists() and not append:
        raise ConfigError(f"--out {out} exists; pass --append to add to it, or choose another file")
    env_kwargs = parse_env_args(env_args)
    agent = agent or (GROUND_TRUTH if env_family(env) == "trace" else None)
    if agent is None:
        raise ConfigError("demos needs --agent NAME (scripted, mcts, random, lm, ...) or a checkpoint directory")
    if all_best and not all_replies:
        raise ConfigError("--all-best widens the --all-replies walk; add --all-replies")
    if all_replies:
        _check_tree_options(
            episodes=episodes, max_steps=max_steps, num_envs=num_envs, task_ids=task_ids, explore=explore or None
        )
    episodes = DEFAULT_EPISODES if episodes is None else episodes
    tasks = episode_task_ids(TaskRange.parse(task_ids), episodes, seed) if task_ids is not None else None

    sources = ConfigSources(config_file, sets, model, backend, seed)
    policy, source, env_kwargs = _source(agent, env, env_kwargs, sources, sample)
    if sample and policy is not None:  # ground truth refused --sample in _source
        policy = sampling_policy(policy, source["agent"])
    if explore:
        if policy is None:
            raise ConfigError("--explore plays random actions between an agent's answers; ground truth has none")
        source["explore"] = explore
    env_config = EnvConfig(env, env_kwargs)
    _check_text_env(env_config)
    if all_replies:
        if policy is None:
            raise ConfigError("--all-replies walks an OpenSpiel game with an agent; it takes no ground truth")
        summary = record_demo_tree(policy, env_config, out, source=source, seed=seed, all_best=all_best)
        _report(summary, source, env_config, as_json)
        return
    summary = record_demos(
        policy, env_config, episodes, out, source=source, seed=seed, num_envs=num_envs or 1, max_steps=max_steps,
        task_ids=tasks, ground_truth=_answerer(source) if policy is None else None, explore=explore,
    )  # fmt: skip
    _report(summary, source, env_config, as_json)


def _answerer(source: dict[str, Any]) -> Answerer:
    return trace_worked_answer if source["config"].get("worked") else trace_expected_stdout


def _check_tree_options(**given: object) -> None:
    """``--all-replies`` plays every path of the game to its end once: options that shape played episodes do not
    apply, and are refused rather than ignored."""
    named = [f"--{name.replace('_', '-')}" for name, value in given.items() if value is not None]
    if named:
        verb, them = ("does", "it") if len(named) == 1 else ("do", "them")
        raise ConfigError(
            f"--all-replies walks every game path once to its end; {', '.join(named)} {verb} not apply: drop {them}"
        )


def _source(
    agent: str, env: str, env_kwargs: dict[str, Any], sources: ConfigSources, sample: bool
) -> tuple[Policy | None, dict[str, Any], dict[str, Any]]:
    """(the policy or None for ground truth, the provenance every line carries, the env arguments to play with)."""
    base = {"checkpoint": None, "sampled": sample, "llm_gym_version": __version__}
    if agent == GROUND_TRUTH:
        provenance, env_kwargs = _ground_truth(env, env_kwargs, sources, sample)
        return None, {**provenance, **base}, env_kwargs
    directory = Path(agent)
    if directory.is_dir():
        # As `play --checkpoint` takes them; the played config goes into every line's provenance. Sampled play
        # draws from --seed, greedy play keeps the saved config's seed.
        overrides = checkpoint_overrides(directory, sources if sample else dataclasses.replace(sources, seed=None))
        policy, owner = load_policy(directory, EnvConfig(env, env_kwargs), overrides)
        source = {"agent": owner.name, "config": to_dict(owner.config), **base, "checkpoint": str(directory)}
        return policy, source, {**policy_env_kwargs(policy), **env_kwargs}
    if "/" in agent or agent.startswith("."):
        raise ConfigError(f"--agent {agent}: no such checkpoint or run directory")
    agent_cls = get_agent(agent)
    config = resolve_config(agent_cls.Config, sources)
    check_untrained_settings(agent_cls, config)
    policy = agent_cls(config).policy(EnvConfig(env, env_kwargs))
    return policy, {"agent": agent, "config": to_dict(config), **base}, {**policy_env_kwargs(policy), **env_kwargs}


def _ground_truth(
    env: str, env_kwargs: dict[str, Any], sources: ConfigSources, sample: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the provenance of ground-truth demos, the env arguments), after refusing what they cannot take."""
    if env_family(env) != "trace":
        raise UnsupportedEnvError(f"ground truth demos come from Trace-v0's generator, not {env}; use --agent NAME")
    if sample:
        raise ConfigError("ground_truth answers with the expected stdout, there is nothing to sample: drop --sample")
    settings = parse_assignments(sources.sets or [], what="--set")
    if set(settings) - {"level", "worked"} or sources.config_file or sources.model or sources.backend:
        raise ConfigError("ground_truth takes only --set level=N (or --env-arg level=N) and --set worked=true")
    if "level" in settings:
        try:
            env_kwargs = {**env_kwargs, "level": int(settings["level"])}
        except ValueError:
            raise ConfigError(f"--set level={settings['level']!r} is not a Trace level (1, 2, 3 ...)") from None
    worked = settings.get("worked", "false").lower()
    if worked not in ("true", "false"):
        raise ConfigError(f"--set worked={settings['worked']!r}: give true or false")
    config: dict[str, Any] = {"level": env_kwargs.get("level"), "answer": "the expected stdout, run in the sandbox"}
    if worked == "true":
        if env_kwargs.get("dataset") or env_kwargs.get("level") != 1:
            raise ConfigError(
                "--set worked=true writes worked solutions of straight-line programs, Trace level 1 only: add "
                "--env-arg level=1 (and no dataset)"
            )
        config.update(worked=True, answer="a worked solution in <think>...</think>, then the expected stdout")
    return {"agent": GROUND_TRUTH, "config": config}, env_kwargs


def _check_text_env(env: EnvConfig) -> None:
    """Demos are text: a vision env is refused with the text views of the same game."""
    made = make_env(env.env_id, **env.kwargs)
    try:
        space = made.observation_space
    finally:
        made.close()
    if not isinstance(space, gym.spaces.Text):
        views = [i for i in env_ids() if "-vision-" in env.env_id and i.startswith(env.env_id.split("-vision-")[0])]
        text_views = [i for i in views if i.endswith(("-text-v0", "-ascii-v0"))]
        hint = f"use {' or '.join(text_views)}" if text_views else "use a text env"
        raise UnsupportedEnvError(
            f"{env.env_id} observes {type(space).__name__}, not text; demos hold text prompts only: {hint}"
        )


def _report(summary: DemoSummary, source: dict[str, Any], env: EnvConfig, as_json: bool) -> None:
    mean_return, return_ci = mean_ci95(summary.returns)
    mean_score, score_ci = mean_ci95(summary.scores)
    report = {
        "out": str(summary.path),
        "env_id": env.env_id,
        "env_args": dict(env.kwargs),
        "agent": source["agent"],
        "checkpoint": source["checkpoint"],
        "sampled": source["sampled"],
        "episodes": summary.episodes,
        "decisions": summary.decisions,
        "mean_return": mean_return,
        "return_ci95": return_ci,
        "mean_score": mean_score,
        "score_ci95": score_ci,
        "mean_length": sum(summary.lengths) / max(1, len(summary.lengths)),
        "truncated_episodes": summary.truncated,
        "decisions_without_a_legal_name": summary.unnamed,
        "explored_decisions": summary.explored,
    }
    if summary.worst_return_by_seat:  # --all-replies: the agent's return against the best opponent, per seat
        report["worst_return_by_seat"] = {str(seat): r for seat, r in sorted(summary.worst_return_by_seat.items())}
    if as_json:
        print_json(report)
        return
    console.print(
        f"{summary.decisions} decisions from {summary.episodes} episodes of {source['agent']}"
        f"{' (sampled)' if source['sampled'] else ''} on {env.env_id} "
        f"-> {summary.path}\nepisode return {mean_return:.2f} ± {return_ci:.2f}, game score {mean_score:.2f} ± "
        f"{score_ci:.2f} (95% CI), {summary.truncated} cut at --max-steps"
        + (f"; {summary.unnamed} illegal actions left out" if summary.unnamed else "")
        + (f"; a random action played after {summary.explored} of them (--explore)" if summary.explored else "")
        + _worst_line(summary.worst_return_by_seat)
    )


def _worst_line(worst: dict[int, float]) -> str:
    """The tree walk's worst complete game per seat: over every reply, the agent's return against the best opponent."""
    if not worst:
        return ""
    seats = ", ".join(f"seat {seat} {r:+.2f}" for seat, r in sorted(worst.items()))
    return f"\nworst game over every opponent reply (the return against the best opponent): {seats}"


def register(app: typer.Typer) -> None:
    app.command("demos")(demos)
