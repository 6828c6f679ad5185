"""The demonstrations file: chat-format JSONL, one line per decision, written by ``llm-gym demos`` and read by the
``sft`` agent (and by anything else that fine-tunes on chat messages).

One line is one :class:`DemoRecord`::

    {"messages": [{"role": "system", "content": "<the env's instructions: the LM agents' system prompt>"},
                  {"role": "user", "content": "<the observation text: the user message the LM agents see>"},
                  {"role": "assistant", "content": "<the answer: the action's name as score mode rates it;
                                                    Trace: the expected stdout>"}],
     "env_id": "LLMBreakout-text-v0", "env_args": {"fire_on_reset": true},
     "seed": 0, "episode": 0, "step": 12, "task_id": null,
     "action": 3, "reward": 0.0, "return_to_go": 5.0, "episode_return": 5.0, "episode_score": 5.0,
     "source": {"agent": "scripted", "config": {}, "checkpoint": null, "sampled": false, "llm_gym_version": "0.1.0"}}

* ``messages`` come from :mod:`llm_gym.lm.prompts` (``chat_messages``), the code that builds the prompts of
  ``ppo_lora``, ``llm-gym play`` and the zero-shot agent, so a model fine-tuned on them sees exactly what it will be
  asked. The system message is absent where the env has no instructions.
* ``reward`` is the env's reward of that step (shaping included where the env was asked for it);
  ``return_to_go`` is the **undiscounted** sum of the rewards from this step to the end of the episode, this step's
  included (a reader that wants a discounted target recomputes it from ``reward`` along ``step``).
  ``episode_return`` and ``episode_score`` (the game's own score at the end, ``info["score"]``; the return where
  the env reports none) are the finished episode's, the same on each of its lines, so a reader can keep the
  episodes of a good demonstrator only.
* ``seed`` is the episode's reset seed, ``episode`` its index in the file's run, ``step`` the decision's index in
  the episode (0 first); ``task_id`` the reset option where one was given. ``source`` says which policy made the
  decision: an agent name and its config, or a checkpoint path, and the llm-gym version.

Lines are written per finished episode and flushed (:func:`write_records` appends), so a run that is killed loses
at most the episode it was playing, never half a line's worth of a file that :func:`read_demos` then rejects.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from llm_gym.atomic import writing
from llm_gym.errors import ConfigError

ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class DemoRecord:
    """One demonstrated decision (one line of a demonstrations file)."""

    messages: tuple[Mapping[str, str], ...]
    """The chat: an optional system message (the env's instructions), the user message (the observation text) and
    the assistant message (the answer). Earlier turns come before the last user message where the env shows
    history (``--env-arg history=K``)."""
    env_id: str
    """The env the decision was taken in."""
    env_args: Mapping[str, Any] = field(default_factory=dict)
    """The ``gym.make`` keyword arguments of that env (JSON values)."""
    seed: int | None = None
    """The episode's reset seed."""
    episode: int = 0
    """The episode's index among those the producing run played."""
    step: int = 0
    """The decision's index in its episode (0 first)."""
    task_id: int | None = None
    """The episode's ``task_id`` reset option, where one was given."""
    action: int | str | None = None
    """The action id the env was stepped with (``Discrete`` envs); the answer text where the env takes text."""
    choices: tuple[str, ...] = ()
    """The names of the legal actions at this decision, in the env's order (``info["action_names"]``): what score
    mode ranks, the answer among them. Empty where the env takes text, or in files written before this field."""
    choice_values: tuple[float, ...] = ()
    """The demonstrator's value of each of ``choices`` for the player to move (an exact solver's minimax values),
    where it has them (a policy's ``action_values``); empty otherwise. ``sft --set choice_target=best`` reads them."""
    reward: float = 0.0
    """The reward of this step."""
    return_to_go: float = 0.0
    """Undiscounted sum of the rewards from this step to the episode's end (this step's included)."""
    episode_return: float = 0.0
    """The finished episode's return."""
    episode_score: float = 0.0
    """The finished episode's game score (``info["score"]`` at its end; the return where the env has none)."""
    source: Mapping[str, Any] = field(default_factory=dict)
    """Who decided: ``agent``, ``config``, ``checkpoint``, ``sampled`` (the policy sampled its actions instead of
    taking the most likely one: ``llm-gym demos --sample``), ``llm_gym_version`` (and, for ground truth, how)."""

    @property
    def answer(self) -> str:
        """The assistant message: what a model fine-tuned on this record learns to answer."""
        return self.messages[-1]["content"]

    @property
    def prompt_messages(self) -> list[dict[str, str]]:
        """Every message before the answer (what the model is given)."""
        return [dict(m) for m in self.messages[:-1]]

    def to_json(self) -> str:
        """The record as one line of JSON (no newline)."""
        data = asdict(self)
        data["messages"] = [dict(m) for m in self.messages]
        return json.dumps(data, ensure_ascii=False)


_FIELDS = {f.name for f in fields(DemoRecord)}
_REQUIRED = ("messages", "env_id")


def write_records(path: str | Path, records: Iterable[DemoRecord]) -> int:
    """Append ``records`` to the JSONL file at ``path`` (created with its directory if missing), one line each,
    flushed before returning; returns how many lines were written. Call it once per finished episode.

    All of an episode's lines or none: a write that fails part-way (a full disk) is cut back to where the file
    ended, a file this call created is removed again, and the failure is one line naming the file."""
    path = Path(path)
    lines = [record.to_json() + "\n" for record in records]
    data = memoryview("".join(lines).encode("utf-8"))
    with writing(path, "the records written before are kept"):
        path.parent.mkdir(parents=True, exist_ok=True)
        created = not path.exists()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        start = os.lseek(fd, 0, os.SEEK_END)
        try:
            while data:
                data = data[os.write(fd, data) :]
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, start)
                if created and start == 0:
                    path.unlink()
            raise
        finally:
            os.close(fd)
    return len(lines)


