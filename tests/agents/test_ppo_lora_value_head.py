"""``value_input=unit``: the value head reads the hidden state scaled to unit length. An Adam step then moves a value
by at most about lr * sqrt(hidden_size), where on the raw state (nearly one shared large vector, as SmolLM2's is on
Breakout) it moves every value at once by lr times the vector's L1 norm. The mode is saved with the head, and a
head saved before the option (a plain ``nn.Linear``'s state) reads as a head on the raw state."""

from __future__ import annotations

import io
import math
from pathlib import Path

import pytest
import torch

from llm_gym.agents.ppo_lora.model import VALUE_HEAD_FILE
from llm_gym.agents.ppo_lora.policy import load_value_head
from llm_gym.agents.ppo_lora.testing import tiny_config, train
from llm_gym.agents.ppo_lora.value_head import INPUTS, ValueHead
from llm_gym.training.curves import read_scalars

HIDDEN = 64


def _shared_vector_states(rows: int = 32) -> torch.Tensor:
    """States like SmolLM2's on Breakout: one vector of norm about 50 with a single large channel, plus a spread
    between states of about 1% of it."""
    generator = torch.Generator().manual_seed(0)
    shared = torch.randn(HIDDEN, generator=generator)
    shared[7] = 40.0
    return shared + 0.02 * torch.randn(rows, HIDDEN, generator=generator)


def _one_adam_step_move(input_mode: str, lr: float = 3e-4) -> tuple[float, float]:
    """(mean |value| before, mean |value change|) of one Adam step fitting the states' values to 0.1."""
    torch.manual_seed(0)
    head = ValueHead(HIDDEN, input_mode=input_mode)
    torch.nn.init.normal_(head.weight, std=HIDDEN**-0.5)
    torch.nn.init.zeros_(head.bias)
    states = _shared_vector_states()
    optimizer = torch.optim.Adam(head.parameters(), lr=lr)
    before = head(states).squeeze(-1).detach()
    (0.5 * (head(states).squeeze(-1) - 0.1).pow(2).mean()).backward()
    optimizer.step()
    after = head(states).squeeze(-1).detach()
    return float(before.abs().mean()), float((after - before).abs().mean())


def test_a_unit_input_bounds_an_adam_step_where_the_raw_state_moves_every_value_at_once() -> None:
    lr = 3e-4
    raw_start, raw_move = _one_adam_step_move("hidden", lr=lr)
    unit_start, unit_move = _one_adam_step_move("unit", lr=lr)
    bound = lr * (HIDDEN**0.5 + 1)  # the weights' step (each at most lr) on a unit vector, and the bias's
    assert unit_move <= bound
    # The raw head's step is lr times the shared vector's L1 norm: tens of times the unit head's here.
    assert raw_move > 10 * unit_move
    assert raw_move == pytest.approx(lr * float(_shared_vector_states().abs().sum(1).mean()), rel=0.1)
    # A fresh raw head starts at the shared vector's random projection; a fresh unit head near zero.
    assert raw_start > 10 * unit_start


def test_the_input_mode_travels_with_the_state_and_an_old_head_reads_as_raw() -> None:
    head = ValueHead(HIDDEN, input_mode="unit")
    buffer = io.BytesIO()
    torch.save(head.state_dict(), buffer)
    buffer.seek(0)
    loaded = ValueHead(HIDDEN)
    loaded.load_state_dict(torch.load(buffer, weights_only=True))
    states = _shared_vector_states(4)
    assert loaded.input_mode == "unit" and torch.equal(loaded(states), head(states))

    old = torch.nn.Linear(HIDDEN, 1)  # what value_head.pt held before the option
    into = ValueHead(HIDDEN, input_mode="unit")
    into.load_state_dict(old.state_dict())
    assert into.input_mode == "hidden" and torch.equal(into(states), old(states))
    flagged = {**head.state_dict()}  # a unit head saved before the standardised mode: a flag, no statistics
    flagged = {k: v for k, v in flagged.items() if k in ("weight", "bias")} | {"unit_input": torch.tensor(True)}
    into.load_state_dict(flagged)
    assert into.input_mode == "unit" and torch.equal(into(states), head(states))


def _saved_mode(checkpoint: Path) -> str:
    return INPUTS[int(torch.load(checkpoint / VALUE_HEAD_FILE, weights_only=True)["input_mode"])]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm_gym.lm.testing import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("value-head-lm"), layers=2, hidden=32)


def test_a_unit_run_saves_its_mode_and_a_warm_start_keeps_the_mode_its_head_was_trained_with(
    tmp_path: Path, model_dir: Path
) -> None:
    small = dict(total_steps=16, num_envs=2, num_steps=8, minibatch_size=8, lora_rank=4)
    summary, _ = train(
        tmp_path / "unit", "OpenSpiel-kuhn_poker-v0", tiny_config(model_dir, value_input="unit", **small)
    )
    checkpoint = Path(summary["checkpoint"])
    saved = torch.load(checkpoint / VALUE_HEAD_FILE, weights_only=True)
    assert INPUTS[int(saved["input_mode"])] == "unit"
    played = load_value_head(checkpoint, hidden_size=32, device="cpu")
    assert played is not None and played.input_mode == "unit"
    logged = read_scalars(tmp_path / "unit")
    assert {"values/mean", "values/return_mean"} <= logged.keys()  # every update says where the head sits

    # A hidden-mode run warm-started from it keeps the unit head (its weights were fitted on unit inputs) ...
    # ... and says that the run's own value_input does not apply to it.
    with pytest.warns(UserWarning, match="value_input=hidden does not apply"):
        warm, _ = train(
            tmp_path / "warm", "OpenSpiel-kuhn_poker-v0", tiny_config(model_dir, init_adapter=str(checkpoint), **small)
        )
    assert _saved_mode(Path(warm["checkpoint"])) == "unit"
    # ... and a fresh hidden-mode run saves a raw head.
    plain, _ = train(tmp_path / "plain", "OpenSpiel-kuhn_poker-v0", tiny_config(model_dir, **small))
    assert _saved_mode(Path(plain["checkpoint"])) == "hidden"


def test_value_scalars_give_the_advantage_of_the_decisions_that_ended_an_episode() -> None:
    from types import SimpleNamespace

    from llm_gym.agents.ppo_lora.rollout import Rollout, value_scalars

    rollout = Rollout(
        decisions=[SimpleNamespace(values=torch.tensor([1.0, 1.0])) for _ in range(3)],  # type: ignore[misc]
        rewards=[torch.tensor([0.0, 0.0]), torch.tensor([0.5, 0.0]), torch.tensor([0.0, 0.2])],
        # env 0's episode ends at step 1 (step 2 follows a reset); env 1's at the rollout's last step (last_done).
        dones=[torch.tensor([0.0, 0.0]), torch.tensor([0.0, 0.0]), torch.tensor([1.0, 0.0])],
        truncated_values=[torch.zeros(2)] * 3,
        last_done=torch.tensor([0.0, 1.0]),
    )
    scalars = value_scalars(rollout, returns=torch.full((3, 2), 0.25), gamma=0.99)
    assert scalars["values/mean"] == pytest.approx(1.0)
    assert scalars["values/return_mean"] == pytest.approx(0.25)
    assert scalars["values/end_advantage"] == pytest.approx(((0.5 - 1.0) + (0.2 - 1.0)) / 2)

    rollout.last_done = torch.zeros(2)
    rollout.dones = [torch.zeros(2)] * 3
    assert math.isnan(value_scalars(rollout, torch.zeros(3, 2), 0.99)["values/end_advantage"])
