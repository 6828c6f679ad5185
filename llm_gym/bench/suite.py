"""Benchmark suites: TOML files that name envs x entries x splits, and the episodes they ask for.

A suite lives in ``benchmarks/suites/<name>.toml`` (or any path). Its shape::
    description = "what it measures"
    episodes = 4                  # per env and split, unless the env says otherwise
    max_steps = 500               # cut every episode here (None: play to the end)
    num_envs = 4                  # envs stepped in lockstep per (entry, env)

    [splits.heldout]              # evaluation seeds: disjoint from every training seed
    seed = 100_000_000
    [splits.train]                # the seeds agents train on, for the train/held-out gap of trained entries
    seed = 0

    [[envs]]
    label = "breakout-text"       # the row name in the leaderboard (default: the env id)
    id = "LLMBreakout-text-v0"
    args = { frameskip = 4 }      # gym.make keyword arguments
    task_ids = [0]                # cycled over episodes, in every split...
    split_task_ids = { heldout = [2_000_000_000] }   # ...or per split
    game = "breakout"             # what the leaderboard aggregates over (default: the label)
    exact = true                  # small OpenSpiel games against random: also evaluate every entry exactly

    [[entries]]
    name = "random"
    agent = "random"              # an agent by name, configured like --set ...
    set = { seed = 0 }
    envs = ["breakout-*"]         # fnmatch patterns over env labels (default: every env)
    # checkpoint = "runs/<run>"   # ...or a trained checkpoint / run directory instead of agent; its set then says
    #                             # how it plays (quantize, threads ...), as `llm-gym play --checkpoint --set` does
    # trained_on = "1x H100"      # checkpoints: the training machine, where the run directory does not record it

Episode ``i`` of a split plays seed ``split.seed + i`` and task id ``task_ids[i % len(task_ids)]``, so every entry
meets the same games.
"""

from __future__ import annotations

import fnmatch
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from llm_gym.agent import EnvConfig
from llm_gym.envs.catalog import env_spec
from llm_gym.errors import ConfigError, UnknownNameError, UnsupportedEnvError
from llm_gym.training.evaluation import HELDOUT_SEED
from llm_gym.training.exact import check_exact_env

SUITES_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "suites"
"""Where named suites live (the repository's ``benchmarks/suites``)."""

HELDOUT = "heldout"
TRAIN = "train"


@dataclass(frozen=True)
class Split:
    """A named set of evaluation seeds (and, per env, task ids)."""

    name: str
    """``heldout`` (evaluation; disjoint from training seeds) or ``train`` (the seeds agents train on)."""
    seed: int
    """Episode ``i`` of this split resets with ``seed + i``."""
    description: str = ""
    """What the split is for, shown in the leaderboard."""


