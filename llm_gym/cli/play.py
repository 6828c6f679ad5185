"""``llm-gym play``: play episodes with an agent (fresh or from a checkpoint) and report returns with a 95% CI."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Annotated, Any

import typer

from llm_gym.agent import EnvConfig, policy_env_kwargs, sampling_policy
from llm_gym.cli.checkpoint_settings import checkpoint_overrides
from llm_gym.cli.common import (
    ConfigSources,
    cli_errors,
    console,
    err_console,
    parse_env_args,
    print_json,
    resolve_config,
)
from llm_gym.cli.exact_report import check_exact_env, exact_report, play_exact, print_exact
from llm_gym.cli.options import (
    AgentOption,
    BackendOption,
    ConfigOption,
    EnvArgOption,
    EnvOption,
    JsonOption,
    MaxStepsOption,
    ModelOption,
    SeedOption,
    SetOption,
    TaskIdsOption,
)
from llm_gym.cli.play_progress import PlayProgress
from llm_gym.cli.play_report import print_episodes
from llm_gym.cli.task_report import episode_task_ids, has_outcomes, outcome, per_game
from llm_gym.envs.catalog import env_family, env_spec, evaluation_overrides, render_modes, reward_only_args
from llm_gym.envs.catalog import make as make_env
from llm_gym.envs.tasks import TaskRange
from llm_gym.errors import ConfigError, LLMGymError, UnknownNameError, UnsupportedEnvError
from llm_gym.plugins import get_agent
from llm_gym.runs import Run
from llm_gym.stats import mean_ci95
from llm_gym.training.checkpoints import load_policy
from llm_gym.training.evaluation import HELDOUT_SEED, Stopwatch, VideoWarning, run_episodes
from llm_gym.training.setting_checks import check_untrained_settings

DEFAULT_EPISODES, DEFAULT_NUM_ENVS = 5, 1
"""What play plays without --episodes / --num-envs (unset, so that --exact can refuse them when given)."""


@cli_errors
def play(
    env: EnvOption = None,
    agent: AgentOption = None,
    checkpoint: Annotated[Path | None, typer.Option("--checkpoint", "-c", help="Play a trained checkpoint.")] = None,
    episodes: Annotated[
        int | None, typer.Option("--episodes", "-n", min=1, help=f"Episodes to play [default: {DEFAULT_EPISODES}].")
    ] = None,
    seed: SeedOption = None,
    num_envs: Annotated[
        int | None,
        typer.Option("--num-envs", min=1, help=f"Envs stepped in lockstep (batched) [default: {DEFAULT_NUM_ENVS}]."),
    ] = None,
    max_steps: MaxStepsOption = None,
    video: Annotated[Path | None, typer.Option("--video", help="Record the first episode to this mp4.")] = None,
    model: ModelOption = None,
    backend: BackendOption = None,
    sets: SetOption = None,
    config_file: ConfigOption = None,
    env_args: EnvArgOption = None,
    as_json: JsonOption = False,
    task_ids: TaskIdsOption = None,
    opponent: Annotated[
        str | None, typer.Option("--opponent", help="OpenSpiel opponent: random or mcts (= --env-arg opponent=...).")
    ] = None,
    sample: Annotated[
        bool,
        typer.Option(
            "--sample",
            help="Sample each action from the policy's distribution (seeded by --seed) instead of taking the most "
            "likely one.",
        ),
    ] = False,
    exact: Annotated[
        bool,
        typer.Option(
            "--exact",
            help="Small OpenSpiel games: instead of playing episodes, walk every chance and random-opponent move and "
            "report the exact expected return, win/draw/loss, the worst case against an adversary (perfect "
            "information) or the exploitability (poker).",
        ),
    ] = False,
) -> None:
    """Play EPISODES episodes and print each return and the mean with a 95% confidence interval; per game, the
    wins, draws and losses with 95% intervals (OpenSpiel, Pong) and the mean score.

    A progress bar (episodes, steps/s, time left) shows on a terminal, never under --json. Every option is checked
    before a model loads.

    With --checkpoint, the agent and (unless --env is given) the env are the checkpoint's; --config, --set and
    --seed change how it plays, --model and --backend only where its weights can play that way. A checkpoint plays
    the held-out seeds bench plays (100,000,000 on) unless --seed says otherwise, never its training seeds.

    Play is greedy unless --sample: then a policy with a distribution over actions (the LM agents, nanogpt_ppo)
    samples from it, so greedy and sampled play of one checkpoint can be compared on the same seeds."""
    if video is not None:
        check_video_path(video)
    env_kwargs = parse_env_args(env_args)
    if opponent is not None:
        check_opponent(opponent, env, checkpoint)
        env_kwargs["opponent"] = opponent
    tasks = TaskRange.parse(task_ids) if task_ids is not None else None
    if not exact:  # everything about the env is checked before any model loads (a model may take 15 s)
        check_play_env(env or (_checkpoint_env(checkpoint) if checkpoint is not None else None), env_kwargs,
                       video, tasks)  # fmt: skip
    if exact:
        check_exact_options(video, tasks, max_steps, episodes, num_envs)
        exact_env = env or (_checkpoint_env(checkpoint) if checkpoint is not None else None)
        if exact_env is not None:
            check_exact_env(EnvConfig(exact_env, env_kwargs))  # before any model loads
    sources = ConfigSources(config_file, sets, model, backend, seed)
    if checkpoint is not None:
        if agent is not None:
            raise ConfigError("give --agent or --checkpoint, not both (a checkpoint knows its agent)")
        if env is not None:
            env_spec(env)
            check_same_action_set(checkpoint, EnvConfig(env, env_kwargs))
        overrides = checkpoint_overrides(checkpoint, sources)  # how the checkpoint plays: threads, quantize ...
        policy, agent_obj = load_policy(checkpoint, EnvConfig(env, env_kwargs) if env else None, overrides)
        agent_name, env_id = agent_obj.name, env or _checkpoint_env(checkpoint)
    else:
        if agent is None or env is None:
            raise ConfigError("play needs --agent NAME and --env ID (or --checkpoint DIR)")
        env_spec(env)
        agent_cls = get_agent(agent)
        config = resolve_config(agent_cls.Config, sources)
        check_untrained_settings(agent_cls, config)
        policy = agent_cls(config).policy(EnvConfig(env, env_kwargs))
        agent_name, env_id = agent, env
    if exact:  # walks the tree itself: the episode options below do not apply
        if sample:
            policy = sampling_policy(policy, agent_name)
        env_config = EnvConfig(env_id, {**policy_env_kwargs(policy), **env_kwargs})
        result = play_exact(policy, env_config, greedy=not sample, quiet=as_json, console=err_console)
        if as_json:
            print_json(exact_report(result, agent_name))
        else:
            print_exact(result, agent_name, console)
        return
    episodes, num_envs = episodes or DEFAULT_EPISODES, num_envs or DEFAULT_NUM_ENVS
    if sample:
        policy = sampling_policy(policy, agent_name)
    # A policy may carry the env arguments it was trained with (e.g. nanogpt_ppo's grid size); --env-arg wins.
    env_config = EnvConfig(env_id, {**policy_env_kwargs(policy), **env_kwargs})
    if checkpoint is not None:
        note_training_env_args_left_out(checkpoint, env_config)
    # A checkpoint plays held-out seeds, as bench does: seeds 0, 1, ... are the ones its training envs reset with.
    first_seed = seed if seed is not None else (HELDOUT_SEED if checkpoint is not None else 0)
    ids = episode_task_ids(tasks, episodes, first_seed) if tasks else None
    with warnings.catch_warnings(record=True) as caught, PlayProgress(episodes, err_console, quiet=as_json) as bar:
        warnings.simplefilter("always", VideoWarning)
        clock = Stopwatch()
        results = run_episodes(
            policy,
            env_config,
            episodes,
            seed=first_seed,
            num_envs=num_envs,
            max_steps=max_steps,
            video_path=video,
            task_ids=ids,
            on_step=bar.step,
            on_episode=bar.episode,
        )
        seconds = clock.elapsed
    for warning in caught:  # shown as they would have been; a video that was not written is not reported below
        warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)
    if any(issubclass(w.category, VideoWarning) for w in caught):
        video = None
    returns = [r.episode_return for r in results]
    mean, ci = mean_ci95(returns)
    steps = sum(r.length for r in results)
    report = {
        "agent": agent_name,
        "env_id": env_id,
        "episodes": [
            {
                "seed": r.seed,
                "return": r.episode_return,
                "length": r.length,
                "truncated": r.truncated,
                "invalid_actions": r.invalid_actions,
            }
            for r in results
        ],
        "mean_return": mean,
        "ci95": ci,
        "steps": steps,
        "seconds": seconds,
        "steps_per_second": steps / max(seconds, 1e-9),
        "video": str(video) if video else None,
        "sampled": sample,
    }
    if ids is not None:
        for row, task_id in zip(report["episodes"], ids, strict=True):
            row["task_id"] = task_id
    if ids is not None or has_outcomes(env_id):
        report["per_game"] = per_game(results, env_id)
        for row, result in zip(report["episodes"], results, strict=True):
            row["outcome"] = outcome(result, env_id) or ("cut" if has_outcomes(env_id) else None)
    if as_json:
        print_json(report)
        return
    print_episodes(report, console)
    if video:
        console.print(f"video: {video}")


def check_play_env(env_id: str | None, env_kwargs: dict[str, Any], video: Path | None, tasks: TaskRange | None) -> None:
    """Before any model loads: the env takes these ``--env-arg`` values (made once), the first and last of
    ``--task-ids`` (reset once each), and renders frames where ``--video`` asks for them."""
    if env_id is None:
        return
    env_spec(env_id)
    if video is not None and "rgb_array" not in render_modes(env_id):
        raise UnsupportedEnvError(f"{env_id} renders no frames, so it cannot record a video; drop --video")
    made = make_env(env_id, **env_kwargs)
    try:
        for task_id in sorted({tasks.first, tasks.last}) if tasks is not None else ():
            try:
                made.reset(seed=0, options={"task_id": task_id})
            except LLMGymError:
                raise
            except (ValueError, KeyError, IndexError) as exc:
                raise ConfigError(f"--task-ids {tasks.first}-{tasks.last}: {env_id} cannot play task {task_id} "
                                  f"({exc})") from exc  # fmt: skip
    finally:
        made.close()


def check_exact_options(
    video: Path | None, tasks: TaskRange | None, max_steps: int | None, episodes: int | None, num_envs: int | None
) -> None:
    """``--exact`` walks the whole game tree: options about played episodes have nothing to act on."""
    given_options = ((video, "--video"), (tasks, "--task-ids"), (max_steps, "--max-steps"), (episodes, "--episodes"),
                     (num_envs, "--num-envs"))  # fmt: skip
    for given, name in given_options:
        if given is not None:
            raise ConfigError(f"--exact walks every game instead of playing episodes: drop {name}")


OPPONENTS = ("random", "mcts")
"""What ``--opponent`` names (a Policy or a function opponent is for the Python API)."""


def check_opponent(opponent: str, env: str | None, checkpoint: Path | None) -> None:
    """``--opponent`` names a known opponent, on an OpenSpiel env (the checkpoint's, without ``--env``)."""
    if opponent not in OPPONENTS:
        raise UnknownNameError("opponent", opponent, OPPONENTS)
    env_id = env or (_checkpoint_env(checkpoint) if checkpoint is not None else None)
    if env_id is not None and env_family(env_id) != "openspiel":
        raise ConfigError(f"--opponent is for OpenSpiel envs; {env_id} has no opponent to choose: drop --opponent")


def check_video_path(video: Path) -> None:
    """A video goes into an existing, writable folder (nothing is created for it) under a file name."""
    folder = video.parent
    if video.is_dir():
        raise ConfigError(f"--video {video} is a folder; give a file name such as {video / 'episode.mp4'}")
    if video.exists() and not video.is_file():
        raise ConfigError(f"--video {video} is not a regular file (a device or a socket); give an .mp4 file name")
    if not folder.is_dir():
        raise ConfigError(f"--video {video}: the folder {folder} does not exist; create it first")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"--video {video}: the folder {folder} is not writable")


