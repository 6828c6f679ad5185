"""What a ppo_lora rollout reports about its policy and how far one update may move it: the per-action statistics
(mean probability, share of decisions where each action is the most likely) and ``target_kl``'s stop before the
step that would move a minibatch past 1.5 x the bound."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.acting import strategy_for
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.agents.ppo_lora.rollout import (
    MAX_LOGGED_ACTIONS,
    Rollout,
    RolloutActor,
    action_scalars,
    collect,
    values_of,
)
from llm_gym.agents.ppo_lora.testing import tiny_config, train
from llm_gym.agents.ppo_lora.update import ppo_update
from llm_gym.envs.catalog import EnvTraits
from llm_gym.stepping import EnvStepper, make_vector_env

ENV = EnvConfig("LLMBreakout-text-v0")
NAMES = ["NOOP", "FIRE", "RIGHT", "LEFT"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm_gym.lm.testing import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny-lm"), layers=3, hidden=64, init_std=0.2)


def test_action_statistics_average_the_probabilities_and_count_the_most_likely_action() -> None:
    rollout = Rollout()
    rollout.count_actions([torch.tensor([0.1, 0.2, 0.3, 0.4]), torch.tensor([0.7, 0.1, 0.1, 0.1])], [NAMES, NAMES])
    rollout.count_actions([torch.tensor([0.5, 0.5])], [["NOOP", "FIRE"]])  # a state with fewer legal actions
    rollout.count_actions([torch.empty(0)], [["NOOP"]])  # generate mode: nothing to count
    scalars = action_scalars(rollout)
    assert rollout.scored == 3
    assert scalars["policy/mean_prob/NOOP"] == pytest.approx((0.1 + 0.7 + 0.5) / 3)
    assert scalars["policy/mean_prob/LEFT"] == pytest.approx((0.4 + 0.1) / 3)  # 0 where it was not legal
    assert scalars["policy/greedy_share/LEFT"] == pytest.approx(1 / 3)
    assert scalars["policy/greedy_share/NOOP"] == pytest.approx(2 / 3)  # ties go to the first legal action
    assert scalars["policy/greedy_share/RIGHT"] == 0.0

    many = Rollout()
    names = [f"move{i}" for i in range(MAX_LOGGED_ACTIONS + 1)]
    many.count_actions([torch.full((len(names),), 1 / len(names))], [names])
    assert action_scalars(many) == {} and action_scalars(Rollout()) == {}


def rollout_of(model_dir: Path, **settings):
    config = tiny_config(model_dir, trainable_layers=2, lora_rank=4, num_envs=4, num_steps=8, **settings)
    ac = ActorCritic(config, EnvTraits.probe(ENV).instructions)
    strategy = strategy_for(config)
    stepper = EnvStepper(make_vector_env(ENV, config.num_envs, text_actions=False), seed=0)
    stepper.reset()
    generator = torch.Generator().manual_seed(0)
    rollout = collect(RolloutActor(ac, strategy, generator), stepper, config, ENV.env_id, torch.zeros(config.num_envs))
    stepper.close()
    return ac, strategy, config, rollout, generator


def test_a_rollout_counts_every_decision_of_the_policy(model_dir: Path) -> None:
    _, _, config, rollout, _ = rollout_of(model_dir)
    scalars = action_scalars(rollout)
    assert rollout.scored == config.num_envs * config.num_steps
    assert sum(scalars[f"policy/mean_prob/{name}"] for name in NAMES) == pytest.approx(1.0, abs=1e-5)
    assert sum(scalars[f"policy/greedy_share/{name}"] for name in NAMES) == pytest.approx(1.0)


def test_bootstrap_values_share_a_forward_per_prompt_and_skip_states_after_a_reset(model_dir: Path) -> None:
    """values_of runs identical prompts once and leaves the rows GAE never reads (a state right after a reset) at 0,
    with the same values the rows get each on its own."""
    config = tiny_config(model_dir, trainable_layers=2, lora_rank=4)
    ac = ActorCritic(config, EnvTraits.probe(ENV).instructions)
    stepper = EnvStepper(make_vector_env(ENV, 3, text_actions=False), seed=0)
    stepper.reset()
    observations = list(stepper.observations)
    stepper.close()
    rows = [0, 1, 0, 2, 1]  # two prompts shown twice
    obs, rules, turns = [observations[i] for i in rows], [ac.builder.instructions] * 5, [()] * 5
    with torch.no_grad():
        alone = torch.stack([values_of(ac, [o], rules[:1], turns[:1])[0] for o in obs])
        batched = values_of(ac, obs, rules, turns)
        needed = values_of(ac, obs, rules, turns, needed=[True, False, True, True, False])
    assert torch.allclose(batched, alone, atol=1e-5)
    assert torch.allclose(needed[[0, 2, 3]], alone[[0, 2, 3]], atol=1e-5) and needed[[1, 4]].eq(0).all()
    assert values_of(ac, obs, rules, turns, needed=[False] * 5).eq(0).all()


def test_target_kl_stops_the_update_before_the_step_that_moves_too_far(model_dir: Path) -> None:
    steps = {}
    for target_kl in (0.0, 1e-12):
        ac, strategy, config, rollout, generator = rollout_of(
            model_dir, update_epochs=2, minibatch_size=8, max_minibatches=4, target_kl=target_kl, kl_coef=0.0
        )
        advantages = torch.randn(config.num_steps, config.num_envs, generator=torch.Generator().manual_seed(1))
        optimizer = torch.optim.AdamW(ac.trainable_parameters(), lr=1e-2)
        returns = torch.zeros(config.num_steps, config.num_envs)
        metrics = ppo_update(ac, strategy, optimizer, rollout, advantages, returns, config, generator, 0.0)
        steps[target_kl] = (metrics["optimizer_steps"], metrics["epochs"])
    assert steps[0.0] == (8.0, 2.0)  # 2 epochs of 4 steps
    # The first step's minibatch is still at the rollout's policy (KL 0); after it every minibatch has moved.
    assert steps[1e-12] == (1.0, 1.0)


@pytest.mark.timeout(300)
def test_a_training_run_logs_the_action_statistics(model_dir: Path, tmp_path: Path) -> None:
    from llm_gym.training.curves import read_scalars

    config = tiny_config(model_dir, num_envs=2, num_steps=4, total_steps=16, checkpoint_every=16, lora_rank=4)
    _, run = train(tmp_path / "run", ENV, config)
    scalars = read_scalars(run.path)
    for name in NAMES:
        steps, values = scalars[f"policy/greedy_share/{name}"]
        assert list(steps) == [8, 16] and all(0.0 <= v <= 1.0 for v in values)
    assert list(scalars["losses/optimizer_steps"][1]) == [float(config.update_epochs * 1)] * 2