@dataclass(frozen=True)
class SuiteEnv:
    """One env of a suite, with everything that makes its episodes comparable."""

    label: str
    """Row name in the leaderboard, unique within the suite."""
    env_id: str
    """A registered env id."""
    args: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments for ``gym.make``."""
    episodes: int = 4
    """Episodes per split."""
    max_steps: int | None = None
    """Cut each episode after this many steps (None: play to the end)."""
    task_ids: Sequence[int] = ()
    """Task ids cycled over the episodes of every split (empty: the env's default task)."""
    split_task_ids: Mapping[str, Sequence[int]] = field(default_factory=dict)
    """Task ids of one split, replacing ``task_ids`` there (held-out Trace programs, say)."""
    game: str = ""
    """The game this env counts for in aggregates (several labels may share one, e.g. text and ascii views)."""
    exact: bool = False
    """Also evaluate every entry that plays this env exactly, once (:mod:`llm_gym.bench.exact`): a small OpenSpiel
    game against the uniformly random opponent. Not part of the env's identity: its episodes keep their hash."""

    def tasks_for(self, split: str) -> list[int]:
        return [int(t) for t in self.split_task_ids.get(split, self.task_ids)]


@dataclass(frozen=True)
class SuiteEntry:
    """One row of the leaderboard: an agent with its config, or a trained checkpoint."""

    name: str
    """Row name, unique within the suite."""
    agent: str | None = None
    """Agent name (see ``llm-gym agents``); None when ``checkpoint`` is given."""
    settings: Mapping[str, Any] = field(default_factory=dict)
    """Config fields, as ``--set`` would give them; for a checkpoint entry, how it plays (applied over the run's saved
    config as ``llm-gym play --checkpoint --set`` applies them, e.g. ``quantize = "int8"``)."""
    checkpoint: str | None = None
    """A checkpoint or run directory (relative paths are taken from the repository root)."""
    envs: Sequence[str] = ("*",)
    """fnmatch patterns over env labels this entry plays."""
    splits: Sequence[str] = ()
    """Splits this entry plays (empty: held-out only, plus ``train`` for checkpoints)."""
    num_envs: int | None = None
    """Envs in lockstep for this entry (None: the suite's)."""
    trained_on: str | None = None
    """Checkpoint entries: the machine the run trained on, shown in the training table where the run's own files
    only say ``device = "auto"`` (None: what the run recorded)."""

    def plays(self, env: SuiteEnv) -> bool:
        return any(fnmatch.fnmatchcase(env.label, p) or fnmatch.fnmatchcase(env.env_id, p) for p in self.envs)


@dataclass(frozen=True)
class EpisodeSpec:
    """One episode a suite asks for; its identity in the store is (entry, config hash, env hash, seed, task id)."""

    entry: str
    env_label: str
    split: str
    index: int
    seed: int
    task_id: int | None


@dataclass(frozen=True)
class Suite:
    """A parsed suite file."""

    name: str
    """The file's stem."""
    path: Path
    """Where it was read from."""
    description: str
    """What it measures."""
    splits: Mapping[str, Split]
    """Split name -> split."""
    envs: Sequence[SuiteEnv]
    """Envs, in file order."""
    entries: Sequence[SuiteEntry]
    """Entries, in file order."""
    num_envs: int = 4
    """Envs in lockstep per (entry, env)."""

    def env(self, label: str) -> SuiteEnv:
        for env in self.envs:
            if env.label == label:
                return env
        raise UnknownNameError("env", label, [e.label for e in self.envs], hint=f"(in suite {self.name!r})")

    def entry(self, name: str) -> SuiteEntry:
        for entry in self.entries:
            if entry.name == name:
                return entry
        raise UnknownNameError("entry", name, [e.name for e in self.entries], hint=f"(in suite {self.name!r})")

    def entry_splits(self, entry: SuiteEntry) -> list[str]:
        wanted = list(entry.splits) or ([HELDOUT, TRAIN] if entry.checkpoint else [HELDOUT])
        return [s for s in wanted if s in self.splits]

    def select(self, entries: Sequence[str] = (), envs: Sequence[str] = ()) -> Suite:
        """This suite cut down to the named entries and env labels, each a name or an fnmatch pattern
        (``breakout-fire-*``); unknown names, and patterns matching nothing, raise with suggestions."""
        chosen_entries = _pick(entries, self.entries, self.entry) if entries else list(self.entries)
        chosen_envs = _pick(envs, self.envs, self.env) if envs else list(self.envs)
        return Suite(self.name, self.path, self.description, self.splits, chosen_envs, chosen_entries, self.num_envs)

    def episodes_of(self, entry: SuiteEntry, env: SuiteEnv, split: str) -> list[EpisodeSpec]:
        """The episodes of one (entry, env, split): the same seeds and task ids for every entry."""
        tasks = env.tasks_for(split)
        return [
            EpisodeSpec(
                entry.name, env.label, split, i, self.splits[split].seed + i, tasks[i % len(tasks)] if tasks else None
            )
            for i in range(env.episodes)
        ]

    def episodes(self) -> list[EpisodeSpec]:
        """Every episode the suite asks for, grouped by (entry, env, split)."""
        return [
            spec
            for entry in self.entries
            for env in self.envs
            if entry.plays(env)
            for split in self.entry_splits(entry)
            for spec in self.episodes_of(entry, env, split)
        ]


def _pick(wanted: Sequence[str], items: Sequence[Any], by_name: Any) -> list[Any]:
    """Items named (or matched by a pattern) in ``wanted``, in the suite's order, each once."""
    chosen: set[str] = set()
    for name in wanted:
        if any(c in name for c in "*?["):
            matched = [i for i in items if fnmatch.fnmatchcase(_name(i), name)]
            if not matched:
                by_name(name)  # raises with the close matches
            chosen.update(_name(i) for i in matched)
        else:
            chosen.add(_name(by_name(name)))
    return [i for i in items if _name(i) in chosen]


def _name(item: Any) -> str:
    return item.label if isinstance(item, SuiteEnv) else item.name


def suite_names(directory: Path = SUITES_DIR) -> list[str]:
    """Names of the suites shipped in ``benchmarks/suites``."""
    return sorted(p.stem for p in directory.glob("*.toml"))


def load_suite(name_or_path: str | Path, directory: Path = SUITES_DIR) -> Suite:
    """A suite by name (``smoke``) or by path to a TOML file; unknown names raise with close matches."""
    path = Path(name_or_path)
    if path.suffix != ".toml":
        path = directory / f"{name_or_path}.toml"
        if not path.is_file():
            raise UnknownNameError("suite", str(name_or_path), suite_names(directory), hint=f"(suites in {directory})")
    elif not path.is_file():
        raise ConfigError(f"suite file {path} does not exist")
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"suite {path} is not valid TOML: {exc}") from exc
    return parse_suite(data, path)


