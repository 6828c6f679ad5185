"""ppo_lora on Breakout with the training defaults of the Atari envs: it trains with FIRE on reset and life-loss
episode ends, evaluates whole games greedily and sampled side by side, and its checkpoint asks for no env
arguments of its own (a comparison states them for every player alike)."""

from __future__ import annotations

from pathlib import Path

from llm_gym.agent import policy_env_kwargs
from llm_gym.agents.ppo_lora.testing import tiny_config, train
from llm_gym.training.checkpoints import load_policy

ENV = "LLMBreakout-text-v0"


def test_breakout_run_evaluates_greedy_and_sampled_under_the_training_settings(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from llm_gym.lm.testing import make_tiny_model

    model = make_tiny_model(tmp_path / "model", layers=2, hidden=32)
    config = tiny_config(
        model, total_steps=32, num_envs=2, num_steps=16, minibatch_size=16, update_epochs=1, lora_rank=4,
        eval_episodes=2, eval_max_steps=12, eval_every=0,
    )  # fmt: skip
    summary, run = train(tmp_path / "run", ENV, config)

    assert summary["env_kwargs"] == {"fire_on_reset": True, "terminal_on_life_loss": True}
    for kind in ("eval", "eval_sampled"):  # before and after training, both ways
        for edge in ("first", "final"):
            assert isinstance(summary[f"{edge}_{kind}_return"], float), (edge, kind)
            assert isinstance(summary[f"{edge}_{kind}_score"], float), (edge, kind)
    tags = set(EventAccumulator(str(run.path / "tb")).Reload().Tags()["scalars"])
    assert {"eval/mean_return", "eval/mean_score", "eval/sampled_mean_return", "eval/sampled_mean_score"} <= tags

    # `llm-gym play --checkpoint` and bench entries play the env they are given: no hidden FIRE that a baseline
    # played beside it would not get.
    policy, _ = load_policy(run.path)
    assert policy_env_kwargs(policy) == {}
