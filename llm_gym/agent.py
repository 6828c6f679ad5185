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
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from llm_gym.config import Effect, training_only
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


@dataclass(frozen=True)
class FieldSetting:
    """One setting as the per-field checks see it: a field of an agent's config, or a key of a dict field holding
    another agent's settings (named ``base_config.learning_rate``), with what its own agent says of it."""

    value: Any
    """Its value (for a nested key: the nested agent's config field, its default where the dict lacks the key)."""
    default: Any
    """The default of the field in its own agent's config."""
    effect: Effect
    """What it affects (:func:`llm_gym.config.field_effect` of its own agent's config)."""
    held: bool
    """Whether its own agent's checkpoints hold it (``fixed_on_resume`` of a learner)."""


def field_settings(
    agent_cls: type[Agent], config: AgentConfig, source: str = "config", *, nested: bool = True
) -> dict[str, FieldSetting]:
    """``{name: setting}`` of every field of ``config``, a config of ``agent_cls``; a dict field that holds another
    agent's settings (:func:`llm_gym.config.nested_agent_config`) is replaced by that agent's fields under dotted
    names (``base_config.learning_rate``), so that agent's own markers decide what each key affects. ``source``
    names where the settings came from in the error a bad nested key raises; ``nested=False`` keeps such a dict
    as one setting."""
    from llm_gym.config import apply_overrides, field_effect, nested_agent_fields
    from llm_gym.plugins import get_agent

    cls = type(config)
    inside = nested_agent_fields(cls) if nested else {}
    defaults = cls()
    out: dict[str, FieldSetting] = {}
    for f in dataclasses.fields(cls):
        value = getattr(config, f.name)
        if f.name in inside:
            inner_cls = get_agent(getattr(config, inside[f.name]))
            inner = apply_overrides(inner_cls.Config(), value, source=f"{source}: {f.name}")
            for name, setting in field_settings(inner_cls, inner, source).items():
                out[f"{f.name}.{name}"] = setting
            continue
        held = agent_cls.learns and f.name in agent_cls.fixed_on_resume
        out[f.name] = FieldSetting(value, getattr(defaults, f.name), field_effect(cls, f.name), held)
    return out


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

    # The config's own fields first: a held one (the base model, the LoRA shape, the learner a wrapper trained) is
    # refused before the settings of a nested agent are read, which may not even fit another learner.
    saved, played = (field_settings(agent_cls, c, where, nested=False) for c in (trained, config))
    changed_fields = _changed_settings(saved, played)
    _refuse_held(agent_cls, changed_fields, saved, played, checkpoint=checkpoint, where=where, cli=cli)
    saved, played = field_settings(agent_cls, trained, where), field_settings(agent_cls, config, where)
    changed = _changed_settings(saved, played)
    _refuse_held(agent_cls, changed, saved, played, checkpoint=checkpoint, where=where, cli=cli)
    training = [f for f in changed if played[f].effect == "training"]
    if training:
        resumable = run is not None and agent_cls.learns and not any(played[f].held for f in training)
        command = f"llm-gym train --resume {run}" if resumable else None
        _refuse_training_only({f: changed[f] for f in training}, str(checkpoint), where, cli=cli, command=command)
    return changed_fields


def _changed_settings(saved: Mapping[str, FieldSetting], played: Mapping[str, FieldSetting]) -> dict[str, Any]:
    """``{name: value played}`` of the settings that differ from the saved ones (a setting the saved config lacks:
    from its default); a model given as another path to the same directory is no change."""
    changed = {
        name: s.value for name, s in played.items() if s.value != (saved[name].value if name in saved else s.default)
    }
    for name in [n for n in changed if _leaf(n) == "model" and n in saved]:
        if _same_model(saved[name].value, changed[name]):
            del changed[name]  # the same directory, written another way
    return changed


def _refuse_held(
    agent_cls: type[Agent],
    changed: Mapping[str, Any],
    saved: Mapping[str, FieldSetting],
    played: Mapping[str, FieldSetting],
    *,
    checkpoint: str | Path,
    where: str,
    cli: bool,
) -> None:
    """Refuse, in one line, a change to a setting the checkpoint's weights hold (a training-only one is refused as
    such afterwards); another base model gets its own wording, with how to play that model untrained."""
    from llm_gym.errors import ConfigError

    held = [f for f in changed if played[f].held and played[f].effect != "training"]
    held.sort(key=lambda f: (_fixed_rank(agent_cls, f), f))
    for name in (f for f in held if _leaf(f) == "model"):
        given, trained_on = changed[name], saved[name].value
        drop = "--model" if cli and name == "model" else f"{name} from {where}"
        untrained = f"with --agent lm --model {given}" if cli else 'as an agent = "lm" entry'
        raise ConfigError(
            f"{checkpoint} was trained on the base model {trained_on!r}, not {given!r}: its "
            f"weights play only on that model; drop {drop} (or play {given!r} untrained {untrained})"
        )
    if held:
        shown = ", ".join(f"{f}={saved[f].value!r}" for f in held)
        raise ConfigError(
            f"{checkpoint} was trained with {shown}, which its checkpoint holds; it plays as trained: drop "
            f"{', '.join(held)} from {where}"
        )


