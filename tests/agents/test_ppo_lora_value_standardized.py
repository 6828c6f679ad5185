"""``value_input=standardized``: the value head reads each hidden channel minus its mean over the rollouts' states,
divided by its standard deviation. It starts at zero, moving its statistics never changes a value, its input is
detached from the LoRA, and on states that are one shared vector plus a small spread (as SmolLM2's are on Breakout)
Adam at PPO's learning rate fits a value that the spread carries, where the ``unit`` head stays one constant."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import torch

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.model import VALUE_HEAD_FILE
from llm_gym.agents.ppo_lora.testing import resume_as_if_killed, tiny_config, train
from llm_gym.agents.ppo_lora.value_head import ValueHead
from llm_gym.rl import explained_variance
from llm_gym.training.curves import read_scalars

HIDDEN = 64
SHAPED = EnvConfig("LLMBreakout-text-v0", {"reward_shaping": 10})  # a reward at most steps: the head has a target


def _states(rows: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(states, values): one vector of norm about 40 plus a spread of about 2% of it, and a value that is a linear
    function of the spread (plus a little noise), as a critic of such states has to find."""
    generator = torch.Generator().manual_seed(0)  # the shared vector and the value's direction: the same every call
    shared = torch.randn(HIDDEN, generator=generator)
    shared[7] = 40.0
    direction = torch.randn(HIDDEN, generator=generator)
    draws = torch.Generator().manual_seed(seed)
    spread = 0.02 * torch.randn(rows, HIDDEN, generator=draws)
    values = 0.3 + 4.0 * spread @ direction / HIDDEN**0.5 + 0.02 * torch.randn(rows, generator=draws)
    return shared + spread, values


def _observed(head: ValueHead, states: torch.Tensor) -> None:
    with torch.no_grad(), head.observing():
        head(states)
    head.fold_observed()


def test_a_fresh_head_is_zero_and_the_first_rollout_sets_its_statistics() -> None:
    head = ValueHead(HIDDEN, input_mode="standardized")
    states, _ = _states(256, seed=1)
    assert torch.equal(head(states), torch.zeros(256, 1))
    _observed(head, states)
    assert int(head.input_folds) == 1
    assert torch.allclose(head.input_mean, states.mean(0), atol=1e-5)
    assert torch.allclose(head.input_std, states.std(0, unbiased=False), rtol=1e-3)
    assert torch.equal(head(states), torch.zeros(256, 1))  # zero weights stay zero: still 0 everywhere
    with torch.enable_grad(), head.observing():  # inputs read with gradients (an update's) are not observed
        head(states * 2)
    head.fold_observed()
    assert int(head.input_folds) == 1


def test_moving_the_statistics_keeps_every_value() -> None:
    head = ValueHead(HIDDEN, input_mode="standardized")
    _observed(head, _states(256, seed=1)[0])
    torch.nn.init.normal_(head.weight)  # a head that has learnt something
    probe = _states(32, seed=9)[0]
    before = head(probe).detach()
    moved, _ = _states(256, seed=2)
    _observed(head, 1.5 * moved + 0.3)  # a rollout whose states sit elsewhere: the statistics move
    assert int(head.input_folds) == 2
    assert not torch.allclose(head.input_mean, _states(256, seed=1)[0].mean(0), atol=1e-3)
    assert torch.allclose(head(probe).detach(), before, atol=1e-4, rtol=1e-5)


def test_the_value_loss_does_not_reach_the_hidden_state() -> None:
    head = ValueHead(HIDDEN, input_mode="standardized")
    _observed(head, _states(64, seed=1)[0])
    hidden = _states(8, seed=3)[0].requires_grad_()
    (head(hidden) - 1).pow(2).sum().backward()
    assert hidden.grad is None  # nothing flowed back to it
    assert head.weight.grad.abs().sum() > 0  # while the head itself learns
    unit = ValueHead(HIDDEN, input_mode="unit")
    (unit(hidden) - 1).pow(2).sum().backward()
    assert hidden.grad.abs().sum() > 0  # the other inputs do train the LoRA through the value loss


def _adam_fit(input_mode: str, steps: int = 512, lr: float = 3e-4) -> float:
    """Held-out explained variance after ``steps`` Adam steps of 64 states (PPO's value budget of a 16-update run:
    2 epochs x 16 minibatches per update), the statistics observed on the training states first."""
    torch.manual_seed(0)
    head = ValueHead(HIDDEN, input_mode=input_mode)
    states, values = _states(2048, seed=1)
    if input_mode == "unit":
        torch.nn.init.zeros_(head.bias)
    _observed(head, states)
    optimizer = torch.optim.Adam(head.parameters(), lr=lr)
    order = torch.Generator().manual_seed(0)
    for _ in range(steps):
        index = torch.randint(0, len(states), (64,), generator=order)
        optimizer.zero_grad()
        (0.5 * (head(states[index]).squeeze(-1) - values[index]).pow(2).mean()).backward()
        optimizer.step()
    test_states, test_values = _states(512, seed=2)
    with torch.no_grad():
        return explained_variance(head(test_states).squeeze(-1), test_values)


def test_at_ppos_learning_rate_a_standardized_head_tells_states_apart_where_a_unit_head_cannot() -> None:
    assert _adam_fit("standardized") > 0.8
    assert _adam_fit("unit") < 0.1


def test_the_statistics_travel_with_the_state() -> None:
    head = ValueHead(HIDDEN, input_mode="standardized")
    _observed(head, _states(128, seed=1)[0])
    torch.nn.init.normal_(head.weight)
    buffer = io.BytesIO()
    torch.save(head.state_dict(), buffer)
    buffer.seek(0)
    loaded = ValueHead(HIDDEN)
    loaded.load_state_dict(torch.load(buffer, weights_only=True))
    probe = _states(4, seed=5)[0]
    assert loaded.input_mode == "standardized" and int(loaded.input_folds) == 1
    assert torch.equal(loaded(probe), head(probe))
    with pytest.raises(ValueError, match="value_input must be one of hidden, unit, standardized"):
        ValueHead(HIDDEN, input_mode="scaled")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm_gym.lm.testing import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny"))


def test_a_standardized_run_folds_each_rollout_and_resumes_with_its_statistics(tmp_path: Path, model_dir: Path) -> None:
    small = dict(num_envs=2, num_steps=8, minibatch_size=8, lora_rank=4, checkpoint_every=16, keep_checkpoints=5)
    config = tiny_config(model_dir, total_steps=48, value_input="standardized", **small)
    summary, _ = train(tmp_path / "whole", SHAPED, config)
    final = torch.load(Path(summary["checkpoint"]) / VALUE_HEAD_FILE, weights_only=True)
    assert int(final["input_folds"]) == summary["updates"] == 3
    assert not torch.equal(final["input_mean"], torch.zeros_like(final["input_mean"]))
    assert final["weight"].abs().sum() > 0  # the head learnt from zero
    logged = read_scalars(tmp_path / "whole")
    assert logged["values/mean"][1][0] == pytest.approx(0.0, abs=1e-6)  # every seed's first values are 0

    # The run as if killed after its first checkpoint: it resumes to the uninterrupted run's head, bit for bit
    # (Breakout: its env state is restored exactly, see test_ppo_lora_resume.py).
    resumed = resume_as_if_killed(tmp_path / "whole", tmp_path / "killed", "step_16", SHAPED, config)
    again = torch.load(Path(resumed["checkpoint"]) / VALUE_HEAD_FILE, weights_only=True)
    assert final.keys() == again.keys()
    assert all(torch.equal(final[k], again[k]) for k in final)
