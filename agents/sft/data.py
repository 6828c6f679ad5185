"""Demonstrations as training examples: each demo line's system and user messages become the prompt exactly as the
LM agents build it (:class:`~llm_gym.lm.prompts.PromptBuilder`), its assistant message the answer, encoded by the
shared :func:`~llm_gym.lm.finetune.answer_only_labels` (label -100 on every prompt token), plus the demo's
return-to-go for the value head. Demos are split into training and validation sets by whole episodes, so no
decision of a held-out episode is trained on.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from llm_gym.agent import best_value_indices
from llm_gym.demos.format import DemoRecord, read_demos
from llm_gym.errors import ConfigError
from llm_gym.lm.finetune import Encoded, answer_only_labels
from llm_gym.lm.prompts import PromptBuilder, Turns


@dataclass(frozen=True)
class DemoExample:
    """One demo decision, encoded."""

    encoded: Encoded
    """Prompt + answer token ids; labels -100 on the prompt."""
    uses_prefix: bool
    """The prompt starts with the model's cached system-prompt prefix (false for a demo with another system text)."""
    return_to_go: float
    """The value head's target: the demonstrator's return from this decision to the end of its episode
    (discounted where ``value_gamma`` < 1, :func:`value_targets`)."""
    episode: str
    """Which demo episode it belongs to (the unit of the train/validation split)."""
    choices: tuple[tuple[int, ...], ...] = ()
    """Token ids of each legal action's name as a whole answer (score mode's choices); empty where the demo lists
    none."""
    answer_index: int = -1
    """The answer's index in ``choices`` (-1 without choices)."""
    best: tuple[int, ...] = ()
    """Indices of the choices the demonstrator values as highly as its best (``choice_values``); empty without."""


def load_records(path: str, env_id: str, max_demos: int = 0) -> list[DemoRecord]:
    """The demo lines of ``path`` (all from ``env_id``), at most ``max_demos`` (cut at an episode's end)."""
    if not path:
        raise ConfigError("sft needs demos: --set demos=FILE.jsonl (write one with `llm-gym demos`)")
    if Path(path).is_dir():
        raise ConfigError(f"demos={path} is a folder; give the JSONL file in it that `llm-gym demos --out` wrote")
    if not Path(path).is_file():
        raise ConfigError(f"demos file {path} does not exist (write one with `llm-gym demos --out {path}`)")
    records = read_demos(path)
    if not records:
        raise ConfigError(f"demos file {path} holds no demonstrations")
    others = sorted({r.env_id for r in records} - {env_id})
    if others:
        raise ConfigError(f"demos file {path} holds demos of {', '.join(others)}; this run trains on {env_id}")
    if max_demos and len(records) > max_demos:
        keep = max_demos
        while keep < len(records) and episode_key(records[keep]) == episode_key(records[keep - 1]):
            keep += 1
        records = records[:keep]
    return records


def check_lengths(examples: Sequence[DemoExample], records: Sequence[DemoRecord], context: int, path: str) -> None:
    """Refuse a demo longer than the model's context (a 2M-character message asked for terabytes of attention),
    naming it, before any of it reaches the model."""
    for example, record in zip(examples, records, strict=True):
        tokens = len(example.encoded.input_ids)
        if tokens > context:
            raise ConfigError(
                f"demos file {path}: the decision at seed {record.seed}, step {record.step} is {tokens:,} tokens, "
                f"more than the model's context of {context:,}; shorten it or leave its episode out"
            )


