"""Model text -> action id: the one parser every env and agent shares.

:func:`parse_action` never raises. What it cannot turn into a legal action comes back with ``action=None`` and is
handled by an :class:`InvalidActionPolicy` (default: the env's no-op action and a small penalty), which
:class:`TextActions` applies and counts in ``info``.

Matching order, first hit wins (names are compared case-insensitively, whitespace collapsed):

1. the whole answer is an action name (or an alias);
2. the whole answer is a legal action id;
3. an ``action: X`` / ``answer: X`` line, X parsed by 1-2;
4. the earliest action name written as a whole word inside the answer (longest name at the same position);
5. the first free-standing integer in the answer that is a legal action id (not part of a word, a coordinate pair
   such as ``1,1`` or a bracket: ``x(1,1)`` holds no id);
6. the answer is the prefix of exactly one name;
7. the answer is a substring of exactly one name.

The parser never plays a move other than the one the answer names: where no legal name is mentioned but the answer
writes something shaped like the game's moves (``x(1,1)``, ``pile:1, take:5``: a legal name with other numbers)
that is not legal now, the answer names an illegal move and is invalid (method ``illegal``), before rules 5-7
could read a number or a fragment of it as some other move.

Before matching, ``<think>...</think>`` blocks are dropped and, if the answer has a fenced code block, only the
last block is kept.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import gymnasium as gym
import numpy as np

# InvalidActionPolicy lives with the env protocol (envs take it as a setting; envs never import this module).
from llm_gym.envs.protocol import InvalidActionPolicy, action_aliases, noop_action
from llm_gym.envs.spaces import TEXT_CHARSET

_THINK = re.compile(r"<think>.*?(</think>|$)", re.IGNORECASE | re.DOTALL)
_FENCE = re.compile(r"```[^\n`]*\n?(.*?)(```|$)", re.DOTALL)
_LABEL = re.compile(r"(?:^|\n)\s*(?:final\s+)?(?:action|answer|move)\s*[:=]\s*(.+)", re.IGNORECASE)
_INT = re.compile(r"(?<![\w.])-?\d+(?![\w.])")
# An id written on its own: after a space, ':', '=' or '#' (or at the start), and before a space, the end or a
# sentence mark; a comma only where no number follows (``1,1`` is a coordinate pair, not two ids).
_ID_NUMBER = re.compile(r"(?<![^\s:=#])-?\d+(?=$|[\s!?;:]|\.(?!\d)|,(?!\s*\d))")
_DIGITS = re.compile(r"\d+")
_SPACES = re.compile(r"\s+")
_TRIM = " \t\r\n.,;:!?\"'`*()[]{}<>"
_MAX_ID_DIGITS = 18

ParseMethod = Literal["name", "id", "label", "mention", "illegal", "number", "prefix", "substring", "none"]


@dataclass(frozen=True, slots=True)
class ParsedAction:
    """What :func:`parse_action` made of a model's text."""

    action: int | None
    """The env action id, or None when nothing legal could be read."""
    method: ParseMethod
    """Which rule matched (``"none"`` when nothing did)."""


def legal_action_name(action: Any, info: Mapping[str, Any]) -> str | None:
    """The name of ``action`` among the legal actions in ``info`` (``action_names``, parallel to
    ``legal_actions``: score mode's choices), or None where it is not legal or the info names none."""
    legal = [int(a) for a in info.get("legal_actions", ())]
    names = list(info.get("action_names", ()))
    if int(action) in legal and len(names) == len(legal):
        return str(names[legal.index(int(action))])
    return None


def clean_answer(text: object) -> str:
    """Drop think blocks, keep the last fenced code block if there is one, trim and collapse whitespace."""
    text = text if isinstance(text, str) else str(text)
    text = _THINK.sub(" ", text)
    # A fence with nothing inside ("```NOOP" reads as a fence tagged NOOP) says nothing: drop the backticks instead.
    fences = [body for body, _ in _FENCE.findall(text) if body.strip()]
    text = fences[-1] if fences else text.replace("```", " ")
    return _normalise(text)


def _normalise(text: str) -> str:
    return _SPACES.sub(" ", text).strip().lower()


def parse_action(
    text: object,
    action_names: Sequence[str],
    legal_actions: Sequence[int] | None = None,
    aliases: Mapping[str, int] | None = None,
) -> ParsedAction:
    """Read an action from a model's answer.

    Args:
        text: the model's output (anything; non-strings are converted with ``str``).
        action_names: the names of the legal actions, parallel to ``legal_actions``.
        legal_actions: the legal action ids; defaults to ``range(len(action_names))``.
        aliases: extra spellings that map to an action id (e.g. ``{"up": 2}``); only legal ids are used.

    Returns:
        The parsed action and the rule that matched; ``action`` is None if nothing legal was found.
    """
    legal = list(range(len(action_names))) if legal_actions is None else [int(a) for a in legal_actions]
    names: dict[str, int] = {}
    for name, action in zip(action_names, legal, strict=False):
        names.setdefault(_normalise(str(name)), action)
    for alias, action in (aliases or {}).items():
        if action in legal:
            names.setdefault(_normalise(alias), action)
    names.pop("", None)
    answer = clean_answer(text)
    if not answer:
        return ParsedAction(None, "none")

    direct = _match_whole(answer, names, legal)
    if direct is not None:
        return direct
    label = _LABEL.search(answer)
    if label:
        labelled = _match_whole(_normalise(label.group(1).split("\n")[0]), names, legal)
        if labelled is not None:
            return ParsedAction(labelled.action, "label")
    mention = _earliest_mention(answer, names)
    if mention is not None:
        return ParsedAction(mention, "mention")
    if _names_an_illegal_move(answer, tuple(names)):
        return ParsedAction(None, "illegal")
    legal_set = set(legal)
    for number in _ID_NUMBER.findall(answer):
        value = _small_int(number)
        if value is not None and value in legal_set:
            return ParsedAction(value, "number")
    stem = answer.strip(_TRIM)
    if stem:
        by_prefix = {a for n, a in names.items() if n.startswith(stem)}
        if len(by_prefix) == 1:
            return ParsedAction(by_prefix.pop(), "prefix")
        by_substring = {a for n, a in names.items() if stem in n}
        if len(by_substring) == 1:
            return ParsedAction(by_substring.pop(), "substring")
    return ParsedAction(None, "none")


