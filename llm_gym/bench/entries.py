"""What a suite entry is at run time: its agent and config, the hashes that identify it in the store, its policy.

The config hash covers the agent name, the resolved config and the checkpoint's content hash, so a changed setting
or a retrained checkpoint is a new set of episodes, never mixed with the old ones. For a checkpoint entry the
resolved config counts only the fields its run's saved config names (under their current names), plus those its
``set`` changes (how the checkpoint plays, e.g. ``quantize``, applied as ``llm-gym play --checkpoint --set`` applies
them): an option added to the agent after the run was trained, and a setting equal to what the run would play with
anyway, leave the identity of the run's stored episodes as it was. An agent entry gets the same treatment from the
store (:func:`keep_stored_identity`): a config field added to the agent since its episodes were stored leaves their
identity as it was while the field keeps its default, and a field renamed since then (the config's ``renamed``)
counts under the name it was stored under.

An agent entry's ``set`` is checked as ``llm-gym play --agent NAME --set`` checks it: a training-only field set away
from its default is refused in one line (the untrained policy never reads it, and it would still change the
identity). Speed-only fields count at the entry's base values, also inside a dict field that holds another agent's
settings (the curriculum's ``base_config``), where that agent's markers say which keys are speed-only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from llm_gym.agent import EnvConfig, Policy, policy_env_kwargs
from llm_gym.bench.suite import SuiteEntry, SuiteEnv
from llm_gym.config import apply_overrides, fields_with_effect, nested_agent_fields
from llm_gym.envs.openspiel.catalog import text_versions as openspiel_text_versions
from llm_gym.errors import CheckpointError
from llm_gym.plugins import get_agent
from llm_gym.runs import Run, find_run_dir
from llm_gym.training.checkpoints import checkpoint_config, load_policy
from llm_gym.training.setting_checks import check_checkpoint_settings, check_untrained_settings

REPO_ROOT = Path(__file__).resolve().parents[2]

ENTRY_NUM_ENVS_HINT = "the entry's own num_envs (beside set) or the suite's sets how many envs it plays at once"
"""What a refusal of ``num_envs`` in an agent entry's ``set`` says instead of the CLI's ``--num-envs``."""


def canonical_json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)


def short_hash(data: Any) -> str:
    return hashlib.sha256(canonical_json(data).encode()).hexdigest()[:16]


def env_hash(env: SuiteEnv, reads_text: bool = True) -> str:
    """Identity of an env's episodes: id, arguments and step cap (labels and games are names, not identity), and for
    an agent that reads the observation text, the text's version where the env's games are past version 1 (an env
    whose text never changed keeps the hash it had before versions existed; an agent acting from ``info`` alone
    keeps it whatever the text)."""
    identity: dict[str, Any] = {"id": env.env_id, "args": dict(env.args), "max_steps": env.max_steps}
    versions = text_versions(env) if reads_text else {}
    if versions:
        identity["text"] = versions
    return short_hash(identity)


def text_versions(env: SuiteEnv) -> dict[str, int]:
    """``{game: observation-text version}`` of the env's games past version 1 (OpenSpiel's catalog says which)."""
    task_ids = [*env.task_ids, *(t for ids in env.split_task_ids.values() for t in ids)]
    return openspiel_text_versions(env.env_id, env.args, task_ids)


def directory_hash(path: Path) -> str:
    """SHA-256 over every file of a checkpoint (relative names and contents), in a stable order."""
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        digest.update(str(file.relative_to(path) if path.is_dir() else file.name).encode() + b"\0")
        with file.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class ResolvedEntry:
    """A suite entry with its agent class, resolved config and identity."""

    entry: SuiteEntry
    agent_name: str
    config: Any
    checkpoint: Path | None
    checkpoint_hash: str | None
    saved_fields: frozenset[str] | None = None
    """The config fields the identity counts (None: all). Checkpoint entries: those the run's saved config names,
    plus those the entry's ``set`` changes; agent entries: those stored with their episodes, where only fields added
    since then differ (at their defaults, see :func:`keep_stored_identity`)."""
    reads_text: bool = True
    """Whether the agent's play depends on the observation text (``Agent.reads_observation_text``): if so, its
    episodes are keyed by the env's text version too (:func:`env_hash`)."""
    speed_counted_as: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """The values the identity counts for the config's speed-only fields (``llm_gym.config.speed_only``) instead of
    those played with: the entry's base (its agent's defaults, or the run's saved config for a checkpoint entry), or
    those stored with its episodes (:func:`keep_stored_identity`). So a speed-only setting (``threads``) never
    changes which episodes an entry has, and identities hashed before fields were marked stay as they were."""
    nested_counted_as: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    """What the identity counts for each dict field holding another agent's settings (``base_config``, see
    :func:`_counted_nested`): as that agent's config takes them, keys at that agent's defaults left out, speed-only
    keys at the entry base's values. So neither a speed-only key nor a key at its default changes the identity."""
    counted_names: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Fields the identity counts under an old name (``AgentConfig.renamed``, new -> old): those of an identity
    stored before the rename, which hashed them under the old one (:func:`keep_stored_identity`). So renaming a
    field replays no stored episode."""

    def counted_config(self) -> dict[str, Any]:
        """The config as the identity counts it: speed-only fields at :attr:`speed_counted_as`, a nested agent's
        settings as :attr:`nested_counted_as`, each field under its :attr:`counted_names` name."""
        config = dataclasses.asdict(self.config)
        config.update({k: v for k, v in self.speed_counted_as.items() if k in config})
        config.update({k: v for k, v in self.nested_counted_as.items() if k in config})
        return {self.counted_names.get(k, k): v for k, v in config.items()}

    @cached_property
    def entry_hash(self) -> str:
        config = self.counted_config()
        if self.saved_fields is not None:
            counted = {self.counted_names.get(k, k) for k in self.saved_fields}
            config = {k: v for k, v in config.items() if k in counted}
        return short_hash({"agent": self.agent_name, "config": config, "checkpoint": self.checkpoint_hash})

    @property
    def name(self) -> str:
        return self.entry.name

    def policy(self, env: SuiteEnv) -> tuple[Policy, EnvConfig]:
        """A fresh policy for ``env`` and the env config to play it on (the policy's own env kwargs under the
        suite's)."""
        base = EnvConfig(env.env_id, dict(env.args))
        if self.checkpoint is not None:
            policy, _ = load_policy(self.checkpoint, base, _as_settings(self.entry.settings))
        else:
            policy = get_agent(self.agent_name)(self.config).policy(base)
        return policy, EnvConfig(env.env_id, {**policy_env_kwargs(policy), **env.args})


def resolve_entry(entry: SuiteEntry, suite: str | None = None) -> ResolvedEntry:
    """Check an entry (unknown agents and bad settings raise one-line errors, naming ``suite`` where given) and hash
    its identity."""
    source = f"entry {entry.name!r}"
    where = f"the set of {source}" + (f" in suite {suite!r}" if suite else "")
    if entry.checkpoint is None:
        assert entry.agent is not None
        agent_cls = get_agent(entry.agent)
        defaults = agent_cls.Config()
        config = apply_overrides(defaults, _as_settings(entry.settings), source=source)
        # An untrained policy reads no training-only field: refused, as by `llm-gym play --agent NAME --set`.
        check_untrained_settings(agent_cls, config, where=where, num_envs_hint=ENTRY_NUM_ENVS_HINT)
        return ResolvedEntry(
            entry,
            entry.agent,
            config,
            None,
            None,
            reads_text=agent_cls.reads_observation_text,
            speed_counted_as=_speed_values(defaults),
            nested_counted_as=_counted_nested(config, defaults),
        )
    path = Path(entry.checkpoint)
    if not path.is_absolute() and not path.exists():
        path = REPO_ROOT / path
    if not path.exists():
        raise CheckpointError(f"entry {entry.name!r}: checkpoint {entry.checkpoint} does not exist")
    run = Run.open(find_run_dir(path))
    agent_cls, trained = checkpoint_config(run)
    # The entry's settings, applied and refused as `llm-gym play --checkpoint --set` applies and refuses them
    # (ResolvedEntry.policy loads the checkpoint with them): a training-only or weight-fixed setting is one line.
    config = apply_overrides(trained, _as_settings(entry.settings), source=source)
    check_checkpoint_settings(agent_cls, trained, config, checkpoint=entry.checkpoint, where=where)
    if path.resolve() == run.path.resolve():
        path = run.latest_checkpoint() or path
    renamed = getattr(agent_cls.Config, "renamed", {})
    saved = run.read_config()
    saved_fields = frozenset(renamed.get(key, key) for key in saved["config"])
    return ResolvedEntry(
        entry,
        saved["agent"],
        config,
        path,
        directory_hash(path),
        saved_fields | (_changed_fields(trained, config) - speed_only_fields(type(config))),
        agent_cls.reads_observation_text,
        _speed_values(trained),
        _counted_nested(config, trained),
    )


def speed_only_fields(cls: type) -> frozenset[str]:
    """The fields of config class ``cls`` marked ``speed_only``: left out of an entry's identity."""
    return fields_with_effect(cls, "speed")


def _speed_values(base: Any) -> dict[str, Any]:
    """``{speed-only field: its value in base}``: what the identity counts for those fields."""
    return {name: getattr(base, name) for name in speed_only_fields(type(base))}


def _counted_nested(config: Any, base: Any) -> dict[str, dict[str, Any]]:
    """For each dict field of ``config`` holding another agent's settings (``nested_agent_config``): the settings as
    the identity counts them. The keys it gives, as that agent's config takes them, where they differ from that
    agent's defaults; its speed-only keys not as played but as ``base`` (the agent's defaults, or a run's saved
    config) gives them."""
    out = {}
    for name, agent_field in nested_agent_fields(type(config)).items():
        inner_cls = get_agent(getattr(config, agent_field)).Config
        speed = speed_only_fields(inner_cls)
        played = {k: v for k, v in _off_default(inner_cls, getattr(config, name), name).items() if k not in speed}
        from_base = {k: v for k, v in getattr(base, name).items() if k in speed}
        out[name] = {**played, **_off_default(inner_cls, from_base, name)}
    return out


def _off_default(config_cls: type, settings: Mapping[str, Any], source: str) -> dict[str, Any]:
    """The keys of ``settings`` as ``config_cls`` takes them (converted to its fields' types), where they differ
    from its defaults."""
    values = dataclasses.asdict(apply_overrides(config_cls(), settings, source=source))
    defaults = dataclasses.asdict(config_cls())
    return {k: values[k] for k in settings if canonical_json(values[k]) != canonical_json(defaults[k])}


def _changed_fields(before: Any, after: Any) -> frozenset[str]:
    """The config fields whose values differ: a checkpoint entry's settings count in its identity only where they
    change what the run would play with, so a setting equal to the run's own value (or to the default of a field
    the run predates) leaves its stored episodes' identity as it was."""
    old, new = dataclasses.asdict(before), dataclasses.asdict(after)
    return frozenset(k for k in new if canonical_json(new[k]) != canonical_json(old.get(k)))


def keep_stored_identity(resolved: ResolvedEntry, stored: Mapping[tuple[str, str], Mapping[str, Any]]) -> ResolvedEntry:
    """``resolved``, or the same entry under the identity its stored episodes have, when its config differs from the
    one stored with them only where that leaves what it plays unchanged:
    * (agent entries) by fields the stored config does not name (added to the agent later) while those fields have
      their default values;
    * by the values of speed-only fields (``threads``): the identity then counts them at the stored values, so
      episodes stored with ``threads = 4`` are the entry's episodes under ``threads = 1`` too;
    * by the names of renamed fields (the config's ``renamed``: sft's ``batch_size`` is ``minibatch_size`` now): the
      identity then counts them under the names the stored config has.

    ``stored`` is :meth:`EpisodeStore.entry_info` (``(entry, entry_hash) -> {agent, config, ...}``). A candidate
    counts only if hashing the current config that way gives exactly the stored hash, so a changed value of a known
    field, a changed agent or a field set away from its default is still a new identity.
    """
    if (resolved.name, resolved.entry_hash) in stored:
        return resolved  # a stored current identity wins
    speed = speed_only_fields(type(resolved.config))
    for (entry, entry_hash), info in stored.items():
        if entry != resolved.name or info.get("agent") != resolved.agent_name:
            continue
        config = info.get("config", {})
        named = _under_stored_names(resolved, config)
        candidates: list[ResolvedEntry | None] = [] if named is resolved else [named]
        if resolved.checkpoint is None:
            candidates.append(_without_newer_fields(named, frozenset(config)))
        if speed & config.keys():
            candidates += [_with_stored_speed(c, config, speed) for c in [resolved, *candidates] if c is not None]
        for candidate in candidates:
            if candidate is not None and candidate.entry_hash == entry_hash:
                return candidate
    return resolved


def _under_stored_names(resolved: ResolvedEntry, stored: Mapping[str, Any]) -> ResolvedEntry:
    """``resolved`` counting each renamed field under its old name where the ``stored`` config names the old and not
    the new one (it was stored, and hashed, before the rename); ``resolved`` itself where none was."""
    renamed = getattr(type(resolved.config), "renamed", {})
    old_names = {new: old for old, new in renamed.items() if old in stored and new not in stored}
    if not old_names:
        return resolved
    return dataclasses.replace(resolved, counted_names={**resolved.counted_names, **old_names})


def _without_newer_fields(resolved: ResolvedEntry, known: frozenset[str]) -> ResolvedEntry | None:
    """An agent entry counting only the ``known`` fields, where every other field has its default value (else
    None: a field set away from its default is part of the identity)."""
    current = resolved.counted_config()
    try:
        defaults = dataclasses.asdict(type(resolved.config)())
    except (TypeError, ValueError):
        return None  # a config without defaults for every field: no field can have been added with one
    defaults = {resolved.counted_names.get(k, k): v for k, v in defaults.items()}
    newer = current.keys() - known
    if not known <= current.keys() or any(canonical_json(current[k]) != canonical_json(defaults[k]) for k in newer):
        return None
    return dataclasses.replace(resolved, saved_fields=known)


def _with_stored_speed(resolved: ResolvedEntry, config: Mapping[str, Any], speed: frozenset[str]) -> ResolvedEntry:
    """``resolved`` counting its speed-only fields at the values of a stored ``config`` (a checkpoint entry also
    counts those that differ from the run's own, as they counted when that config was stored)."""
    values = {k: config[k] for k in speed if k in config}
    saved_fields = resolved.saved_fields
    if resolved.checkpoint is not None and saved_fields is not None:
        base = resolved.speed_counted_as
        saved_fields = saved_fields | {k for k in values if canonical_json(values[k]) != canonical_json(base.get(k))}
    return dataclasses.replace(
        resolved, speed_counted_as={**resolved.speed_counted_as, **values}, saved_fields=saved_fields
    )


def _as_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    return dict(settings)