def read_demos(path: str | Path) -> list[DemoRecord]:
    """Every record of a demonstrations file, in file order. A missing file, or any malformed line (not JSON, a
    missing or unknown key, messages that are not a chat ending with the answer), raises :class:`ConfigError`
    naming the file and the line number; nothing is skipped silently. Blank lines are allowed."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{path} is a folder; give the demonstrations file (JSONL) that `llm-gym demos --out` wrote")
    if not path.is_file():
        raise ConfigError(f"demonstrations file {path} does not exist; write one with `llm-gym demos ... --out {path}`")
    records = []
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:  # a binary file given as demos
                raise ConfigError(
                    f"{path}:{number}: not UTF-8 text (byte {exc.start + 1} of the line); a demonstrations file is "
                    "the JSONL `llm-gym demos --out` writes"
                ) from exc
            if not line.strip():
                continue
            try:
                records.append(parse_record(json.loads(line)))
            except (json.JSONDecodeError, ValueError, TypeError, RecursionError) as exc:
                raise ConfigError(f"{path}:{number}: not a demonstration line: {_reason(exc)}") from exc
    return records


def parse_record(data: Any) -> DemoRecord:
    """A :class:`DemoRecord` from one line's decoded JSON; ``ValueError`` says what is wrong with it."""
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    missing = [key for key in _REQUIRED if key not in data]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(unknown)}; a line has {', '.join(sorted(_FIELDS))}")
    messages = _messages(data["messages"])
    if not isinstance(data["env_id"], str) or not data["env_id"]:
        raise ValueError("env_id must be a non-empty string")
    for key in ("env_args", "source"):
        if not isinstance(data.get(key, {}), dict):
            raise ValueError(f"{key} must be an object")
    for key in ("reward", "return_to_go", "episode_return", "episode_score"):
        value = data.get(key, 0.0)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{key} must be a number, got {value!r}")
    choices = data.get("choices", [])
    if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
        raise ValueError(f"choices must be a list of action names, got {choices!r:.80}")
    if choices and messages[-1]["content"] not in choices:
        raise ValueError(f"the answer {messages[-1]['content']!r:.40} is not one of the choices")
    values = data.get("choice_values", [])
    if not isinstance(values, list) or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in values):
        raise ValueError(f"choice_values must be a list of numbers, got {values!r:.80}")
    if values and len(values) != len(choices):
        raise ValueError(f"choice_values has {len(values)} numbers for {len(choices)} choices")
    data = {**data, "choices": tuple(choices), "choice_values": tuple(float(v) for v in values)}
    for key in ("episode", "step"):
        if type(data.get(key, 0)) is not int:
            raise ValueError(f"{key} must be an integer, got {data[key]!r}")
    return DemoRecord(**{**data, "messages": messages})


def _messages(value: Any) -> tuple[Mapping[str, str], ...]:
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) < 2:
        raise ValueError("messages must be a list of at least a user and an assistant message")
    for message in value:
        if not isinstance(message, dict) or set(message) != {"role", "content"}:
            raise ValueError(f"each message is an object with role and content only, got {message!r:.80}")
        if message["role"] not in ROLES or not isinstance(message["content"], str):
            raise ValueError(f"message role must be one of {', '.join(ROLES)} and content a string")
    if value[-1]["role"] != "assistant" or value[-2]["role"] != "user":
        raise ValueError("messages must end with a user message and the assistant's answer")
    return tuple({"role": m["role"], "content": m["content"]} for m in value)


def _reason(exc: Exception) -> str:
    text = str(exc)
    return text if len(text) <= 160 else text[:157] + "..."
