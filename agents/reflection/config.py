"""The ``reflection`` config: one frozen dataclass, a docstring under each field (the CLI's help text)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Literal

from llm_gym.config import speed_only, training_only
from llm_gym.lm.agent_config import LocalLMConfig


@dataclass(frozen=True, kw_only=True)
class ReflectionConfig(LocalLMConfig):
    first_fields: ClassVar[tuple[str, ...]] = ("iterations", "episodes", "max_steps", "seed", "model", "action_mode",
        "finetune", "learning_rate", "eval_episodes", "eval_max_steps", "threads")  # fmt: skip
    """The fields `llm-gym agents` shows first."""
    renamed: ClassVar[Mapping[str, str]] = {"epochs": "update_epochs", "train_batch_size": "minibatch_size"}
    """reflection's first names of the knobs the PPO agents name so (an iteration's examples are its rollout)."""
    total_steps: int = training_only(0)
    """Not used: the budget is iterations x episodes x max_steps."""
    model: str = "smollm2-135m"
    """smollm2-135m (the default, text), a local model directory (a text LM, or an image+text model such as
    SmolVLM for the vision envs), or a cached HF id."""
    batch_size: int = speed_only(16)
    """Most prompts per forward pass when acting, reflecting and replaying."""

    # -- trial -------------------------------------------------------------------------------------------------
    iterations: int = training_only(3)
    """Trial -> reflect -> verify -> fine-tune rounds."""
    episodes: int = training_only(20)
    """Episodes per trial, played in lockstep (one batched LM call per step)."""
    max_steps: int = training_only(1000)
    """Cut each trial episode after this many steps."""
    action_mode: Literal["score", "generate"] = "score"
    """How the model acts: score (a categorical over the legal actions' likelihoods, exact) or generate (it writes
    an answer that the shared parser reads)."""
    trial_greedy: bool = training_only(False)
    """Trial: take the most likely action instead of sampling (sampling shows the model more of the game)."""
    temperature: float = training_only(1.0)
    """generate mode: sampling temperature in the trial."""
    max_new_tokens: int = 16
    """generate mode: answer length budget when acting."""

    # -- reflection --------------------------------------------------------------------------------------------
    reflection_rate: float = training_only(0.3)
    """Share of each episode's steps to reflect on: those with the lowest discounted outcome (see credit_gamma)."""
    credit_gamma: float = training_only(0.9)
    """Discount of the credit-assignment rule: a reward k steps after a move is charged to it with weight gamma^k."""
    life_penalty: float = training_only(1.0)
    """A lost life counts as this negative reward when choosing poor steps and in verification replays (Breakout
    punishes by lives, not rewards); reported returns are the game's own."""
    outcome_threshold: float = training_only(0.0)
    """Only steps whose discounted outcome is below this are reflected on."""
    max_reflections: int = training_only(64)
    """At most this many reflections per iteration (the lowest outcomes over all episodes); 0: no cap."""
    reflection_answer: Literal["json", "scored"] = training_only("json")
    """json: the model answers with a JSON object naming the corrected action (unparsable answers are counted and
    skipped); scored: the model writes its analysis, and the corrected action is the other legal action it then
    rates most likely (always legal: for models that cannot be relied on to write valid JSON)."""
    reflection_tokens: int = training_only(128)
    """Answer length budget of a reflection (the JSON object)."""
    reflection_temperature: float = training_only(0.0)
    """Sampling temperature of reflections (0: greedy)."""

    # -- verification ------------------------------------------------------------------------------------------
    verify: bool = training_only(True)
    """Replay each proposed action from the stored env snapshot and keep it only if it does at least as well as
    the action taken (envs that cannot clone their state keep every parsed correction, counted as unverified)."""
    verify_horizon: int = training_only(16)
    """Steps replayed after the reflected step (the corrected or the taken action, then the continuation policy)."""
    continuation: Literal["model", "random"] = training_only("model")
    """Continuation policy of both replays: the current model, greedy; or seeded random legal actions."""
    keep_ties: bool = training_only(True)
    """Keep a correction whose replay scores exactly as well as the action taken ("at least as well")."""

    # -- fine-tuning -------------------------------------------------------------------------------------------
    finetune: Literal["lora", "full"] = "lora"
    """lora: train LoRA adapters (peft) on the language model; full: train all language-model weights."""
    update_epochs: int = training_only(3)
    """Passes over each iteration's verified examples."""
    minibatch_size: int = training_only(4)
    """Examples per gradient step."""
    learning_rate: float = training_only(2e-4)
    """AdamW learning rate (LoRA; use about 2e-5 for a full fine-tune)."""
    weight_decay: float = training_only(0.0)
    """AdamW weight decay."""
    max_grad_norm: float = training_only(1.0)
    """Gradient-norm clip."""
    lora_rank: int = 16
    """LoRA rank r."""
    lora_alpha: float = 32.0
    """LoRA scaling alpha (the update is scaled by alpha / r)."""
    lora_dropout: float = training_only(0.0)
    """Dropout on the LoRA input."""
    lora_targets: tuple[str, ...] = training_only(
        ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    )
    """Language-model module names that get LoRA adapters (a vision encoder's layers never do)."""

    # -- evaluation --------------------------------------------------------------------------------------------
    eval_episodes: int = training_only(4)
    """Greedy episodes on held-out seeds before training and after every iteration (0: none)."""
    eval_max_steps: int = training_only(1000)
    """Cut evaluation episodes after this many steps."""
    eval_seed: int = training_only(10_000)
    """Evaluation episode i uses seed eval_seed + i (disjoint from trial seeds, which start at seed)."""
    progress: bool = training_only(True)
    """Show progress bars."""

    def __post_init__(self) -> None:
        super().__post_init__()
        positive = ("iterations", "episodes", "max_steps", "batch_size", "update_epochs", "minibatch_size", "lora_rank")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 <= self.reflection_rate <= 1.0:
            raise ValueError(f"reflection_rate must be in [0, 1], got {self.reflection_rate}")
        if not 0.0 <= self.credit_gamma <= 1.0:
            raise ValueError(f"credit_gamma must be in [0, 1], got {self.credit_gamma}")
        if self.verify_horizon < 1:
            raise ValueError(f"verify_horizon must be >= 1, got {self.verify_horizon}")