def check_same_action_set(checkpoint: Path, env: EnvConfig) -> None:
    """A policy acts on the action set it was trained on: refuse an env with another one (before any tensor
    shape error could say so less clearly)."""
    run, _ = Run.resolve_checkpoint(checkpoint, required=False)
    saved = run.read_config()
    if saved["env_id"] == env.env_id:
        return
    trained = make_env(saved["env_id"], **saved["env_kwargs"])
    target = make_env(env.env_id, **env.kwargs)
    try:
        if trained.action_space != target.action_space:
            raise UnsupportedEnvError(
                f"{checkpoint} was trained on {saved['env_id']} ({_actions(trained)}); {env.env_id} has "
                f"{_actions(target)}: a policy plays the action set it was trained on"
            )
    finally:
        trained.close()
        target.close()


def note_training_env_args_left_out(checkpoint: Path, played: EnvConfig) -> None:
    """Say which env arguments the checkpoint's run trained and evaluated with that this play leaves at the env's
    defaults: the run's own ``--env-arg`` values (``ball_trail``, the grid: what the policy sees; not those that
    change only the reward, such as reward shaping) and the family's training defaults its
    ``summary.json`` names (Atari: FIRE on reset, without which a policy that never had to serve may score 0;
    docs/guides/atari.md). Play itself stays as given: a checkpoint gets no argument a baseline beside it would not."""
    run, _ = Run.resolve_checkpoint(checkpoint, required=False)
    saved = run.read_config()
    summarised = run.read_summary().get("env_kwargs")  # the family's training defaults too, once finished
    trained = {**(saved.get("env_kwargs") or {}), **(summarised if isinstance(summarised, dict) else {})}
    # Not named: what every evaluation sets itself, and what changes only the reward (shaping is training's own;
    # a play reports the game's return without it).
    not_named = set(evaluation_overrides(saved["env_id"])) | reward_only_args(saved["env_id"])
    left_out = {k: v for k, v in trained.items() if k not in played.kwargs and k not in not_named}
    if left_out:
        args = " ".join(f"--env-arg {k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in left_out.items())
        them = "it" if len(left_out) == 1 else "them"
        err_console.print(
            f"note: {run.path} trained with {args}; this play leaves {them} at the env's defaults "
            f"(pass {them} to play as the run's own evaluations did)",
            markup=False,
            soft_wrap=True,
        )


def _actions(env: Any) -> str:
    space = env.action_space
    return f"{space.n} actions" if hasattr(space, "n") else f"a {type(space).__name__} action space"


def _checkpoint_env(checkpoint: Path) -> str:
    run, _ = Run.resolve_checkpoint(checkpoint, required=False)
    return run.read_config()["env_id"]


def register(app: typer.Typer) -> None:
    app.command("play")(play)
