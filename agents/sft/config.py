"""The ``sft`` config: one frozen dataclass, a docstring under each field (the CLI's help text).

The model, LoRA and action-mode fields mean what they mean in ``ppo_lora`` and default to the same values, so an
SFT checkpoint is a ``ppo_lora`` checkpoint: ``ppo_lora --set init_adapter=RUN/checkpoints/best`` continues from it
with the same adapter shape (:meth:`SFTConfig.as_ppo_lora`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import ClassVar, Literal

from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.config import training_only
from llm_gym.lm.agent_config import LoRAConfig
from llm_gym.training.config import ScheduleConfig


@dataclass(frozen=True, kw_only=True)
class SFTConfig(LoRAConfig, ScheduleConfig):
    """The model and its LoRA (LoRAConfig) and the optimiser and its schedule (ScheduleConfig) as ppo_lora declares
    them, and sft's own fields below."""

    first_fields: ClassVar[tuple[str, ...]] = ("demos", "epochs", "seed", "model", "action_mode", "learning_rate",
        "trainable_layers", "minibatch_size", "eval_episodes", "threads")  # fmt: skip
    """The fields `llm-gym agents` shows first."""
    renamed: ClassVar[Mapping[str, str]] = {"warmup_steps": "warmup_updates", "batch_size": "minibatch_size"}
    """sft's first names of the knobs every learner now names alike (ppo_lora's names)."""
    demos: str = training_only("")
    """The demonstrations file (JSONL from ``llm-gym demos``); required."""
    total_steps: int = training_only(0)
    """Unused: sft learns from the demos file, not from env steps (``epochs`` sets its budget)."""
    action_mode: Literal["score", "generate"] = "score"
    """How the trained model acts (ppo_lora's meaning): score rates each legal action's name; generate writes the
    answer (needed where the action is free text, e.g. Trace-v0)."""
    max_new_tokens: int = 16
    """generate mode: answer length budget when acting (Trace answers need a few hundred)."""
    score_with_end: bool = True
    """Train (and score) each answer followed by the chat template's end-of-answer token, as ppo_lora scores it."""

    # -- data --------------------------------------------------------------------------------------------------
    validation_fraction: float = training_only(0.1)
    """Share of the demo *episodes* (never single decisions of an episode) held out for the validation loss."""
    max_demos: int = training_only(0)
    """Use at most this many decisions of the file (the first ones, whole episodes); 0: all."""
    init_adapter: str = training_only("")
    """Start from this sft or ppo_lora checkpoint's adapter and value head (a run directory: its newest checkpoint)
    instead of a fresh LoRA, e.g. to continue on more demos. Its LoRA must sit on the layers ``trainable_layers``
    gives. The optimiser and schedule start fresh (``--resume`` continues a run of its own instead)."""

    # -- optimisation ------------------------------------------------------------------------------------------
    epochs: int = training_only(3)
    """Passes over the training demos."""
    learning_rate: float = 5e-4
    minibatch_size: int = 16
    warmup_updates: int = 5
    micro_batch_size: int = training_only(16)
    """Demos per forward/backward pass: a larger ``minibatch_size`` accumulates the gradient over micro-batches (the
    same gradient, less memory). Demos a batch repeats (the same prompt and answer) run as one row counted as often
    (the same loss and gradient), so this is distinct demos per pass. Memory grows with it: LoRA on every layer of the default model in float32 takes
    about 0.5 GiB per tic-tac-toe demo (minibatch_size=64 in one pass ran out of 24 GiB)."""
    choice_loss_coef: float = training_only(0.0)
    """Weight of the choice loss beside the answer loss: the cross-entropy of the demo's answer among the legal
    actions under score mode's softmax over each action's sequence log-likelihood, i.e. of the very decision greedy
    score-mode play makes (the answer loss raises the answer's likelihood but does not lower a rival's). Needs demos
    that list their ``choices`` (``llm-gym demos`` writes them); 0: answer loss only."""
    choice_target: Literal["answer", "best"] = training_only("answer")
    """What the choice loss counts as right: answer, the demo's own answer; best, any legal action the demonstrator
    values as highly as its best (``choice_values``, e.g. every optimal move of the exact solver), so the loss is
    -log of the probability of picking one of them and only worse moves are pushed down (the answer loss still
    pulls toward the demo's own choice among them)."""
    value_coef: float = training_only(0.5)
    """Weight of the value head's warm-up loss (MSE to each demo's return-to-go times reward_scale); 0: the value
    head is not trained (it stays at its initialisation, as in a fresh ppo_lora run)."""
    value_input: Literal["hidden", "unit"] = training_only("hidden")
    """What the value head reads (ppo_lora's option): the last prompt position's hidden state, or that state scaled to
    unit length. A ppo_lora run warm-started from this checkpoint keeps the head's input whatever its own
    ``value_input`` says (and warns where the two differ), so set it here to the ppo_lora run's value.
    (``standardized`` is ppo_lora's only: its statistics come from the states PPO's rollouts visit.)"""
    reward_scale: float = training_only(1.0)
    """Returns-to-go are multiplied by this for the value warm-up: set it to the ppo_lora run's reward_scale."""
    value_gamma: float = training_only(1.0)
    """Discount per env step of the value warm-up's targets: 1 takes each demo's return_to_go (undiscounted, to
    its episode's end); set it to the ppo_lora run's gamma (0.99) so the warmed value head predicts the discounted
    returns PPO's does. On Atari PPO's training episodes end at a life loss: record the demos with --env-arg
    terminal_on_life_loss=true to match that too. Needs played episodes (not a demo tree's expected values)."""

    # -- evaluation and checkpoints ----------------------------------------------------------------------------
    eval_every: int = training_only(1)
    """Greedy evaluation after every this many epochs (and at the end, and before training unless
    ``eval_at_start`` is off); 0: only at the start and the end."""
    eval_at_start: bool = training_only(True)
    """Evaluate the untrained model before the first epoch (the "before" of a before/after comparison). Turn it off
    where that evaluation is the expensive part (generate mode with long answers) and the zero-shot score is known."""
    eval_episodes: int = training_only(8)
    """Episodes per evaluation, on ppo_lora's held-out seeds (seed + 10,000 + i); 0: no evaluation."""
    eval_max_steps: int = training_only(2000)
    """Cut evaluation episodes after this many steps (0: no cut)."""
    video: bool = training_only(False)
    """Record the first evaluation episode as an mp4 where the env renders frames."""
    keep_checkpoints: int = training_only(2)
    """Epoch checkpoints kept (the best-evaluation checkpoint is kept besides them)."""
    checkpoint_every: int = training_only(0)
    """Also checkpoint every N gradient steps inside an epoch, so a killed long epoch resumes where it was
    (``--resume``); 0: at the end of each epoch only."""
    frozen_cache: str = training_only("run")
    """Keep the frozen layers' output of the demos on disk, so ``--resume`` and later runs on the same demos skip that
    pass (minutes on a CPU): ``run``, in RUN_DIR/frozen_cache (230 MB for the 1,090 tic-tac-toe tree demos under
    the default model in bfloat16, about twice that in float32); ``off``; or a directory, shared by the runs that
    name it. A file is read only where the weights below the split, the system prompt, the demos' rows and the
    batch size all match; nothing is kept with trainable_layers=0 (no frozen layers)."""
    progress: bool = training_only(True)
    """Show a progress bar and print the before/after table at the end."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("epochs", "minibatch_size", "micro_batch_size", "lora_rank", "max_new_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 <= self.validation_fraction < 1.0:
            raise ValueError(f"validation_fraction must be in [0, 1), got {self.validation_fraction}")
        if self.choice_target not in ("answer", "best"):
            raise ValueError(f"choice_target must be answer or best, got {self.choice_target!r}")
        if not 0.0 < self.value_gamma <= 1.0:
            raise ValueError(f"value_gamma must be in (0, 1], got {self.value_gamma}")
        if self.choice_loss_coef < 0:
            raise ValueError(f"choice_loss_coef must be >= 0, got {self.choice_loss_coef}")
        for name in (
            "trainable_layers",
            "max_demos",
            "eval_every",
            "eval_episodes",
            "warmup_updates",
            "checkpoint_every",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")

    def as_ppo_lora(self) -> PPOLoRAConfig:
        """The ppo_lora config with this one's shared fields: what the model, the evaluation and the checkpoint
        policy are built from, so all three are ppo_lora's own code."""
        shared = {f.name for f in fields(PPOLoRAConfig)} & {f.name for f in fields(self)} - {
            "total_steps",
            "eval_every",
            "checkpoint_every",
        }
        values = {name: getattr(self, name) for name in shared}
        # sft fits a value head beside the adapter (value_coef), for a warm start of ppo_lora's critic: the model
        # is built as gae builds it, whatever ppo_lora's default estimator.
        return PPOLoRAConfig(**values, advantage="gae", checkpoint_every=0)
