"""Value estimates per decision (the bench's trajectory viewer shows them): a ppo_lora checkpoint played through
its merged policy reports the value its training computed for the same observation, and nanogpt_ppo reports its
policy head's probabilities over the legal actions and its value head's estimate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from llm_gym.agent import EnvConfig, act_with_details
from llm_gym.agents.ppo_lora.testing import tiny_config, train
from llm_gym.training.checkpoints import load_policy

ENV = "OpenSpiel-tic_tac_toe-v0"


def _positions(n: int) -> tuple[list, list]:
    """Observations and infos of the first decisions of ``n`` real tic-tac-toe games (different seeds)."""
    import gymnasium as gym

    observations, infos = [], []
    for seed in range(n):
        env = gym.make(ENV, opponent="random")
        observation, info = env.reset(seed=seed)
        observations.append(observation)
        infos.append(info)
        env.close()
    return observations, infos


def test_a_ppo_lora_checkpoint_reports_the_value_its_training_computed(tmp_path: Path) -> None:
    from llm_gym.agents.ppo_lora.acting import act, strategy_for
    from llm_gym.agents.ppo_lora.model import ADAPTER_DIR, ActorCritic
    from llm_gym.lm.testing import make_tiny_model

    model = make_tiny_model(tmp_path / "model", layers=2, hidden=32)
    config = tiny_config(
        model, total_steps=32, num_envs=2, num_steps=16, minibatch_size=16, update_epochs=1, lora_rank=4
    )
    summary, _ = train(tmp_path / "run", ENV, config)
    checkpoint = Path(summary["checkpoint"])
    observations, infos = _positions(3)

    policy, _ = load_policy(checkpoint, EnvConfig(ENV))
    actions, details = act_with_details(policy, observations, infos)
    values = [d["value"] for d in details]
    assert all(isinstance(v, float) for v in values)
    assert all(sum(d["probs"]) == pytest.approx(1.0) for d in details)

    # The training path: the unmerged adapter over the split model, the saved value head.
    ac = ActorCritic(config, policy.traits.instructions, adapter=checkpoint / ADAPTER_DIR)
    ac.load_value_head(checkpoint)
    with torch.no_grad():
        decisions = act(
            ac, strategy_for(config), observations, infos, ENV, generator=torch.Generator(), greedy=True,
            keep_hidden=False,
        )  # fmt: skip
    assert values == pytest.approx(decisions.values.tolist(), abs=1e-4)
    assert actions == decisions.actions


def test_nanogpt_reports_legal_action_probabilities_and_its_value() -> None:
    from llm_gym.agents.nanogpt_ppo import NanoGPTPPOAgent
    from llm_gym.agents.nanogpt_ppo.config import NanoGPTPPOConfig
    from llm_gym.agents.nanogpt_ppo.envs import info_mask
    from llm_gym.agents.nanogpt_ppo.testing import TINY_SETTINGS

    config = NanoGPTPPOConfig(**{k: v for k, v in TINY_SETTINGS.items() if k != "progress"})
    policy = NanoGPTPPOAgent(config).policy(EnvConfig(ENV))
    observations, infos = _positions(3)
    observations[1], infos[1] = observations[0], infos[0]  # identical inputs, identical details
    actions, details = policy.act_with_details(observations, infos)
    assert actions == policy.act(observations, infos)
    shape = policy.model.shape
    tokens, query = policy.tokenizer.encode_batch([str(o) for o in observations], shape.context)
    masks = np.stack([info_mask(info, shape.n_actions) for info in infos])
    with torch.no_grad():
        logits, values = policy.model(torch.from_numpy(tokens), torch.from_numpy(query), torch.from_numpy(masks))
    for row, info, detail, value, action in zip(logits, infos, details, values, actions, strict=True):
        legal = list(info["legal_actions"])
        assert len(detail["probs"]) == len(legal) and sum(detail["probs"]) == pytest.approx(1.0, abs=1e-5)
        assert detail["probs"] == pytest.approx(torch.softmax(row, -1)[legal].tolist(), abs=1e-6)
        assert detail["value"] == pytest.approx(float(value), abs=1e-6)
        assert legal[int(np.argmax(detail["probs"]))] == action  # greedy: the most likely legal action
    assert details[0] == details[1]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU fallback of a GPU-trained config")
def test_a_nanogpt_run_trained_on_a_gpu_plays_on_a_machine_without_one() -> None:
    from llm_gym.agents.nanogpt_ppo import NanoGPTPPOAgent
    from llm_gym.agents.nanogpt_ppo.config import NanoGPTPPOConfig
    from llm_gym.agents.nanogpt_ppo.testing import TINY_SETTINGS

    config = NanoGPTPPOConfig(**{**{k: v for k, v in TINY_SETTINGS.items() if k != "progress"}, "device": "cuda"})
    policy = NanoGPTPPOAgent(config).policy(EnvConfig(ENV))
    assert policy.device.type == "cpu"
    observations, infos = _positions(1)
    (action,) = policy.act(observations, infos)
    assert action in infos[0]["legal_actions"]
