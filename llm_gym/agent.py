"""The agent contract every built-in and third-party agent implements.

An agent is a name, a frozen config dataclass (a docstring under each field) and two operations: train on an env
into a run directory, and give a policy (fresh, or loaded from a checkpoint). A policy acts on a *batch* of
observations, so one LM call can decide for many envs.

A minimal agent::

    @dataclass(frozen=True, kw_only=True)
    class MyConfig(AgentConfig):
        learning_rate: float = training_only(1e-3)
        \"\"\"Learning rate.\"\"\"
        temperature: float = 1.0
        \"\"\"Sampling temperature.\"\"\"
        threads: int = speed_only(0)
        \"\"\"torch threads (0: one per core).\"\"\"

    class MyAgent(Agent):
        name = "my_agent"
        description = "What it does, in one line."
        Config = MyConfig

        def train(self, env, run, callbacks=()): ...
        def policy(self, env, checkpoint=None): ...

and a plugin module registers it with ``@llm_gym.hookimpl def register_agents(register): register(MyAgent)``.

Each field says what it affects (:mod:`llm_gym.config`): unmarked, how the policy plays; ``training_only(...)``,
only training (``play --checkpoint --set`` refuses it); ``speed_only(...)``, only how fast the policy plays (a bench
entry's identity leaves it out). A dict field declared ``nested_agent_config("base")`` holds another agent's settings;
the checks here see through it (:func:`field_settings`), so its keys follow that agent's markers.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, TypedDict, runtime_checkable

from llm_gym.config import training_only
from llm_gym.envs.catalog import EnvConfig
from llm_gym.errors import ConfigError
from llm_gym.presets import Preset, folder_presets

if TYPE_CHECKING:
    from llm_gym.callbacks import Callback
    from llm_gym.runs import Run


@dataclass(frozen=True, kw_only=True)
class AgentConfig:
    """Fields every agent config has. Subclass it (frozen, kw_only) and document each field under it.

    One vocabulary across agents, so a setting means the same under every ``--agent``: ``learning_rate``,
    ``update_epochs`` (passes over a rollout), ``num_envs``, ``num_steps`` (steps per env between updates),
    ``minibatch_size``, ``gamma``, ``gae_lambda``, ``clip_coef``, ``value_clip_coef``, ``value_coef``,
    ``entropy_coef``, ``max_grad_norm``, ``eval_every`` / ``eval_episodes`` / ``eval_max_steps``,
    ``checkpoint_every`` / ``keep_checkpoints``, ``threads`` (torch threads), ``device``, ``progress``. The
    learners' shared fields are declared once, in blocks a config inherits (:mod:`llm_gym.training.config`:
    ``OptimizerConfig``, ``ScheduleConfig``, ``PPOConfig``; :class:`llm_gym.lm.agent_config.LoRAConfig`). A number
    that switches something off is 0 ("0: off"), never None. A field that was renamed is listed in ``renamed``
    (old name -> new name): ``--set old=...`` then fails with one line naming the new name, a run saved under the
    old name still loads, and bench episodes stored under it keep their identity. A field whose default changed after runs were saved without it is listed in
    ``saved_defaults`` (name -> the value those runs trained with), so they load as they trained.
    """

    renamed: ClassVar[Mapping[str, str]] = {}
    """Old field name -> its current name."""
    saved_defaults: ClassVar[Mapping[str, Any]] = {}
    """Field -> the value a saved config that lacks it trained with (read by :func:`llm_gym.config.from_dict`)."""
    first_fields: ClassVar[tuple[str, ...]] = ()
    """The fields a user changes first, in order: ``llm-gym agents NAME`` shows them (the rest with ``--all``).
    Empty: those of :data:`llm_gym.config.FIRST_FIELDS` the config has."""

    total_steps: int = training_only(10_000)
    """Environment steps to train for, summed over parallel envs."""
    seed: int = 0
    """Seed for envs, sampling and initialisation."""
    tracker: Literal["tensorboard", "wandb"] = training_only("tensorboard")
    """Where training scalars go: tensorboard (<run>/tb), or wandb (Weights & Biases beside TensorBoard; extra
    wandb; WANDB_MODE=offline logs without a network)."""

    def __post_init__(self) -> None:
        if self.total_steps < 0:
            raise ValueError(f"total_steps must be >= 0, got {self.total_steps}")
        if self.seed < 0:  # numpy's and gymnasium's seeding take no negative seed
            raise ValueError(f"seed must be >= 0, got {self.seed}")


Action = int | str
"""What a policy gives an env: an action id (``Discrete`` envs) or an answer text (``Text`` action spaces)."""


@runtime_checkable
class Policy(Protocol):
    """Decides actions for a batch of envs at once.

    A policy may also carry an ``env_kwargs`` mapping: the ``gym.make`` arguments it was trained with (say, the
    ASCII grid size). ``llm-gym play`` applies them, with the user's ``--env-arg`` on top (see
    :func:`policy_env_kwargs`). A demonstrator may also have an ``action_values(observations, infos)`` method: its
    value of each legal action for the player to move, parallel to ``info["legal_actions"]`` (an exact solver's
    minimax values, say); demonstrations record them (see :func:`policy_action_values`). A policy that acts from a
    distribution over actions may have a ``greedy`` bool attribute: True takes the most likely action, False samples
    one (``llm-gym play --sample`` sets it; see :func:`sampling_policy`). A policy that can say what it knew when it
    chose (action probabilities, a value, the model's text) has an ``act_with_details(observations, infos)`` method
    that returns the same actions as ``act`` plus one :class:`DecisionDetails` each (subclassing
    :class:`DetailedPolicy` derives ``act`` from it); :func:`act_with_details` calls it where present and falls back
    to ``act`` with empty details, so callers never probe.
    """

    def act(self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]) -> Sequence[Action]:
        """One action per observation: an action id, or the answer text where the env takes text (``Trace-v0``);
        ``infos[i]`` is the latest info of env ``i`` (legal actions, mask)."""
        ...


def policy_action_values(
    policy: Policy, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]
) -> list[tuple[float, ...]] | None:
    """The policy's value of each legal action in each env (its optional ``action_values`` method), or None."""
    method = getattr(policy, "action_values", None)
    if method is None:
        return None
    return [tuple(float(v) for v in row) for row in method(observations, infos)]


VALUE_TIE = 1e-9
"""Two action values this close are a tie (exact solvers' values are sums of a few probabilities)."""


def best_value_indices(values: Sequence[float]) -> tuple[int, ...]:
    """The indices of the values within :data:`VALUE_TIE` of the highest: every action valued as highly as the
    best (what sft's ``choice_target=best`` counts as right, and what ``demos --all-best`` walks); empty without."""
    if not values:
        return ()
    top = max(values)
    return tuple(i for i, value in enumerate(values) if value >= top - VALUE_TIE)


def sampling_policy(policy: Policy, agent: str) -> Policy:
    """``policy`` set to sample its actions from its distribution instead of taking the most likely one (its
    ``greedy`` attribute set to False). A policy without one (a scripted or exact player) raises one line."""
    if not isinstance(getattr(policy, "greedy", None), bool):
        raise ConfigError(
            f"{agent}'s policy has no sampled play (policies with a distribution over actions have: the LM agents, "
            "nanogpt_ppo): drop --sample"
        )
    policy.greedy = False  # type: ignore[attr-defined]
    return policy


def policy_env_kwargs(policy: Policy) -> dict[str, Any]:
    """The env arguments a policy expects (its optional ``env_kwargs`` attribute), or an empty dict."""
    return dict(getattr(policy, "env_kwargs", None) or {})


# -- what a policy may report beside its actions (the bench's trajectory viewer) ---------------------------------------


class DecisionDetails(TypedDict, total=False):
    """What a policy knew when it chose; every key is optional."""

    probs: list[float]
    """Probability of each legal action, in ``info["legal_actions"]`` order (exact in score mode)."""
    value: float
    """The policy's value estimate of the observation."""
    answer: str
    """The text the model wrote (generate mode)."""
    tokens: int
    """Tokens generated for this decision."""


class DetailedPolicy(abc.ABC):
    """Base of the policies that can say what they knew when they chose (see :class:`Policy`): a subclass implements
    ``act_with_details``, and ``act`` is its actions alone."""

    @abc.abstractmethod
    def act_with_details(
        self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]
    ) -> tuple[list[Any], list[DecisionDetails]]:
        """One action per observation, as ``act``, and one :class:`DecisionDetails` each."""

    def act(self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]) -> list[Any]:
        return self.act_with_details(observations, infos)[0]


