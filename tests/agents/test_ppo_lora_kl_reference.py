"""kl_reference=start: a warm-started ppo_lora run measures its KL term against the policy it started from (the
warm start's adapter, frozen beside the trained one and copied into the run), not against the base model. The
trained adapter stays the one trained and saved; a resume reads the run's own copy after the warm start is gone;
a run from before the setting resumes only with kl_reference=base, which one line says."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.acting import act, strategy_for
from llm_gym.agents.ppo_lora.checkpoint import REFERENCE_DIR
from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.model import REFERENCE_ADAPTER, ActorCritic
from llm_gym.agents.ppo_lora.testing import resume_as_if_killed, tiny_config
from llm_gym.agents.ppo_lora.testing import train as train_ppo
from llm_gym.agents.ppo_lora.train import initial_actor_critic
from llm_gym.envs.catalog import EnvTraits
from llm_gym.errors import CheckpointError

TTT = "OpenSpiel-tic_tac_toe-v0"
ROLLOUT = dict(num_envs=2, num_steps=4, minibatch_size=4)


@pytest.fixture(scope="module")
def warm_start(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trained adapter whose policy differs from the base model's: one update at a high learning rate."""
    config = tiny_config(tiny_model_dir, total_steps=8, **ROLLOUT, learning_rate=0.05, kl_coef=0.0)
    summary, _ = train_ppo(tmp_path_factory.mktemp("warm") / "run", TTT, config)
    return Path(summary["checkpoint"])


def _policy_and_reference(ac: ActorCritic, config: PPOLoRAConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probabilities over the legal moves of one position: the policy's and the reference's."""
    observation, info = EnvConfig(TTT).make().reset(seed=3)
    decided = act(ac, strategy_for(config), [observation], [info], TTT, generator=torch.Generator(), greedy=True,
                  with_reference=True)  # fmt: skip
    return decided.probs[0].log(), decided.reference[0]


def test_the_reference_is_the_warm_start_not_the_base_model(tiny_model_dir: Path, warm_start: Path) -> None:
    instructions = EnvTraits.probe(EnvConfig(TTT)).instructions
    config = tiny_config(tiny_model_dir, init_adapter=str(warm_start))
    on_base = initial_actor_critic(config, instructions, resume=None)
    policy, base = _policy_and_reference(on_base, config)
    assert not torch.allclose(policy, base, atol=1e-3)  # the warm start has moved away from the base model

    ac = initial_actor_critic(config, instructions, resume=None)
    trainable = [p for p in ac.trainable_parameters()]
    ac.use_reference_adapter(warm_start / "adapter")
    policy, reference = _policy_and_reference(ac, config)
    torch.testing.assert_close(reference, policy, atol=1e-5, rtol=0)  # KL 0 at the start, as it should be
    # The reference pass leaves the trained adapter the trainable one, and the reference frozen.
    assert [p for p in ac.trainable_parameters()] == trainable and all(p.requires_grad for p in trainable)
    frozen = [p for name, p in ac.model.named_parameters() if f".{REFERENCE_ADAPTER}." in name]
    assert frozen and not any(p.requires_grad for p in frozen)


def test_a_warm_started_run_keeps_its_reference_through_a_resume(
    tiny_model_dir: Path, warm_start: Path, tmp_path: Path
) -> None:
    shutil.copytree(warm_start.parent.parent, tmp_path / "warm")  # a warm start that goes away before the resume
    start = tmp_path / "warm" / "checkpoints" / warm_start.name
    config = tiny_config(tiny_model_dir, init_adapter=str(start), total_steps=16, **ROLLOUT, checkpoint_every=8,
                         keep_checkpoints=4, kl_coef=0.5)  # fmt: skip
    summary, run = train_ppo(tmp_path / "run", TTT, config)
    copy = run.path / REFERENCE_DIR
    for name in ("adapter_model.safetensors", "adapter_config.json"):
        assert (copy / name).read_bytes() == (start / "adapter" / name).read_bytes()
    # Checkpoints hold the trained adapter alone, in the layout plain peft loads.
    final = Path(summary["checkpoint"])
    assert not [path for path in (final / "adapter").iterdir() if path.is_dir()]  # no reference/ beside it
    assert json.loads((final / "adapter" / "adapter_config.json").read_text())["r"] == config.lora_rank

    shutil.rmtree(tmp_path / "warm")
    resumed = resume_as_if_killed(run.path, tmp_path / "resumed", "step_8", TTT, config)
    assert resumed["env_steps"] == 16

    # A run made before kl_reference (no copy) is refused in one line that says what it trained with.
    old = tmp_path / "old"
    shutil.copytree(run.path, old)
    shutil.rmtree(old / REFERENCE_DIR)
    with pytest.raises(CheckpointError, match="kl_reference=base"):
        resume_as_if_killed(old, tmp_path / "old_resumed", "step_8", TTT, config)