_SUITE_KEYS = {"description", "include", "episodes", "max_steps", "num_envs", "splits", "envs", "entries"}
_ENV_KEYS = {"label", "id", "args", "episodes", "max_steps", "task_ids", "split_task_ids", "game", "exact"}
_ENTRY_KEYS = {"name", "agent", "set", "checkpoint", "envs", "splits", "num_envs", "trained_on"}


def parse_suite(data: Mapping[str, Any], path: Path) -> Suite:
    """Check a suite's TOML data (names, seeds, env ids, agents) and build the :class:`Suite`."""
    where = str(path)
    _known_keys(data, _SUITE_KEYS, where)
    splits = {
        name: Split(name, int(_get(s, "seed", int, f"{where} [splits.{name}]")), str(s.get("description", "")))
        for name, s in dict(data.get("splits") or {HELDOUT: {"seed": HELDOUT_SEED}}).items()
    }
    if HELDOUT not in splits:
        raise ConfigError(f"{where}: a suite needs a [splits.heldout] with the evaluation seed")
    episodes, max_steps = int(data.get("episodes", 4)), data.get("max_steps")
    envs = []
    for i, raw in enumerate(data.get("envs") or []):
        at = f"{where} envs[{i}]"
        _known_keys(raw, _ENV_KEYS, at)
        env_id = str(_get(raw, "id", str, at))
        env_spec(env_id)  # unknown ids raise with close matches
        unknown_splits = set(raw.get("split_task_ids", {})) - set(splits)
        if unknown_splits:
            raise UnknownNameError("split", sorted(unknown_splits)[0], splits, hint=f"({at} split_task_ids)")
        label = str(raw.get("label", env_id))
        envs.append(
            SuiteEnv(
                label=label,
                env_id=env_id,
                args=dict(raw.get("args", {})),
                episodes=int(raw.get("episodes", episodes)),
                max_steps=raw.get("max_steps", max_steps),
                task_ids=tuple(raw.get("task_ids", ())),
                split_task_ids={k: tuple(v) for k, v in raw.get("split_task_ids", {}).items()},
                game=str(raw.get("game", label)),
                exact=_get(raw, "exact", bool, at) if "exact" in raw else False,
            )
        )
        if envs[-1].exact:
            _check_exact(envs[-1], at)
    _unique([e.label for e in envs], "env label", where)
    entries = []
    for i, raw in enumerate(data.get("entries") or []):
        at = f"{where} entries[{i}]"
        _known_keys(raw, _ENTRY_KEYS, at)
        name = str(_get(raw, "name", str, at))
        if ("agent" in raw) == ("checkpoint" in raw):
            raise ConfigError(f"{at} ({name}): give exactly one of agent or checkpoint")
        if "trained_on" in raw and "checkpoint" not in raw:
            raise ConfigError(f"{at} ({name}): trained_on describes a checkpoint's training; this entry has none")
        entry = SuiteEntry(
            name=name,
            agent=raw.get("agent"),
            settings=dict(raw.get("set", {})),
            checkpoint=raw.get("checkpoint"),
            envs=tuple(raw.get("envs", ("*",))),
            splits=tuple(raw.get("splits", ())),
            num_envs=raw.get("num_envs"),
            trained_on=raw.get("trained_on"),
        )
        for split in entry.splits:
            if split not in splits:
                raise UnknownNameError("split", split, splits, hint=f"({at})")
        if not any(entry.plays(env) for env in envs):
            raise ConfigError(f"{at} ({name}): its envs patterns {list(entry.envs)} match no env of the suite")
        entries.append(entry)
    _unique([e.name for e in entries], "entry name", where)
    for name in data.get("include", []):
        included = load_suite(name, path.parent)
        envs += [env for env in included.envs if env.label not in {e.label for e in envs}]
        entries = _merge_entries(entries, included.entries, where)
    if not envs or not entries:
        raise ConfigError(f"{where}: a suite needs at least one [[envs]] and one [[entries]]")
    return Suite(path.stem, path, str(data.get("description", "")), splits, envs, entries, int(data.get("num_envs", 4)))


