"""TRL's GRPOTrainer takes optimisation steps on an llm-gym env with a tiny model: decisions as prompts, the episode's
return as the reward, every completion of a group playing the same task id and seed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("trl", reason="trl is not installed (make install-trainers)")
import torch  # noqa: E402

from llm_gym.integrations.trl_grpo import Decision, EpisodeReward, decision_dataset  # noqa: E402
from llm_gym.lm.testing import make_tiny_model  # noqa: E402

pytestmark = pytest.mark.trl

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trl_grpo.py"


def example_recipe():
    """examples/trl_grpo.py as a module (not run as a script): its ``grpo`` function and ``RECIPE``."""
    spec = importlib.util.spec_from_file_location("trl_grpo_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dataset_rows_are_the_agents_prompts_and_rewards_replay_exactly() -> None:
    rows = decision_dataset("OpenSpiel-tic_tac_toe-v0", [(None, 3), (None, 4)], lead_in=2)
    assert rows.num_rows == 2 and rows[0]["seed"] == 3
    assert rows[0]["prompt"][0]["role"] == "system" and "Tic-Tac-Toe" in rows[0]["prompt"][-1]["content"]
    reward = EpisodeReward()
    row = rows[0]
    again = reward(
        [row["prompt"]] * 2,
        [[{"role": "assistant", "content": "x(2,2)"}], "x(2,2)"],
        **{k: [row[k]] * 2 for k in ("env_id", "env_kwargs", "task_id", "seed", "lead_in")},
    )
    assert again[0] == again[1]  # same decision, same answer, same continuation: the same return
    decision = Decision("OpenSpiel-tic_tac_toe-v0", {}, None, 3, tuple(eval(row["lead_in"])))
    assert reward.score(decision, "not a move") == pytest.approx(reward.score(decision, "no idea"))
    reward.close()


def test_grpo_trainer_takes_two_steps_on_an_llm_gym_env(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir = make_tiny_model(tmp_path / "tiny", init_std=0.5)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    dataset = decision_dataset("OpenSpiel-tic_tac_toe-v0", [(None, seed) for seed in range(16)], lead_in=2)
    reward = EpisodeReward()
    # The example's recipe on the whole model (no LoRA), with a batch of two groups, a high learning rate and room
    # for a random model's answers, so that two steps move the weights.
    example = example_recipe()
    assert example.RECIPE["num_generations"] == 8
    trainer = example.grpo(
        model, tokenizer, dataset, reward, tmp_path / "grpo", 2, None,
        per_device_train_batch_size=16, max_completion_length=16, learning_rate=1e-2, seed=0, temperature=1.0,
    )  # fmt: skip
    assert trainer.state.global_step == 2
    changed = [n for n, p in model.named_parameters() if not torch.equal(p.detach(), before[n])]
    assert changed, "no parameter moved"
    # Every group of 8 completions played one decision: the same task id and seed. A random tiny model's answers
    # sometimes hold a legal id and mostly do not, so 4 groups of 8 have rewards that differ within some group.
    groups = [reward.scored[i : i + 8] for i in range(0, len(reward.scored), 8)]
    assert len(groups) == 4
    for group in groups:
        assert len({(task, seed) for task, seed, _ in group}) == 1
    logged = [entry for entry in trainer.state.log_history if "reward" in entry]
    assert len(logged) == 2
    reward.close()