def value_targets(records: Sequence[DemoRecord], gamma: float, path: str = "the demos file") -> list[float]:
    """Each decision's value target: its ``return_to_go`` (``gamma`` 1), or its return to the end of its episode
    discounted by ``gamma`` per env step, what PPO's value head learns. The rewards between two lines of an
    episode (the difference of their ``return_to_go``: a decision whose action had no name has no line) count at
    the first one's step, so with a line for every step this is exactly sum_k gamma^k r_(t+k)."""
    if gamma == 1.0:
        return [float(r.return_to_go or 0.0) for r in records]
    walked = sum(1 for r in records if "walk" in (r.source or {}))
    if walked:
        raise ConfigError(
            f"value_gamma={gamma} needs played episodes, but {walked} lines of {path} come from a demo tree (their "
            "return_to_go is an expected value, not a sum of rewards along steps); set value_gamma=1"
        )
    episodes: dict[str, list[int]] = {}
    for i, record in enumerate(records):
        episodes.setdefault(episode_key(record), []).append(i)
    targets = [0.0] * len(records)
    for index in episodes.values():
        later: tuple[int, float, float] | None = None  # the next line's (step, return_to_go, target)
        for i in sorted(index, key=lambda i: records[i].step, reverse=True):
            step, to_go = records[i].step, float(records[i].return_to_go or 0.0)
            if later is None:
                target = to_go
            else:
                later_step, later_to_go, later_target = later
                target = (to_go - later_to_go) + gamma ** (later_step - step) * later_target
            targets[i], later = target, (step, to_go, target)
    return targets


def episode_key(record: DemoRecord) -> str:
    return f"{record.env_id}|{record.seed}|{record.episode}|{record.task_id}"


def split_episodes(
    records: Sequence[DemoRecord], fraction: float, seed: int
) -> tuple[list[DemoRecord], list[DemoRecord]]:
    """(training, validation): whole episodes go to validation by a seeded hash of their key, about ``fraction`` of
    them (at least one when ``fraction`` > 0 and there are two episodes or more)."""
    keys = sorted({episode_key(r) for r in records})
    if fraction <= 0 or len(keys) < 2:
        return list(records), []

    def rank(key: str) -> str:
        return hashlib.sha256(f"{seed}|{key}".encode()).hexdigest()

    held = set(sorted(keys, key=rank)[: max(1, round(fraction * len(keys)))])
    return [r for r in records if episode_key(r) not in held], [r for r in records if episode_key(r) in held]


class DemoEncoder:
    """Encodes demos for one model: prompts through the model's builder where the demo's system message is the
    env's instructions (they then share the cached prefix), through a builder of their own otherwise."""

    def __init__(self, builder: PromptBuilder, with_end: bool) -> None:
        self.builder, self.with_end = builder, with_end
        self._others: dict[str, PromptBuilder] = {}

    def encode(self, record: DemoRecord, value_target: float | None = None) -> DemoExample:
        """``record`` encoded; ``value_target`` replaces its ``return_to_go`` as the value head's target."""
        system, turns, user, answer = _messages(record)
        builder = self.builder if system == self.builder.instructions else self._other(system)
        prompt = builder.encode([user], [turns])[0]
        uses_prefix = prompt.uses_prefix and builder is self.builder
        encoded = answer_only_labels(prompt.ids, self.builder.choice_ids(answer, self.with_end))
        choices = tuple(tuple(self.builder.choice_ids(name, self.with_end)) for name in record.choices)
        index = record.choices.index(answer) if answer in record.choices else -1
        best = best_value_indices(record.choice_values)
        return DemoExample(
            encoded,
            uses_prefix,
            float(record.return_to_go or 0.0) if value_target is None else value_target,
            episode_key(record),
            choices,
            index,
            best,
        )

    def _other(self, system: str) -> PromptBuilder:
        if system not in self._others:
            self._others[system] = PromptBuilder(self.builder.tokenizer, system)
        return self._others[system]


def _messages(record: DemoRecord) -> tuple[str, Turns, str, str]:
    """(system text, earlier (observation, move) turns, the observation, the answer) of a demo line."""
    messages = list(record.messages)
    system = messages.pop(0)["content"] if messages and messages[0]["role"] == "system" else ""
    roles = [m["role"] for m in messages]
    if len(roles) % 2 or any(r != ("user", "assistant")[i % 2] for i, r in enumerate(roles)):
        raise ConfigError(
            f"a demo of {record.env_id} (episode {record.episode}, step {record.step}) must alternate user and "
            f"assistant messages after the system message, ending with the answer; got roles {roles}"
        )
    pairs = [(messages[i]["content"], messages[i + 1]["content"]) for i in range(0, len(messages), 2)]
    return system, tuple(pairs[:-1]), pairs[-1][0], pairs[-1][1]