def _check_exact(env: SuiteEnv, where: str) -> None:
    """An env marked ``exact`` that exact evaluation cannot walk, or whose episodes are not the games it walks (other
    task ids, a step cap that cuts them), is one line when the suite loads, before anything plays."""
    at = f"{where} ({env.label}): exact = true, but"
    if env.task_ids or env.split_task_ids:
        raise ConfigError(f"{at} exact evaluation walks the env's default game, not task ids: drop task_ids or exact")
    config = EnvConfig(env.env_id, dict(env.args))
    try:
        check_exact_env(config)
    except (ConfigError, UnsupportedEnvError) as exc:
        raise ConfigError(f"{at} {exc}") from exc
    made = config.make()
    try:
        made.reset(seed=0)  # loads the game, and with it the cap on the learner's turns
        turns = made.unwrapped.max_turns
    finally:
        made.close()
    if env.max_steps is not None and env.max_steps < turns:
        raise ConfigError(
            f"{at} max_steps = {env.max_steps} cuts episodes that exact evaluation walks to the end ({turns} turns): "
            "raise max_steps or drop exact"
        )


def _merge_entries(mine: list[SuiteEntry], theirs: Sequence[SuiteEntry], where: str) -> list[SuiteEntry]:
    """Entries of an included suite join this one's; an entry in both plays the union of their envs."""
    merged = {e.name: e for e in mine}
    for entry in theirs:
        if entry.name not in merged:
            merged[entry.name] = entry
            continue
        ours = merged[entry.name]
        if replace(ours, envs=()) != replace(entry, envs=()):
            raise ConfigError(f"{where}: entry {entry.name!r} is defined differently in two included suites")
        merged[entry.name] = replace(ours, envs=tuple(dict.fromkeys([*ours.envs, *entry.envs])))
    return list(merged.values())


def _get(table: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in table:
        raise ConfigError(f"{where}: missing {key!r}")
    value = table[key]
    if not isinstance(value, kind):
        raise ConfigError(f"{where}: {key} must be a {kind.__name__}, got {value!r}")
    return value


def _known_keys(table: Any, known: set[str], where: str) -> None:
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where} must be a table, got {table!r}")
    for key in table:
        if key not in known:
            raise UnknownNameError("key", key, known, hint=f"({where})")


def _unique(names: list[str], what: str, where: str) -> None:
    seen = set()
    for name in names:
        if name in seen:
            raise ConfigError(f"{where}: {what} {name!r} appears twice")
        seen.add(name)
