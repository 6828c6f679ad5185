"""The ``ppo_lora`` config: one frozen dataclass, a docstring under each field (the CLI's help text)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from llm_gym.config import speed_only, training_only
from llm_gym.lm.agent_config import LoRAConfig
from llm_gym.training.config import PPOConfig, ScheduleConfig


@dataclass(frozen=True, kw_only=True)
class PPOLoRAConfig(LoRAConfig, PPOConfig, ScheduleConfig):
    """The model and its LoRA (LoRAConfig), PPO's rollouts and losses (PPOConfig) and the learning-rate schedule
    (ScheduleConfig) as every agent names them, and ppo_lora's own fields below."""

    # Old field names that runs saved before a rename still load under (num_minibatches lived for one day).
    renamed: ClassVar[Mapping[str, str]] = {"num_minibatches": "max_minibatches"}
    # The defaults changed when the group estimator and the target loss became the recipe (issue 87): a run saved
    # before these fields existed trained with the critic and the clipped ratio, and loads so.
    saved_defaults: ClassVar[Mapping[str, Any]] = {"advantage": "gae", "policy_loss": "clip"}

    total_steps: int = training_only(20_000)
    """Environment steps to train for, summed over parallel envs."""
    action_mode: Literal["score", "generate"] = "score"
    """score: a categorical over the legal actions from each action name's likelihood (exact, no parse failures);
    generate: sample an answer and parse it (needed for envs whose action is free text, e.g. Trace-v0)."""

    # -- rollouts ----------------------------------------------------------------------------------------------
    episode_options: tuple[dict[str, Any], ...] = training_only(())
    """Each training episode resets with one of these sets of reset options, drawn uniformly (its own generator,
    seeded by seed): e.g. '[{"opponent": "random"}, {"opponent": "mcts"}]' trains an OpenSpiel game against both
    opponents at once, each episode against one. The summary reports episodes and mean return per set. ():
    the env's own options. Evaluation keeps the env's own. Not with a curriculum, whose sampler picks the options."""
    max_episode_steps: int = training_only(0)
    """Cut a training episode after this many steps (bootstrapped as a time limit); 0: the env's own limit."""
    start_spread: int = training_only(0)
    """Before the first rollout, env i plays a uniform draw of 0..start_spread uniformly random legal actions (not
    learnt from, not counted in total_steps), so that the envs stand at different points of their games. Without it
    every env starts at a game's opening, and on Breakout the first update then learns the opening only
    (docs/results/ppo_lora_breakout.md, "a run's first rollout is all game openings"). 0: no spread. Not with a curriculum
    (random play would feed its statistics); ignored on --resume."""
    max_new_tokens: int = 16
    """generate mode: answer length budget."""
    frozen_cache_mb: int = speed_only(512)
    """Keep the frozen layers' output of up to this many MiB of distinct decision rows (the most recently used), so
    a position met again skips those layers (agents/ppo_lora/frozen_rows.py; a row's numbers never depend on what
    the store held, so the results are the same at any size). 0: keep none."""
    action_prior: Literal["model", "calibrated"] = training_only("model")
    """score mode: model: the policy is the LM's likelihood of each action name, its prior over the names included;
    calibrated: before the first rollout, fit one log-probability offset per action name so the starting policy
    picks each action equally often on average over calibration_states states of random play (the offsets are kept
    in the checkpoint and used wherever it acts; docs/results/ppo_lora_breakout.md, "Calibrating the prior over action names"). A
    run warm-started from a checkpoint with offsets keeps those."""
    calibration_states: int = training_only(256)
    """action_prior=calibrated: states the offsets are fitted on (random legal play in envs seeded apart from
    training's; one forward pass per state: 256 Breakout states took 33 s on a 2-core CPU shared with two other
    jobs)."""
    score_with_end: bool = True
    """score mode: score each action name followed by the chat template's end-of-answer token, so a name that is a
    prefix of another ("1" vs "10") gets the probability of being the whole answer."""
    rollout_backend: Literal["hf", "vllm"] = training_only("hf")
    """Who picks the rollout's actions: hf (the training model itself) or vllm (a vLLM engine serving the adapter
    of the latest update; the training model still recomputes every log-prob the update uses). vllm pays off in
    generate mode; in score mode the training model's forward already scores every action (docs/guides/ppo_lora.md)."""
    rollout_kv_cache_gib: float = training_only(1.0)
    """rollout_backend=vllm: the engine's KV cache in GiB (on a CPU it comes out of RAM)."""
    rollout_memory_share: float = training_only(0.25)
    """rollout_backend=vllm: the share of the GPU's memory (on a CPU: of RAM) the engine may take; the training
    model needs the rest."""

    # -- advantages --------------------------------------------------------------------------------------------
    advantage: Literal["gae", "group", "step_group", "exact"] = training_only("group")
    """How each decision's advantage is estimated (llm_gym/rl/advantages.py; docs/guides/groups.md). group: the envs
    play in groups of group_size episodes reset with one task id and seed (so from the identical start); a decision
    gets its episode's return minus the mean return of the group's other episodes (RLOO/GRPO). step_group: plus, for
    decisions of a group that saw the identical prompt, the reward-to-go minus that of the others that saw it
    (GiGPO). Neither builds, trains nor saves a value head, and a rollout holds whole episodes (at least
    num_envs * num_steps decisions; the groups in play when that is reached are played to their ends). gae: a value
    head on the last prompt token and generalised advantage estimation over fixed rollouts of num_steps per env.
    exact (small OpenSpiel games against the random opponent only): no rollout; each update asks the policy about
    every position of the game tree and trains every legal action's exact advantage under it (exact policy mirror
    descent, llm_gym/training/position_tree.py); an update counts as one env step per position.
    group is the default because it measured better than gae on Kuhn poker from zero at twice the speed
    (docs/guides/groups.md, "Results"); the settings that work on the value head need advantage=gae."""
    exact_weights: Literal["positions", "visits"] = training_only("positions")
    """exact: how the update weighs its positions. positions: all alike (each position's own improvement step, policy
    mirror descent as over a table: a position the policy rarely meets, where a policy stuck at a local optimum must
    change, moves as much as any); visits: by how often the policy meets each (the policy gradient's weights). The
    advantages are in return units (not normalised), so target_temperature sets the step: the presets use 0.25
    (kuhn-poker-exact) and 0.1 (tic-tac-toe-exact). Every minibatch of every epoch is used (max_minibatches does not
    apply)."""
    exact_focus_epochs: int = training_only(0)
    """exact: after the update_epochs passes over every position, this many more over the positions the greedy policy
    reaches (the asked policy's most likely action at each of its positions, against every chance outcome and opponent
    reply): where the greedy evaluation is decided, on tic-tac-toe a few hundred of the 13,306. A pass teaches a position
    little about the next one, so an update learns a position mostly by seeing it again: these passes spend that
    where the policy plays. 0 (the default) trains every position alike."""
    group_size: int = training_only(8)
    """group, step_group: episodes per group (num_envs must be a multiple of it)."""
    group_scale: bool = training_only(False)
    """group, step_group: divide each advantage by its group's (or anchor set's) std of returns, as GRPO does;
    False leaves them in return units (RLOO), and advantage_norm scales the whole rollout."""
    step_weight: float = training_only(1.0)
    """step_group: weight of the step-level advantage added to the episode-level one."""
    branch_fraction: float = training_only(0.0)
    """group, step_group: the chance that a group starts at a state the policy visited earlier in the same rollout
    (reached again by replaying its episode's seed and actions) rather than at a new game's start, so that positions
    deep in a game get a group of their own (llm_gym/training/branches.py). 0: every group starts at a reset."""

    # -- LoRA and the value head -------------------------------------------------------------------------------
    init_seed: int | None = training_only(None)
    """The starting policy's random draws: the fresh LoRA's A matrices, the value head and, with
    action_prior=calibrated, the calibration states. None: seed, which sets everything else (the envs' seeds, the
    sampled actions, the minibatch order). Two runs that swap init_seed and seed tell which of the two decides a
    result (docs/results/ppo_lora_breakout.md, "Which seed decides")."""
    init_adapter: str = training_only("")
    """Start from this checkpoint (an sft or ppo_lora checkpoint directory, or a run directory: its newest one):
    its adapter/ and, where present, value_head.pt, instead of a fresh LoRA (whose shape then comes from the
    adapter; trainable_layers must match it). Ignored on --resume, which continues from the run's own checkpoint."""

    # -- PPO ---------------------------------------------------------------------------------------------------
    lr_schedule: Literal["cosine", "linear", "constant"] = training_only("cosine")
    """Learning-rate schedule over the updates of the run."""
    max_minibatches: int = training_only(4)
    """At most this many optimizer steps per epoch: a rollout of more than max_minibatches * minibatch_size decisions
    takes this many steps, each with its gradient accumulated over rollout_size / max_minibatches decisions (in
    passes of minibatch_size), instead of more steps of the same size. So more envs make each step's gradient less
    noisy instead of moving the policy further per update (docs/guides/ppo_lora.md, "The update")."""
    advantage_norm: Literal["rollout", "minibatch", "none"] = training_only("rollout")
    """Normalise advantages to mean 0, std 1 over the whole rollout (rollout), over each optimizer step's decisions
    (minibatch: the usual PPO code; noisy when a minibatch holds few reward events), or not at all (none)."""
    policy_loss: Literal["auto", "clip", "target"] = training_only("auto")
    """auto: target in score mode, clip in generate mode (which has no distribution over actions to improve).
    clip: PPO's clipped ratio loss. target (score mode): the cross-entropy to the improved distribution, the old
    policy with the taken action's probability times exp(advantage / target_temperature) (a KL-regularised
    improvement step, as MPO and AWR take): an action that did better than expected is pulled up however unlikely it
    was, and one that did worse is pushed down by at most its own probability. Why it exists:
    docs/guides/groups.md, "Why a target loss"."""
    target_temperature: float = training_only(1.0)
    """policy_loss=target: the temperature of the improvement step, in units of the (normalised) advantage: lower
    moves each update further towards the better action."""
    value_input: Literal["hidden", "unit", "standardized"] = training_only("hidden")
    """What a fresh value head reads: the last prompt position's hidden state as it is, scaled to unit length
    (``unit``), or standardised per channel with the statistics of the states the rollouts visit, detached from
    the LoRA (``standardized``). On SmolLM2 that state is nearly one shared vector of norm about 56, so a fresh head
    on it starts with one value for every state, set by the seed (-3.7 to +2.0 over seeds 0-9 on Breakout) and moved
    at most value_clip_coef per update: while it is below zero, losing a ball looks good. ``unit`` starts every seed
    near zero but still reads states that differ by about 1.5%, so it stays one value for all of them;
    ``standardized`` starts at zero and reads what tells the states apart (agents/ppo_lora/value_head.py,
    docs/results/ppo_lora_breakout.md). A head loaded from a checkpoint (resume, init_adapter) keeps the input it was
    trained on; a warm start whose head differs from this setting warns."""
    action_head: Literal["none", "standardized"] = training_only("none")
    """``standardized``: a learnt offset per action name from the standardised hidden state that a
    ``value_input=standardized`` head reads, added to each action's log-likelihood in score mode (a linear policy head
    beside the LoRA, detached from it, starting at zero). On Breakout that state tells the ball's side of the paddle
    in 99-100% of held-out states while the policy, moving through the LoRA alone, learns to follow it in some seeds
    only (agents/ppo_lora/action_head.py, docs/results/ppo_lora_breakout.md). Its names are those legal at the first
    reset; saved with every checkpoint (``action_head.pt``) and used by play and bench. Score mode and
    rollout_backend=hf only. A checkpoint's head (resume, init_adapter) is kept whatever this says. Measured on
    Breakout at the 64-env recipe: seeds 0 and 7 fail with it as without it (the advantages carry little tracking
    signal at gae_lambda=0.95), so it is not a default."""
    value_warmup_updates: int = training_only(0)
    """The first N updates fit the value head alone to the rollout's returns (unclipped squared error); the LoRA
    weights, so the policy, and the KL coefficient stay as they are. For a warm start whose value head predicts
    something else than PPO's discounted returns (sft warms it on undiscounted returns-to-go of whole games), or a
    fresh head, so the first policy updates are not steered by value-error noise. Each costs one forward pass of the
    trainable layers over the rollout (the passes below re-read its output); its env steps count toward total_steps,
    and the learning-rate schedule (warmup_updates included) starts after it."""
    value_warmup_epochs: int = training_only(128)
    """Passes over the rollout per warm-up update, in steps of minibatch_size decisions (each step is one linear
    layer: 128 passes over 256 decisions take about a second on a CPU; benchmarks/value_warmup.py)."""
    value_warmup_learning_rate: float = training_only(5e-3)
    """Adam learning rate of the warm-up's passes (a fresh optimizer per warm-up update; the run's own optimizer
    and schedule are not touched). At the run's 2e-4 and 2 passes a fresh head on Breakout explained 2% of the
    next rollout's return variance, at 5e-3 and 128 passes 18% (docs/guides/ppo_lora.md)."""
    entropy_target: float = training_only(0.0)
    """An entropy floor in nats (0 = off): after each update the entropy bonus's coefficient grows while the policy's
    mean entropy on the rollout is below this and falls back towards entropy_coef above it, so the sampled policy
    keeps exploring. It does not keep the greedy action from being the same in every state (docs/results/ppo_lora_breakout.md,
    "An entropy floor": on Breakout it rescued one seed and not another)."""
    entropy_adapt_rate: float = training_only(1.0)
    """entropy_target: the coefficient moves by at most a factor e ** rate per update (at an entropy of 0 or of
    twice the target)."""
    entropy_coef_max: float = training_only(0.5)
    """entropy_target: the coefficient never exceeds this."""
    reward_scale: float = training_only(1.0)
    """Rewards are multiplied by this before GAE (returns are logged unscaled)."""
    kl_coef: float = training_only(0.02)
    """Weight of KL(policy || reference) in the loss (the reference: kl_reference). 0 skips the reference pass."""
    kl_reference: Literal["start", "base"] = training_only("start")
    """Whom the KL term measures the policy against. start: the policy the run started from. On a warm start
    (init_adapter) that is the warm start's adapter, loaded a second time, frozen, beside the one being trained, and
    copied into the run directory so --resume keeps it; with a fresh LoRA it is the base model, which the fresh
    adapter starts equal to. base: the base model with the adapter disabled, whatever the run started from, so a
    warm-started run is pulled back towards the zero-shot model (what every run before this setting did; the
    Breakout and Trace warm-start scripts set kl_coef=0 for that reason)."""
    kl_target: float = training_only(0.0)
    """Adaptive KL: steer kl_coef so the measured KL per decision tracks this value; 0 keeps kl_coef fixed."""
    kl_horizon: int = training_only(10_000)
    """Adaptive KL: decisions over which the coefficient adapts (Ziegler et al. 2019)."""

    # -- evaluation and checkpoints ----------------------------------------------------------------------------
    eval_every: int = training_only(4096)
    """Greedy evaluation every this many env steps (0: only at the end)."""
    eval_episodes: int = training_only(4)
    """Episodes per evaluation (played in parallel)."""
    eval_max_steps: int = training_only(2000)
    """Cut evaluation episodes after this many steps (0: no cut)."""
    eval_exact: bool = training_only(False)
    """Small OpenSpiel games against the random opponent: each evaluation also computes the greedy policy's exact
    expected return and win/draw/loss over every chance and opponent move, the worst case against an adversary
    (perfect information) or the exploitability (poker) (llm_gym/training/exact.py: ``llm-gym play --exact``); logged as
    ``eval/exact_*``, the last one in the summary; with eval_episodes=0 the evaluations are the exact ones alone. Kuhn
    poker asks the policy about 12 positions, tic-tac-toe about 2,000."""
    video: bool = training_only(True)
    """Record the first evaluation episode as an mp4 where the env renders frames."""
    checkpoint_every: int = training_only(2048)
    """Write a checkpoint every this many env steps (and at the end)."""
    keep_checkpoints: int = training_only(2)
    """Step checkpoints kept (the best-evaluation checkpoint is kept besides them)."""
    progress: bool = training_only(True)
    """Show a progress bar."""

    @property
    def starting_seed(self) -> int:
        """The seed of the starting policy's random draws: init_seed, or the run's seed."""
        return self.seed if self.init_seed is None else self.init_seed

    def __post_init__(self) -> None:
        super().__post_init__()
        positive = ("num_envs", "num_steps", "minibatch_size", "max_minibatches", "update_epochs", "lora_rank",
                    "value_warmup_epochs", "calibration_states")  # fmt: skip
        for name in (*positive, "max_new_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.init_seed is not None and self.init_seed < 0:
            raise ValueError(f"init_seed must be >= 0 (or unset: the run's seed), got {self.init_seed}")
        if self.action_prior == "calibrated" and self.action_mode != "score":
            raise ValueError(
                "action_prior=calibrated offsets the scored action names: it needs action_mode=score (generate mode "
                "samples free text, which has no per-action prior to offset)"
            )
        if self.action_head != "none" and (self.action_mode != "score" or self.rollout_backend != "hf"):
            raise ValueError(
                "action_head offsets the scored action names from the model's hidden state: it needs "
                "action_mode=score and rollout_backend=hf (generate mode has no per-action choice, and the vLLM "
                "engine returns no hidden states); use action_head=none there"
            )
        if self.policy_loss == "target" and self.action_mode != "score":  # auto picks clip there
            raise ValueError(
                "policy_loss=target improves the distribution over the legal actions: it needs action_mode=score "
                "(generate mode samples tokens, with no distribution over actions to improve); use policy_loss=clip"
            )
        if self.target_temperature <= 0:
            raise ValueError(f"target_temperature must be > 0, got {self.target_temperature}")
        if not 0 < self.rollout_memory_share < 1 or self.rollout_kv_cache_gib <= 0:
            raise ValueError("rollout_memory_share must be in (0, 1) and rollout_kv_cache_gib > 0")
        for name in ("trainable_layers", "value_warmup_updates", "exact_focus_epochs", "start_spread", "entropy_coef", "entropy_target",
                     "entropy_adapt_rate"):  # fmt: skip
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.uses_groups:  # after the ranges: a negative start_spread is reported as that
            self._check_groups()
        if self.advantage == "exact":
            self._check_exact()
        if not 0 <= self.branch_fraction <= 1 or (self.branch_fraction > 0 and not self.uses_groups):
            raise ValueError(
                f"branch_fraction starts groups at visited states: it needs a value in [0, 1] and a group estimator "
                f"(advantage=group or step_group), got {self.branch_fraction} with advantage={self.advantage}"
            )
        if self.entropy_target > 0 and not 0 < self.entropy_coef <= self.entropy_coef_max:
            raise ValueError(
                f"entropy_target needs 0 < entropy_coef <= entropy_coef_max, got {self.entropy_coef} and "
                f"{self.entropy_coef_max}: the floor multiplies the coefficient between them (for almost no bonus "
                "above the target: --set entropy_coef=0.001)"
            )

    @property
    def loss(self) -> Literal["clip", "target"]:
        """The policy loss the update uses (``policy_loss``, with auto resolved by the action mode)."""
        if self.policy_loss == "auto":
            return "target" if self.action_mode == "score" else "clip"
        return self.policy_loss

    @property
    def peak_learning_rate(self) -> float:
        """``learning_rate``, or where it is None the policy loss's own."""
        if self.learning_rate is not None:
            return self.learning_rate
        return 1e-3 if self.loss == "target" else 2e-4

    @property
    def rollout_size(self) -> int:
        """Decisions per rollout (with a group estimator: at least this many)."""
        return self.num_envs * self.num_steps

    @property
    def uses_groups(self) -> bool:
        """The advantage estimator compares groups of episodes and needs no value head."""
        # llm_gym.rl.advantages.GROUP_ESTIMATORS, spelled out (tests/test_light_imports.py checks they agree):
        # importing llm_gym.rl here loaded torch with every CLI run, since the plugin loads this module.
        return self.advantage in ("group", "step_group")

    @property
    def has_value_head(self) -> bool:
        """Only GAE reads a value head; the group estimators and ``exact`` build none."""
        return self.advantage == "gae"

    def _check_exact(self) -> None:
        refused = {
            "action_mode=generate": self.action_mode != "score",
            "policy_loss=clip": self.policy_loss == "clip",
            "rollout_backend=vllm": self.rollout_backend != "hf",
            "value_warmup_updates": self.value_warmup_updates != 0,
            "start_spread": self.start_spread != 0,
            "episode_options": bool(self.episode_options),
        }
        for name, changed in refused.items():
            if changed:
                raise ValueError(
                    f"advantage=exact trains every legal action of every position with the target loss in score mode, "
                    f"on no rollout: {name} does not go with it"
                )

    def _check_groups(self) -> None:
        if self.group_size < 2 or self.num_envs % self.group_size:
            raise ValueError(
                f"advantage={self.advantage} plays groups of group_size episodes on num_envs envs: group_size must be "
                f">= 2 and divide num_envs, got group_size={self.group_size}, num_envs={self.num_envs}"
            )
        value_settings = {
            "value_warmup_updates": self.value_warmup_updates != 0,
            "start_spread": self.start_spread != 0,
        }
        for name, changed in value_settings.items():
            if changed:
                why = (
                    "every episode of a group must start at the reset state"
                    if name == "start_spread"
                    else ("it works on the value head, which a group estimator does not build")
                )
                raise ValueError(f"{name} does not go with advantage={self.advantage}: {why}; use advantage=gae for it")
