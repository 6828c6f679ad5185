"""ppo_lora end to end on tiny random models: it learns a text bandit in score mode and in generate mode within a
bounded number of updates, its checkpoint is a plain peft adapter, and it plays from a checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora import PPOLoRAAgent
from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.testing import tiny_config, train
from llm_gym.envs.spaces import text_space
from llm_gym.envs.testing import register_one_answer_env
from llm_gym.lm.backends import ScoreRequest
from llm_gym.lm.runtime import quiet_peft
from llm_gym.runs import Run
from llm_gym.training.checkpoints import load_policy

COLOURS = ("red", "green", "blue")


class ColourBandit(gym.Env):
    """One decision per episode: reward 1 for "blue", 0 otherwise."""

    instructions = "Pick a colour."

    def __init__(self) -> None:
        self.action_space = gym.spaces.Discrete(3)
        self.observation_space = text_space(64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "red, green or blue?", {"legal_actions": [0, 1, 2], "action_names": list(COLOURS)}

    def step(self, action):
        info = {"legal_actions": [0, 1, 2], "action_names": list(COLOURS)}
        return "done", float(action == 2), True, False, info


def starts_with_a_digit(answer: str) -> float:
    """About 1 in 10 answers of a random model start with a digit."""
    return float(answer[:1].isdigit())


gym.register("TestColourBandit-v0", entry_point=ColourBandit)
register_one_answer_env("TestDigitWriter-v0", starts_with_a_digit, prompt="go", instructions="Write.")


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm_gym.lm.testing import make_tiny_model

    # Near-uniform start: every colour is sampled often enough to learn from.
    return make_tiny_model(tmp_path_factory.mktemp("tiny-lm"), layers=2, hidden=64)


@pytest.fixture(scope="module")
def wider_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm_gym.lm.testing import make_tiny_model

    # For free text: at init_std 0.02 the final RMSNorm caps how far one token's logit can rise above ~100 others;
    # at 0.1 the distributions still start near uniform but can be concentrated.
    return make_tiny_model(tmp_path_factory.mktemp("tiny-lm-wide"), layers=2, hidden=64, init_std=0.1)


def _config(model: Path, **overrides) -> PPOLoRAConfig:
    # Bandit runs: 8 envs x 4 steps per update, a constant learning rate, no entropy bonus or KL unless asked for.
    bandit = dict(
        num_envs=8, num_steps=4, minibatch_size=16, update_epochs=2, learning_rate=3e-3, lr_schedule="constant"
    )
    bandit.update(entropy_coef=0.0, kl_coef=0.0, lora_rank=8, eval_every=0, checkpoint_every=10_000)
    return tiny_config(model, **{**bandit, **overrides})


def _train(tmp_path: Path, env_id: str, config: PPOLoRAConfig) -> tuple[dict, Run]:
    return train(tmp_path / "run", env_id, config)


def _blue_probability(policy) -> float:
    (scores,) = policy.backend.score([ScoreRequest(ColourBandit.instructions, "red, green or blue?", COLOURS)])
    return float(np.exp(scores[2] - np.logaddexp.reduce(scores)))


def test_score_mode_learns_the_rewarded_action(tmp_path: Path, tiny_model_dir: Path) -> None:
    config = _config(tiny_model_dir, total_steps=12 * 32, kl_coef=0.01)
    before = _blue_probability(PPOLoRAAgent(config).policy(EnvConfig("TestColourBandit-v0")))
    summary, run = _train(tmp_path, "TestColourBandit-v0", config)
    assert summary["updates"] == 12 and summary["env_steps"] == 384
    policy, _ = load_policy(run.path)
    after = _blue_probability(policy)
    assert before < 0.6 and after > 0.9, (before, after)
    assert summary["mean_return"] > 0.8
    # The scalars the issue lists are in TensorBoard.
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tags = set(EventAccumulator(str(run.path / "tb")).Reload().Tags()["scalars"])
    assert {
        "charts/episodic_return",
        "losses/policy_loss",
        "losses/value_loss",
        "losses/kl_ref",
        "losses/entropy",
        "losses/clip_fraction",
        "losses/explained_variance",
        "charts/invalid_action_rate",
        "charts/decisions_per_second",
    } <= tags


def test_an_entropy_floor_raises_the_bonus_while_the_policy_settles(tmp_path: Path, tiny_model_dir: Path) -> None:
    from llm_gym.rl import adaptive_entropy_coef
    from llm_gym.training.curves import read_scalars

    # The bandit above with a floor of 0.8 nats: the tiny model starts almost certain of one colour (entropy ~0.05),
    # so the coefficient climbs from the configured 0.01 after every update until the cap; the policy still learns
    # blue, and ends less settled than the same run without the floor. The cap (2.0) is high enough for the floor to
    # win clearly against the reward's pull (~3x the plain run's final entropy on a Xeon with AMX); at 0.5 the margin
    # was 1.3x-1.6x depending on the CPU's float rounding, too close for a test.
    settings = dict(total_steps=12 * 32, kl_coef=0.01, entropy_coef=0.01)
    plain, plain_run = _train(tmp_path / "plain", "TestColourBandit-v0", _config(tiny_model_dir, **settings))
    config = _config(tiny_model_dir, **settings, entropy_target=0.8, entropy_coef_max=2.0)
    summary, run = _train(tmp_path / "floor", "TestColourBandit-v0", config)
    scalars, plain_scalars = read_scalars(run.path), read_scalars(plain_run.path)
    entropy, coef = scalars["losses/entropy"][1], scalars["charts/entropy_coef"][1]
    # Each update's coefficient is the controller's answer to the entropy that update measured.
    expected, previous = [], 0.01
    for value in entropy:
        previous = adaptive_entropy_coef(previous, float(value), 0.8, 1.0, 0.01, 2.0)
        expected.append(previous)
    assert coef.tolist() == pytest.approx(expected, rel=1e-5)
    assert coef[0] > 0.01 and coef[-1] == pytest.approx(2.0)
    assert plain_scalars["charts/entropy_coef"][1].tolist() == pytest.approx([0.01] * 12)  # no target: as configured
    assert entropy[-3:].mean() > 1.5 * plain_scalars["losses/entropy"][1][-3:].mean()
    policy, _ = load_policy(run.path)
    assert _blue_probability(policy) > 0.7  # learnt (uniform: 1/3), if less surely than without the floor
    counters = torch.load(Path(summary["checkpoint"]) / "training.pt", weights_only=True)["counters"]
    assert counters["entropy_coef"] == pytest.approx(coef[-1])


def test_generate_mode_learns_on_a_text_action_env(tmp_path: Path, wider_model_dir: Path) -> None:
    config = _config(
        wider_model_dir,
        action_mode="generate",
        total_steps=12 * 32,
        max_new_tokens=2,
        kl_coef=0.01,
        learning_rate=1e-2,
        value_coef=0.1,
    )
    summary, _ = _train(tmp_path, "TestDigitWriter-v0", config)
    history = [entry[1] for entry in summary["train_history"]]
    assert np.mean(history[:2]) < 0.4 and np.mean(history[-2:]) > 0.5, history


def test_checkpoint_is_a_plain_peft_adapter(tmp_path: Path, tiny_model_dir: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    # Adaptive KL: a target far below the measured KL makes the coefficient grow by the capped 20% x 32/100 per
    # update (the first update starts at KL 0, the adapter being zero-initialised, so its mean KL is tiny).
    config = _config(tiny_model_dir, total_steps=64, kl_coef=0.01, kl_target=1e-12, kl_horizon=100)
    summary, run = _train(tmp_path, "TestColourBandit-v0", config)
    checkpoint = Path(summary["checkpoint"])
    counters = torch.load(checkpoint / "training.pt", weights_only=True)["counters"]
    assert counters["kl_coef"] == pytest.approx(0.01 * (1 + 0.2 * 32 / 100) ** 2, rel=1e-6)
    adapter = json.loads((checkpoint / "adapter" / "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] == str(tiny_model_dir)
    base = AutoModelForCausalLM.from_pretrained(adapter["base_model_name_or_path"])
    with quiet_peft():
        peft_model = PeftModel.from_pretrained(base, str(checkpoint / "adapter")).eval()
    # Plain peft and the agent's own (merged) policy give the same scores.
    policy, agent = load_policy(checkpoint)
    assert agent.name == "ppo_lora"
    builder_prompt = policy.backend.prompt_builder(ColourBandit.instructions)[0]
    ids = builder_prompt.encode(["red, green or blue?"])[0].ids
    blue = builder_prompt.choice_ids("blue")
    with torch.no_grad():
        logprobs = torch.log_softmax(peft_model(torch.tensor([ids + blue])).logits[0], -1)
    naive = sum(float(logprobs[len(ids) - 1 + i, t]) for i, t in enumerate(blue))
    (scores,) = policy.backend.score([ScoreRequest(ColourBandit.instructions, "red, green or blue?", COLOURS)])
    assert scores[2] == pytest.approx(naive, abs=1e-4)
    assert {"value_head.pt", "training.pt", "envs.json", "checkpoint.json"} <= {p.name for p in checkpoint.iterdir()}


def test_a_value_warmup_fits_the_value_and_leaves_the_policy(tmp_path: Path, tiny_model_dir: Path) -> None:
    from llm_gym.training.curves import read_scalars

    # Six updates, all of them warm-up: each fits the value head to its rollout's returns, and the policy plays with
    # exactly the probabilities it started with. (Whether the fit carries over to the next rollout depends on the
    # features and the rollout's size: benchmarks/value_warmup.py measures that on Breakout.)
    config = _config(tiny_model_dir, total_steps=6 * 32, value_warmup_updates=6, value_warmup_epochs=16)
    before = _blue_probability(PPOLoRAAgent(config).policy(EnvConfig("TestColourBandit-v0")))
    summary, run = _train(tmp_path, "TestColourBandit-v0", config)
    after = _blue_probability(
        PPOLoRAAgent(config).policy(EnvConfig("TestColourBandit-v0"), Path(summary["checkpoint"]))
    )
    assert after == pytest.approx(before, abs=1e-6)
    scalars = read_scalars(run.path)
    unfitted, fitted = scalars["losses/value_loss"][1], scalars["losses/value_loss_fitted"][1]
    assert len(unfitted) == 6 and (fitted < unfitted).all(), (unfitted, fitted)
    assert scalars["losses/epochs"][1].tolist() == [16.0] * 6
