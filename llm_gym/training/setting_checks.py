"""The per-field checks of the settings a policy is to play with, one line for each setting it cannot honour.

A checkpoint plays as trained: a setting its weights hold (``Agent.fixed_on_resume``: the base model, the LoRA shape)
or one only training reads (``training_only``) is refused, naming it (:func:`check_checkpoint_settings`: ``play
--checkpoint --set``, ``demos``, a bench checkpoint entry's ``set``); an untrained policy reads no training-only
setting either (:func:`check_untrained_settings`: ``play --agent NAME --set``, a bench ``agent = NAME`` entry). A
dict field holding another agent's settings (``nested_agent_config``: the curriculum's ``base_config``) is seen
through: :func:`field_settings` lists its keys under dotted names with that agent's own markers.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llm_gym.config import Effect, apply_overrides, field_effect, nested_agent_fields
from llm_gym.errors import ConfigError
from llm_gym.plugins import get_agent

if TYPE_CHECKING:
    from llm_gym.agent import Agent, AgentConfig


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
    cls = type(config)
    inside = nested_agent_fields(cls) if nested else {}
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
        out[f.name] = FieldSetting(value, _default(f), field_effect(cls, f.name), held)
    return out


def _default(field: dataclasses.Field) -> Any:
    """A dataclass field's default (the field as declared; a config need not have a default for every field)."""
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


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
    bench entry's ``set``); ``cli`` words the base-model refusal for ``llm-gym play``/``demos`` (``--model``).
    The keys of a dict field holding another agent's settings (the curriculum's ``base_config``) are checked by that
    agent's markers and ``fixed_on_resume`` and named ``base_config.learning_rate`` (:func:`field_settings`); the
    returned fields are the config's own (such a dict as a whole)."""

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
        hint = CLI_NUM_ENVS_HINT if cli else None
        _refuse_training_only(
            {f: changed[f] for f in training}, str(checkpoint), where, command=command, num_envs_hint=hint
        )
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
        hint = num_envs_hint or CLI_NUM_ENVS_HINT
        _refuse_training_only(changed, how, where, num_envs_hint=hint, command=command)


CLI_NUM_ENVS_HINT = "--num-envs sets the envs it plays"
"""What a refusal of a training-only ``num_envs`` says in ``llm-gym play`` / ``demos``."""


def _refuse_training_only(
    changed: Mapping[str, Any], what: str, where: str, *, command: str | None, num_envs_hint: str | None
) -> None:
    """The one-line refusal of training-only settings: names them, says to drop them and, where ``command`` is
    given (``llm-gym train --resume RUN``, ``llm-gym train --agent NAME``), how to train with them. Where
    ``num_envs`` is among them, ``num_envs_hint`` says what sets the envs played at once."""
    shown = ", ".join(f"{f}={value!r}" for f, value in changed.items())
    them = "it" if len(changed) == 1 else "them"
    hints = []
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