def check_untrained_settings(
    agent_cls: type[Agent], config: AgentConfig, *, where: str = "--set/--config", num_envs_hint: str | None = None
) -> None:
    """Refuse, in one line, a training-only field of ``config`` set away from its default where an untrained
    policy of ``agent_cls`` is to play (``llm-gym play --agent NAME``, ``demos --agent NAME``, a bench suite's
    ``agent = NAME`` entry): the policy never reads it, so the setting would be dropped without a word. The keys of a
    dict field holding another agent's settings are checked by that agent's markers (:func:`field_settings`).
    ``num_envs_hint`` says what sets the envs played at once where ``num_envs`` is refused (default: the CLI's
    ``--num-envs``)."""
    settings = field_settings(agent_cls, config, where)
    changed = {f: s.value for f, s in settings.items() if s.effect == "training" and s.value != s.default}
    if changed:
        how = f"an untrained {agent_cls.name}" if agent_cls.learns else agent_cls.name
        command = f"llm-gym train --agent {agent_cls.name}" if agent_cls.learns else None
        hint = num_envs_hint or "--num-envs sets the envs it plays"
        _refuse_training_only(changed, how, where, num_envs_hint=hint, command=command)


def _refuse_training_only(
    changed: Mapping[str, Any], what: str, where: str, *, command: str | None, cli: bool = False,
    num_envs_hint: str | None = None,
) -> None:  # fmt: skip
    """The one-line refusal of training-only settings: names them, says to drop them and, where ``command`` is
    given (``llm-gym train --resume RUN``, ``llm-gym train --agent NAME``), how to train with them. Where
    ``num_envs`` is among them, ``num_envs_hint`` (``cli``: the CLI's ``--num-envs``) says what sets the envs played."""
    from llm_gym.errors import ConfigError

    shown = ", ".join(f"{f}={value!r}" for f, value in changed.items())
    them = "it" if len(changed) == 1 else "them"
    hints = []
    if cli and num_envs_hint is None:
        num_envs_hint = "--num-envs sets the envs it plays"
    if num_envs_hint is not None and "num_envs" in changed:
        hints.append(num_envs_hint)
    if command is not None:
        hints.append(f"to train {'on ' if '--resume' in command else ''}with {them}: {command} {_cli_sets(changed)}")
    raise ConfigError(
        f"{shown} only affect{'s' if len(changed) == 1 else ''} training, not how {what} plays: drop {them} from "
        f"{where}" + (f" ({'; '.join(hints)})" if hints else "")
    )


def _cli_sets(changed: Mapping[str, Any]) -> str:
    """``--set key=VALUE`` options that give ``changed``; keys of a nested agent config (``base_config.lr``) go into
    one JSON object per dict field, which ``--set`` merges into that field."""
    import json
    import shlex

    plain = {f: v for f, v in changed.items() if "." not in f}
    nested: dict[str, dict[str, Any]] = {}
    for name, value in changed.items():
        if "." in name:
            field, key = name.split(".", 1)
            nested.setdefault(field, {})[key] = value
    sets = [f"--set {f}={_cli_value(v)}" for f, v in plain.items()]
    sets += [f"--set {f}={shlex.quote(json.dumps(keys, default=str))}" for f, keys in nested.items()]
    return " ".join(sets)


def _leaf(name: str) -> str:
    """The field name of a setting without the dict field holding it: ``base_config.model`` -> ``model``."""
    return name.rsplit(".", 1)[-1]


def _fixed_rank(agent_cls: type[Agent], name: str) -> int:
    """Where a held field stands in its agent's ``fixed_on_resume`` (the order refusals name them in)."""
    fixed = agent_cls.fixed_on_resume
    return fixed.index(name) if name in fixed else len(fixed)


def _same_model(saved: str, given: str) -> bool:
    """True where both name one local directory (a relative and an absolute path, say)."""
    return saved == given or (Path(saved).is_dir() and Path(given).is_dir() and Path(saved).samefile(given))


def _cli_value(value: Any) -> str:
    """A value as ``--set key=VALUE`` takes it (lists comma-joined)."""
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value).lower() if isinstance(value, bool) else str(value)
