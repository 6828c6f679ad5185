"""nanogpt_ppo end to end: a smoke train on the real ALE env, exact resume, masks on a text env, the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from llm_gym.agent import EnvConfig
from llm_gym.agents.nanogpt_ppo import NanoGPTPPOAgent, NanoGPTPPOConfig
from llm_gym.agents.nanogpt_ppo.policy import WEIGHTS_FILE
from llm_gym.agents.nanogpt_ppo.testing import TINY_SETTINGS
from llm_gym.callbacks import Callback, StopAfterSteps
from llm_gym.config import to_dict
from llm_gym.envs.spaces import text_space
from llm_gym.runs import Run
from llm_gym.training.checkpoints import load_policy
from llm_gym.training.evaluation import run_episodes

TINY = TINY_SETTINGS


def make_run(tmp_path: Path, env_id: str, config: NanoGPTPPOConfig, name: str = "run") -> Run:
    return Run.create(env_id, "nanogpt_ppo", to_dict(config), path=tmp_path / name)


class Recorder(Callback):
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def on_training_start(self, env_id: str, config: Any, start_step: int) -> None:
        self.calls.append(("start", start_step))

    def on_update(self, step: int, metrics: Any) -> None:
        self.calls.append(("update", step))

    def on_evaluation(self, step: int, returns: Any) -> None:
        self.calls.append(("evaluation", step))

    def on_checkpoint(self, step: int, path: Path) -> None:
        self.calls.append(("checkpoint", path.name))

    def on_training_end(self, step: int, summary: Any) -> None:
        self.calls.append(("end", step))


def test_smoke_train_on_breakout_ascii_writes_a_playable_run(tmp_path: Path) -> None:
    config = NanoGPTPPOConfig(total_steps=256, eval_every=128, checkpoint_every=128, keep_checkpoints=1, **TINY)
    run = make_run(tmp_path, "LLMBreakout-ascii-v0", config)
    recorder = Recorder()
    summary = NanoGPTPPOAgent(config).train(EnvConfig("LLMBreakout-ascii-v0"), run, [recorder])
    run.close()

    assert summary["env_steps"] == 256 and summary["updates"] == 4
    # Trained on the grid it asked for, with the Atari training settings (docs/guides/atari.md).
    trained = {"rows": 12, "cols": 20, "fire_on_reset": True, "terminal_on_life_loss": True}
    assert summary["env_kwargs"] == trained and summary["context"] == 12 * 21
    assert [entry[0] for entry in summary["eval_history"]] == [0, 128, 256]  # the untrained network first
    assert recorder.calls[0] == ("start", 0) and recorder.calls[-1] == ("end", 256)
    assert [c for c in recorder.calls if c[0] == "update"] == [("update", s) for s in (64, 128, 192, 256)]
    assert [name for kind, name in recorder.calls if kind == "checkpoint"][-1] == "step_256"
    assert [step for step, _ in run.checkpoints()] == [256]  # keep_checkpoints=1 pruned step_128
    assert (run.checkpoints_dir / "best" / WEIGHTS_FILE).is_file()
    assert list((run.path / "tb").glob("events.*"))
    assert json.loads((run.path / "summary.json").read_text())["env_steps"] == 256

    # The checkpoint plays on the grid it was trained on, without being told the grid size.
    policy, agent = load_policy(run.checkpoints_dir / "step_256")
    assert agent.name == "nanogpt_ppo" and policy.env_kwargs == {"rows": 12, "cols": 20}
    (episode,) = run_episodes(policy, EnvConfig("LLMBreakout-ascii-v0", policy.env_kwargs), 1, max_steps=30)
    assert episode.length == 30


class MetricsRecorder(Callback):
    def __init__(self) -> None:
        self.metrics: list[dict[str, float]] = []

    def on_update(self, step: int, metrics: Any) -> None:
        self.metrics.append(dict(metrics))


def test_training_logs_the_games_own_points_beside_the_shaped_return(tmp_path: Path) -> None:
    config = NanoGPTPPOConfig(total_steps=512, eval_every=0, checkpoint_every=0, **TINY)
    run = make_run(tmp_path, "LLMBreakout-ascii-v0", config)
    recorder = MetricsRecorder()
    env = EnvConfig("LLMBreakout-ascii-v0", {"reward_shaping": 1.0})
    NanoGPTPPOAgent(config).train(env, run, [recorder])
    run.close()

    logged = [m for m in recorder.metrics if "charts/episodic_return" in m]
    assert logged, "no training episode (one life each) ended in 512 steps"
    assert all(m["charts/episodic_raw_return"] >= 0 for m in logged)  # Breakout's points: never negative
    # Potential-based shaping adds -coef * phi(first state) >= 0 (phi <= 0) and discount terms: never the same.
    assert any(m["charts/episodic_return"] != m["charts/episodic_raw_return"] for m in logged)


@pytest.mark.parametrize("key_frequency_bias", [False, True])
def test_resume_continues_exactly_where_a_stopped_run_left_off(tmp_path: Path, key_frequency_bias: bool) -> None:
    config = NanoGPTPPOConfig(
        total_steps=256, eval_every=0, checkpoint_every=0, key_frequency_bias=key_frequency_bias, **TINY
    )
    env = EnvConfig("LLMBreakout-ascii-v0")

    straight = make_run(tmp_path, env.env_id, config, "straight")
    full = NanoGPTPPOAgent(config).train(env, straight, [])

    stopped = make_run(tmp_path, env.env_id, config, "stopped")
    first = NanoGPTPPOAgent(config).train(env, stopped, [StopAfterSteps(128)])
    assert first["env_steps"] == 128 and first["stopped_early"]
    assert [step for step, _ in stopped.checkpoints()] == [128]  # a stop always leaves a checkpoint

    resumed = Run.open(stopped.path)
    resumed.resumed_from = resumed.latest_checkpoint()
    recorder = Recorder()
    second = NanoGPTPPOAgent(config).train(env, resumed, [recorder])
    assert recorder.calls[0] == ("start", 128)
    for key in ("env_steps", "updates", "episodes", "mean_return"):
        assert second[key] == full[key], key
    a = torch.load(straight.checkpoints_dir / "step_256" / WEIGHTS_FILE)
    b = torch.load(stopped.checkpoints_dir / "step_256" / WEIGHTS_FILE)
    assert all(torch.equal(a[k], b[k]) for k in a), "resumed weights differ from an uninterrupted run"


def test_openspiel_run_checkpoints_and_resumes_with_fresh_games(tmp_path: Path) -> None:
    # OpenSpiel snapshots hold live pyspiel objects and do not pickle: checkpoints still write, resume starts new games.
    config = NanoGPTPPOConfig(total_steps=128, eval_every=0, checkpoint_every=0, **TINY)
    env = EnvConfig("OpenSpiel-tic_tac_toe-v0")
    run = make_run(tmp_path, env.env_id, config)
    first = NanoGPTPPOAgent(config).train(env, run, [StopAfterSteps(64)])
    assert first["env_steps"] == 64 and [step for step, _ in run.checkpoints()] == [64]

    resumed = Run.open(run.path)
    resumed.resumed_from = resumed.latest_checkpoint()
    second = NanoGPTPPOAgent(config).train(env, resumed, [])
    assert second["env_steps"] == 128 and second["episodes"] > first["episodes"]
    results = run_episodes(NanoGPTPPOAgent(config).policy(env, resumed.latest_checkpoint()), env, 2, seed=3)
    assert all(not r.truncated and 0.0 <= r.final_info["score"] <= 1.0 for r in results)  # whole games, scored


class PickTheTarget(gym.Env):
    """A text bandit with a changing legal set: the observation names the rewarded action among the legal ones."""

    def __init__(self) -> None:
        self.observation_space = text_space(64)
        self.action_space = gym.spaces.Discrete(5)
        self.illegal_taken = 0

    def _draw(self) -> tuple[str, dict[str, Any]]:
        legal = np.sort(self.np_random.choice(5, size=int(self.np_random.integers(2, 5)), replace=False))
        self.target = int(self.np_random.choice(legal))
        self.mask = np.zeros(5, dtype=np.int8)
        self.mask[legal] = 1
        return f"target {self.target}\nlegal {' '.join(map(str, legal))}", {"action_mask": self.mask.copy()}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        return self._draw()

    def step(self, action: int) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.illegal_taken += int(self.mask[action] == 0)
        reward = float(action == self.target)
        obs, info = self._draw()
        return obs, reward, False, False, {**info, "illegal_taken": self.illegal_taken}


gym.register("NanoGPTTest-PickTheTarget-v0", entry_point=PickTheTarget, max_episode_steps=8)


def test_learns_a_text_env_with_varying_legal_actions_and_never_takes_an_illegal_one(tmp_path: Path) -> None:
    # Every episode ends by the time limit: the truncation bootstrap and padded batches (lengths vary) both run.
    # Bootstrapping a time limit makes the task infinite-horizon; gamma 0.5 keeps its values O(1), so value
    # clipping (0.2 per update) does not hold the value head back for hundreds of updates. 6,144 steps: with seed 0,
    # 4,096 left the policy at about 6 of 8 (seeds 1-3 were at 8 by then).
    config = NanoGPTPPOConfig(
        total_steps=6144,
        eval_every=0,
        gamma=0.5,
        **{
            **TINY,
            "num_envs": 4,
            "num_steps": 64,
            "minibatch_size": 64,
            "update_epochs": 4,
            "eval_episodes": 8,
            "learning_rate": 3e-3,
        },
    )
    env = EnvConfig("NanoGPTTest-PickTheTarget-v0")
    run = make_run(tmp_path, env.env_id, config)
    agent = NanoGPTPPOAgent(config)
    summary = agent.train(env, run, [])
    results = run_episodes(agent.policy(env, run.latest_checkpoint()), env, 8, seed=5, num_envs=4)
    assert all(r.final_info["illegal_taken"] == 0 for r in results)
    # Chance (uniform over the legal actions) scores about 8 * 0.43 = 3.4 per episode.
    assert summary["final_eval_return"] >= 6 and np.mean([r.episode_return for r in results]) >= 6
    # mean_return is the training episodes' (sampled) return over the last rollouts, as ppo_lora reports it, not a
    # copy of the greedy evaluation's: `llm-gym sweep` shows the two side by side.
    last = summary["train_history"][-5:]
    weighted = sum(entry[1] * entry[3] for entry in last) / sum(entry[3] for entry in last)
    assert summary["mean_return"] == pytest.approx(weighted) and summary["mean_return"] > 3.4
    assert sum(entry[3] for entry in summary["train_history"]) == summary["episodes"]


def test_cli_trains_and_plays_a_checkpoint(tmp_path: Path) -> None:
    from llm_gym.cli import build_app

    runner, app = CliRunner(), build_app()
    sets = [x for k, v in {**TINY, "total_steps": 64, "eval_max_steps": 20}.items() for x in ("--set", f"{k}={v}")]
    result = runner.invoke(
        app, ["train", "--agent", "nanogpt_ppo", "--env", "LLMPong-ascii-v0", *sets, "--run-dir", str(tmp_path / "cli")]
    )
    assert result.exit_code == 0, result.output
    checkpoint = tmp_path / "cli" / "checkpoints" / "step_64"
    result = runner.invoke(
        app, ["play", "--checkpoint", str(checkpoint), "--episodes", "1", "--max-steps", "25", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["episodes"][0]["length"] == 25  # stderr has a note: FIRE on reset left out
    sampled = ["play", "--checkpoint", str(checkpoint), "--episodes", "1", "--max-steps", "25", "--sample", "--json"]
    result = runner.invoke(app, sampled)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["sampled"] is True


def test_playing_a_checkpoint_says_which_env_args_its_training_used_that_the_play_leaves_out(tmp_path: Path) -> None:
    from llm_gym.cli import build_app

    runner, app = CliRunner(), build_app()
    sets = [x for k, v in {**TINY, "total_steps": 64, "eval_max_steps": 20}.items() for x in ("--set", f"{k}={v}")]
    train = ["train", "--agent", "nanogpt_ppo", "--env", "LLMBreakout-ascii-v0", "--env-arg", "ball_trail=true",
             "--env-arg", "reward_shaping=1", *sets]  # fmt: skip
    assert runner.invoke(app, [*train, "--run-dir", str(tmp_path / "trail")]).exit_code == 0
    play = ["play", "--checkpoint", str(tmp_path / "trail"), "--episodes", "1", "--max-steps", "5", "--json"]
    # Named env: the run's own --env-arg and the Atari training default (FIRE on reset, from summary.json) are
    # both left out; terminal_on_life_loss is not named, since every evaluation plays whole games anyway, nor the
    # reward shaping, which changes only the reward (play reports the game's own).
    plain = runner.invoke(app, [*play, "--env", "LLMBreakout-ascii-v0"])
    assert plain.exit_code == 0, plain.output
    note = "trained with --env-arg ball_trail=true --env-arg fire_on_reset=true; this play leaves them at the env's"
    assert note in plain.stderr and "terminal_on_life_loss" not in plain.stderr and "shaping" not in plain.stderr
    assert json.loads(plain.stdout)["episodes"][0]["length"] == 5
    # The run's own env: the policy carries ball_trail, so only FIRE on reset is left out.
    own = runner.invoke(app, play)
    assert own.exit_code == 0, own.output
    assert "trained with --env-arg fire_on_reset=true; this play leaves it at the env's defaults" in own.stderr
    as_trained = ["--env-arg", "ball_trail=true", "--env-arg", "fire_on_reset=true"]
    for same in ([*play, "--env", "LLMBreakout-ascii-v0", *as_trained], [*play, "--env-arg", "fire_on_reset=false"]):
        result = runner.invoke(app, same)
        assert result.exit_code == 0 and "note:" not in result.stderr, result.output


def test_non_text_observations_are_refused_with_what_to_use_instead(tmp_path: Path) -> None:
    from llm_gym.errors import UnsupportedEnvError

    config = NanoGPTPPOConfig(total_steps=64, **TINY)
    with pytest.raises(UnsupportedEnvError, match="reads text observations"):
        NanoGPTPPOAgent(config).policy(EnvConfig("LLMBreakout-vision-v0"))


def test_policy_is_greedy_by_default_and_epsilon_explores_legal_actions_only() -> None:
    from llm_gym.agents.nanogpt_ppo.policy import NanoGPTPolicy

    policy = NanoGPTPPOAgent(NanoGPTPPOConfig(**TINY)).policy(EnvConfig("NanoGPTTest-PickTheTarget-v0"))
    observations = ["target 1\nlegal 1 3"] * 400
    infos = [{"action_mask": np.array([0, 1, 0, 1, 0], dtype=np.int8)}] * 400
    greedy = policy.act(observations, infos)
    assert len(set(greedy)) == 1 and greedy[0] in (1, 3)
    explorer = NanoGPTPolicy(policy.model, epsilon=1.0, seed=3)
    actions = explorer.act(observations, infos)
    assert set(actions) == {1, 3}
    assert actions == NanoGPTPolicy(policy.model, epsilon=1.0, seed=3).act(observations, infos)


def test_start_spread_plays_its_drawn_random_steps_before_the_first_rollout(tmp_path: Path) -> None:
    from llm_gym.training.curves import read_scalars
    from llm_gym.training.loop import SPREAD_SEED_KEY

    config = NanoGPTPPOConfig(total_steps=64, eval_every=0, checkpoint_every=0, start_spread=30, seed=2, **TINY)
    run = make_run(tmp_path, "LLMBreakout-ascii-v0", config)
    summary = NanoGPTPPOAgent(config).train(EnvConfig("LLMBreakout-ascii-v0"), run, [])
    run.close()
    assert summary["env_steps"] == 64  # the spread's steps are not counted
    drawn = np.random.default_rng([SPREAD_SEED_KEY, 2]).integers(31, size=TINY["num_envs"])
    assert read_scalars(run.path)["spread/env_steps"][1][0] == drawn.sum() > 0
    with pytest.raises(ValueError, match="start_spread must be >= 0"):
        NanoGPTPPOConfig(start_spread=-1)