def _match_whole(answer: str, names: dict[str, int], legal: list[int]) -> ParsedAction | None:
    for candidate in (answer, answer.strip(_TRIM)):
        if candidate in names:
            return ParsedAction(names[candidate], "name")
    stripped = answer.strip(_TRIM)
    value = _small_int(stripped) if _INT.fullmatch(stripped) else None
    if value is not None and value in legal:
        return ParsedAction(value, "id")
    return None


@functools.lru_cache(maxsize=256)
def _move_shapes(names: tuple[str, ...]) -> re.Pattern[str] | None:
    """One pattern matching every name of ``names`` with other numbers in it (``x(0,1)`` -> ``x(\\d+,\\d+)``), as a
    whole word; None where no name holds a number (then no other move can be told from ordinary text)."""
    shapes = {_DIGITS.sub(r"\\d+", re.escape(name)) for name in names if _DIGITS.search(name)}
    if not shapes:
        return None
    return re.compile(r"(?<![^\W_])(?:" + "|".join(sorted(shapes, key=len, reverse=True)) + r")(?![^\W_])")


def _names_an_illegal_move(answer: str, names: tuple[str, ...]) -> bool:
    shapes = _move_shapes(names)
    return shapes is not None and any(m.group(0) not in names for m in shapes.finditer(answer))


def _small_int(digits: str) -> int | None:
    """The integer ``digits`` spells (``-?\\d+``), or None when it is too long to be an action id.

    Python refuses ``int()`` of more than 4,300 digits (and a long run costs quadratic time before that); no action
    id has more than a few, so longer numbers are not ids.
    """
    significant = digits.lstrip("-").lstrip("0") or "0"
    if len(significant) > _MAX_ID_DIGITS:
        return None
    return -int(significant) if digits.startswith("-") else int(significant)


def _earliest_mention(answer: str, names: dict[str, int]) -> int | None:
    best: tuple[int, int, int] | None = None  # (position, -length, action)
    for name, action in names.items():
        start = answer.find(name)
        while start >= 0:
            end = start + len(name)
            # A name counts as a mention only where it is not part of a longer word.
            if not _is_word_char(answer, start - 1) and not _is_word_char(answer, end):
                key = (start, -len(name), action)
                if best is None or key < best:
                    best = key
                break
            start = answer.find(name, start + 1)
    return None if best is None else best[2]


def _is_word_char(text: str, index: int) -> bool:
    return 0 <= index < len(text) and text[index].isalnum()


class TextActions(gym.Wrapper):
    """Lets a user (or a model) step an env with a string; the shared parser turns it into an action id.

    ``info`` gains ``parsed_action``, ``parse_method``, ``invalid_action`` (this step) and ``invalid_actions``
    (count in this episode). The env must put ``legal_actions`` and ``action_names`` in its ``info``.
    """

    def __init__(self, env: gym.Env, policy: InvalidActionPolicy | None = None, max_length: int = 4096) -> None:
        super().__init__(env)
        self.policy = policy or InvalidActionPolicy()
        self.action_space = gym.spaces.Text(max_length=max_length, min_length=0, charset=TEXT_CHARSET)
        self._info: dict[str, Any] = {}
        self._invalid = 0

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self._info, self._invalid = info, 0
        return obs, {**info, "invalid_actions": 0}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        legal = list(self._info.get("legal_actions", ()))
        if not legal:  # before the first reset, or after the game ended: no move can be read or played
            raise gym.error.ResetNeeded("the episode is over (no legal actions) or never started: call reset() first")
        parsed = parse_action(action, self._info["action_names"], legal, action_aliases(self.env))
        chosen, penalty = parsed.action, 0.0
        if chosen is None:
            self._invalid += 1
            penalty = self.policy.penalty
            chosen = self._fallback(legal)
        obs, reward, terminated, truncated, info = self.env.step(chosen)
        self._info = info
        info = {
            **info,
            "parsed_action": chosen,
            "parse_method": parsed.method,
            "invalid_action": parsed.action is None,
            "invalid_action_penalty": penalty,
            "invalid_actions": self._invalid,
        }
        return obs, float(reward) - penalty, terminated, truncated, info

    def state_dict(self) -> dict[str, Any]:
        """What the next step parses against (the latest legal actions and names) and the episode's invalid count;
        :mod:`llm_gym.envs.snapshots` saves it beside the env's own snapshot."""
        keep = ("legal_actions", "action_names", "action_mask")
        return {"info": {k: self._info[k] for k in keep if k in self._info}, "invalid": self._invalid}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._info, self._invalid = dict(state["info"]), int(state["invalid"])

    def _fallback(self, legal: list[int]) -> int:
        noop = noop_action(self.env)
        if self.policy.fallback == "noop" and noop in legal:
            return int(noop)
        rng: np.random.Generator = self.unwrapped.np_random
        return int(legal[int(rng.integers(len(legal)))])