def act_with_details(
    policy: Any, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]
) -> tuple[list[Any], list[DecisionDetails]]:
    """Actions and per-decision details: the policy's own ``act_with_details`` where it has one."""
    method = getattr(policy, "act_with_details", None)
    if method is not None:
        actions, details = method(observations, infos)
        return list(actions), list(details)
    return list(policy.act(observations, infos)), [DecisionDetails() for _ in observations]


class Agent(abc.ABC):
    """Base class of agents. Subclasses set ``name``, ``description``, ``Config`` and implement the two operations."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    Config: ClassVar[type[AgentConfig]] = AgentConfig
    learns: ClassVar[bool] = True
    """False for baselines, whose ``train`` only records how they play."""
    reads_observation_text: ClassVar[bool] = True
    """False for agents whose play never depends on the observation text (they act from ``info``: legal actions,
    the game's history or state), so a change of an env's text (``text_version``) leaves their stored bench results
    valid."""
    fixed_on_resume: ClassVar[tuple[str, ...]] = ()
    """Config fields a resume cannot change (they set the shapes of what a checkpoint holds); ``train --resume``
    refuses a change to one, naming it, before touching the run."""
    presets_folder: ClassVar[str] = "presets"
    """The folder, beside the module that defines the agent class, of its preset files (``NAME.toml``, see
    :mod:`llm_gym.presets`): ``llm-gym train --preset NAME``. Two agents defined in one module name two folders."""

    def __init__(self, config: AgentConfig | None = None) -> None:
        self.config = config if config is not None else self.Config()

    def resume_only_files(self) -> tuple[str, ...]:
        """Names of the checkpoint files that only ``train --resume`` reads (optimiser, scheduler, RNG states,
        counters), never ``policy``: ``llm-gym copy-policy`` writes a play-only copy without them. The envs' saved
        state (``envs.json``, ``tasks.json`` of the shared stepping path) is left out for every agent; list only your
        own files here. Default: none (the copy then keeps everything)."""
        return ()

    @classmethod
    def presets(cls) -> dict[str, Preset]:
        """The agent's named recipes (``llm-gym train --preset NAME``): by default the TOML files of its
        :attr:`presets_folder`. Override to build them in Python."""
        return folder_presets(cls)

    @abc.abstractmethod
    def train(self, env: EnvConfig, run: Run, callbacks: Sequence[Callback] = ()) -> dict[str, Any]:
        """Train on ``env`` for ``config.total_steps`` env steps, writing checkpoints and logs into ``run``.

        If ``run.resumed_from`` is set, continue from that checkpoint. Returns the summary (also written to
        ``summary.json``).

        A learner that can train on tasks chosen by someone else also takes ``sampler``, a
        :class:`llm_gym.envs.tasks.TaskSampler` (the ``curriculum`` agent passes one), and hands it to its
        :class:`llm_gym.stepping.EnvStepper`, whose state (sampler included) goes into every checkpoint.
        """

    @abc.abstractmethod
    def policy(self, env: EnvConfig, checkpoint: Path | None = None) -> Policy:
        """A policy for ``env``: from ``checkpoint`` when given, else the untrained/zero-shot one."""
