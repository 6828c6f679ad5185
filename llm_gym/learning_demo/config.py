"""The learning demo's settings: one frozen dataclass, a docstring under each field.

The defaults are what ``make demo`` runs: Kuhn poker against the env's uniformly random opponent, 256 games of
demonstrations from the exact best response (seeds 0-255), an ``sft`` run of the default model on them (LoRA on the
top 4 layers, 20 epochs: what it takes to learn the demonstrator's card-dependent answers, not only its most
frequent one), and greedy evaluations of the same model before and after on 100 held-out games (seeds 10,000-10,099).
Why this task: docs/guides/learning_demo.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SFT_EVAL_SEED_OFFSET = 10_000
"""sft (like ppo_lora) evaluates on seeds ``10,000 + seed + i`` (``EVAL_SEED_OFFSET`` in agents/ppo_lora/train.py;
the core does not import agents by name, a test checks the two agree)."""


@dataclass(frozen=True, kw_only=True)
class LearningDemoConfig:
    """What the demo records, trains and evaluates."""

    env_id: str = "OpenSpiel-kuhn_poker-v0"
    """The env: an OpenSpiel game against its default (uniformly random) opponent."""
    demonstrator: str = "best_response"
    """The agent whose play is recorded as demonstrations (any registered agent that plays the env)."""
    demo_episodes: int = 256
    """Games of demonstrations (about 1.1 decisions each, 10 distinct ones: sft runs a repeated one once per batch)."""
    demo_seed: int = 0
    """Demonstration game ``k`` resets with seed ``demo_seed + k``."""
    demo_explore: float = 0.0
    """Probability per decision that a demonstration game plays a random legal action instead of the demonstrator's
    (the line keeps the demonstrator's answer): positions its own play never reaches get demonstrated too
    (``llm-gym demos --explore``)."""
    model: str = "smollm2-135m"
    """The language model trained (the default is the one ``make install`` puts in)."""
    seed: int = 0
    """sft's seed; the evaluation games reset with seeds ``10,000 + seed + i`` (ppo_lora's held-out seeds)."""
    eval_episodes: int = 100
    """Games per evaluation (before, after, and the reference rows), the same seeds for each."""
    epochs: int = 20
    """sft passes over the demonstrations (3 learn "always bet"; 20 learnt the whole strategy on 5 of 5 seed sets)."""
    learning_rate: float = 1e-3
    """sft's peak learning rate."""
    batch_size: int = 16
    """Demonstrations per gradient step (sft's default; every measured run in docs/results/kuhn_poker_sft_demo.md used it except the
    rows that say otherwise)."""
    choice_loss_coef: float = 0.0
    """sft's choice loss beside the answer loss: the cross-entropy of the greedy decision itself (score mode's
    softmax over the legal actions' likelihoods); 0: the answer loss only."""
    choice_target: Literal["answer", "best"] = "answer"
    """sft's choice target: answer (the demonstrator's own) or best (any action its values rate as highly)."""
    trainable_layers: int = 4
    """LoRA on the top N layers; the frozen layers below run once per distinct demonstration."""
    threads: int = 0
    """Torch CPU threads (0: the runtime's default)."""
    dtype: str = "auto"
    """Model dtype (auto: bfloat16 on a CPU with AMX or AVX512-BF16, else float32; the results in docs/guides/learning_demo.md
    name theirs)."""
    agreement: bool = True
    """Also let the demonstrator play the held-out games and report, before and after, in how many of its distinct
    positions the model gives its answer (what was learnt, beyond games won: llm_gym/learning_demo/agreement.py)."""

    def __post_init__(self) -> None:
        for name in ("demo_episodes", "eval_episodes", "epochs", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 <= self.demo_explore < 1.0:
            raise ValueError(f"demo_explore is a probability per decision in [0, 1), got {self.demo_explore}")
        if self.trainable_layers < 0 or self.demo_seed < 0 or self.seed < 0:
            raise ValueError("trainable_layers, demo_seed and seed must be >= 0")
        if set(self.demo_seeds) & set(self.eval_seeds):
            raise ValueError(
                f"demonstration seeds {self.demo_seeds.start}-{self.demo_seeds.stop - 1} overlap the evaluation "
                f"seeds {self.eval_seeds.start}-{self.eval_seeds.stop - 1}: the evaluation must be held out"
            )

    @property
    def demo_seeds(self) -> range:
        """The seeds of the demonstration games."""
        return range(self.demo_seed, self.demo_seed + self.demo_episodes)

    @property
    def eval_seeds(self) -> range:
        """The seeds of the evaluation games (where sft evaluates)."""
        start = SFT_EVAL_SEED_OFFSET + self.seed
        return range(start, start + self.eval_episodes)
