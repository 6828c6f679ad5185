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
entry's identity leaves it out).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from llm_gym.config import training_only
from llm_gym.envs.protocol import EnvConfig

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
    ``checkpoint_every`` / ``keep_checkpoints``, ``threads`` (torch threads), ``device``, ``progress``. A number
    that switches something off is 0 ("0: off"), never None. A field that was renamed is listed in ``renamed``
    (old name -> new name): ``--set old=...`` then fails with one line naming the new name, and a run saved under
    the old name still loads.
    """

    renamed: ClassVar[Mapping[str, str]] = {}
    """Old field name -> its current name."""

    total_steps: int = training_only(10_000)
    """Environment steps to train for, summed over parallel envs."""
    seed: int = 0
    """Seed for envs, sampling and initialisation."""

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
    minimax values, say); demonstrations record them (see :func:`policy_action_values`).
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


def policy_env_kwargs(policy: Policy) -> dict[str, Any]:
    """The env arguments a policy expects (its optional ``env_kwargs`` attribute), or an empty dict."""
    return dict(getattr(policy, "env_kwargs", None) or {})


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

    def __init__(self, config: AgentConfig | None = None) -> None:
        self.config = config if config is not None else self.Config()

    @abc.abstractmethod
    def train(self, env: EnvConfig, run: Run, callbacks: Sequence[Callback] = ()) -> dict[str, Any]:
        """Train on ``env`` for ``config.total_steps`` env steps, writing checkpoints and logs into ``run``.

        If ``run.resumed_from`` is set, continue from that checkpoint. Returns the summary (also written to
        ``summary.json``).

        A learner that can train on tasks chosen by someone else also takes ``sampler``, a
        :class:`llm_gym.tasks.TaskSampler` (the ``curriculum`` agent passes one), and hands it to its
        :class:`llm_gym.stepping.EnvStepper`, whose state (sampler included) goes into every checkpoint.
        """

    @abc.abstractmethod
    def policy(self, env: EnvConfig, checkpoint: Path | None = None) -> Policy:
        """A policy for ``env``: from ``checkpoint`` when given, else the untrained/zero-shot one."""


def load_policy(
    checkpoint: str | Path, env: EnvConfig | None = None, overrides: Mapping[str, Any] | None = None
) -> tuple[Policy, Agent]:
    """The policy saved in a checkpoint (or in a run directory's newest checkpoint), with the agent that made it;
    ``overrides`` (``--set`` of ``llm-gym play``) change how it plays, e.g. ``threads`` or ``quantize``."""
    from llm_gym.errors import CheckpointError
    from llm_gym.runs import Run

    run, path = Run.resolve_checkpoint(checkpoint, required=False)
    agent_cls, config = checkpoint_config(run, overrides)
    agent = agent_cls(config)
    if path is None and agent.learns:
        raise CheckpointError(f"{run.path} has no complete checkpoint yet")
    saved = run.read_config()
    env = env or EnvConfig(saved["env_id"], saved.get("env_kwargs", {}))
    return agent.policy(env, path or Path(checkpoint)), agent


def checkpoint_config(
    run: Run, overrides: Mapping[str, Any] | None = None, source: str = "--set"
) -> tuple[type[Agent], AgentConfig]:
    """The agent class a run trained and its saved config with ``overrides`` applied: how its checkpoints play
    (``--set`` of ``llm-gym play --checkpoint``, ``set`` of a bench suite's checkpoint entry). An unknown or mistyped
    key raises one line naming ``source`` and the close matches."""
    from llm_gym.config import apply_overrides, from_dict
    from llm_gym.plugins import get_agent

    saved = run.read_config()
    agent_cls = get_agent(saved["agent"])
    config = from_dict(agent_cls.Config, saved["config"], source=str(run.path / "config.json"))
    if not overrides:
        return agent_cls, config
    played = apply_overrides(config, overrides, source=source)
    check_checkpoint_settings(agent_cls, config, played, checkpoint=run.path, run=run.path, where=source)
    return agent_cls, played


def check_checkpoint_settings(
    agent_cls: type[Agent],
    trained: AgentConfig,
    config: AgentConfig,
    *,
    checkpoint: str | Path,
    run: str | Path | None = None,
    where: str = "--set/--config",
    cli: bool = False,
) -> dict[str, Any]:
    """The fields of ``config`` that differ from ``trained`` (a run's saved config): how ``checkpoint`` is to play
    differently. A change it cannot play with raises :class:`~llm_gym.errors.ConfigError` in one line that names
    the fields and says what to do, so no setting is dropped without a word: a field the learner's weights fix
    (``fixed_on_resume``: the base model, the LoRA shape), or a field only training reads (marked
    :func:`~llm_gym.config.training_only`). ``where`` names where the settings came from (``--set/--config``, a
    bench entry's ``set``); ``cli`` words the base-model refusal for ``llm-gym play``/``demos`` (``--model``)."""
    from llm_gym.config import field_effect
    from llm_gym.errors import ConfigError

    cls = type(config)
    saved = {f.name: getattr(trained, f.name) for f in dataclasses.fields(cls)}
    changed = {f: getattr(config, f) for f in saved if getattr(config, f) != saved[f]}
    if "model" in changed and _same_model(saved["model"], changed["model"]):
        del changed["model"]  # the same directory, written another way
    training = [f for f in changed if field_effect(cls, f) == "training"]
    if agent_cls.learns:
        fixed = [f for f in agent_cls.fixed_on_resume if f in changed and f not in training]
        if "model" in fixed:
            given = changed["model"]
            if cli:
                drop, untrained = "--model", f"with --agent lm --model {given}"
            else:
                drop, untrained = f"model from {where}", 'as an agent = "lm" entry'
            raise ConfigError(
                f"{checkpoint} was trained on the base model {saved['model']!r}, not {given!r}: its "
                f"weights play only on that model; drop {drop} (or play {given!r} untrained {untrained})"
            )
        if fixed:
            shown = ", ".join(f"{f}={saved[f]!r}" for f in fixed)
            raise ConfigError(
                f"{checkpoint} was trained with {shown}, which its checkpoint holds; it plays as trained: drop "
                f"{', '.join(fixed)} from {where}"
            )
    if training:
        resumable = run is not None and agent_cls.learns and not set(training) & set(agent_cls.fixed_on_resume)
        command = f"llm-gym train --resume {run}" if resumable else None
        _refuse_training_only({f: changed[f] for f in training}, str(checkpoint), where, cli=cli, command=command)
    return changed


def check_untrained_settings(agent_cls: type[Agent], config: AgentConfig, *, where: str = "--set/--config") -> None:
    """Refuse, in one line, a training-only field of ``config`` set away from its default where an untrained
    policy of ``agent_cls`` is to play (``llm-gym play --agent NAME``, ``demos --agent NAME``): the policy never
    reads it, so the setting would be dropped without a word."""
    from llm_gym.config import fields_with_effect

    defaults = agent_cls.Config()
    names = [f.name for f in dataclasses.fields(config)]
    training = fields_with_effect(type(config), "training")
    changed = {f: getattr(config, f) for f in names if f in training and getattr(config, f) != getattr(defaults, f)}
    if changed:
        how = f"an untrained {agent_cls.name}" if agent_cls.learns else agent_cls.name
        command = f"llm-gym train --agent {agent_cls.name}" if agent_cls.learns else None
        _refuse_training_only(changed, how, where, cli=True, command=command)


def _refuse_training_only(changed: Mapping[str, Any], what: str, where: str, *, cli: bool, command: str | None) -> None:
    """The one-line refusal of training-only settings: names them, says to drop them and, where ``command`` is
    given (``llm-gym train --resume RUN``, ``llm-gym train --agent NAME``), how to train with them."""
    from llm_gym.errors import ConfigError

    shown = ", ".join(f"{f}={value!r}" for f, value in changed.items())
    them = "it" if len(changed) == 1 else "them"
    hints = []
    if cli and "num_envs" in changed:
        hints.append("--num-envs sets the envs it plays")
    if command is not None:
        sets = " ".join(f"--set {f}={_cli_value(value)}" for f, value in changed.items())
        hints.append(f"to train {'on ' if '--resume' in command else ''}with {them}: {command} {sets}")
    raise ConfigError(
        f"{shown} only affect{'s' if len(changed) == 1 else ''} training, not how {what} plays: drop {them} from "
        f"{where}" + (f" ({'; '.join(hints)})" if hints else "")
    )


def _same_model(saved: str, given: str) -> bool:
    """True where both name one local directory (a relative and an absolute path, say)."""
    return saved == given or (Path(saved).is_dir() and Path(given).is_dir() and Path(saved).samefile(given))


def _cli_value(value: Any) -> str:
    """A value as ``--set key=VALUE`` takes it (lists comma-joined)."""
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value).lower() if isinstance(value, bool) else str(value)
