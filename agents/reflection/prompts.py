"""The reflection prompt and its JSON answer format, in one place.

The model is shown one poor step of its own play: the observation before the move, the move it made, the
observation after it and how the game went from there (the step's outcome under the credit-assignment rule of
:mod:`llm_gym.agents.reflection.credit`). It answers with one JSON object::

    {"analysis": "what went wrong", "action": "<one legal action name>", "reasoning": "why it is better"}

:func:`parse_reflection` reads that answer. It accepts the object anywhere in the text (models like to wrap it in
prose or a code fence) and, when the JSON itself is broken, an ``"action": "X"`` pair; the action must name a legal
action (through the shared parser, so ``"up"`` finds ``UP``). Anything else is unparsable: counted by the agent and
skipped, never an error.

Tiny random test models never write valid JSON, and very small models cannot be relied on to, so there is a
second answer mode, ``scored``: the model writes only its analysis (:data:`ANALYSIS_TASK`), and the corrected
action is then the legal action other than the one taken that it finds most likely as the answer to the same prompt
followed by that analysis (:func:`scored_choice_observation`), computed exactly in score mode. Such a reflection always names a
legal action (a forced move, with no other legal action, counts as unparsable).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llm_gym.actions import parse_action
from llm_gym.lm.prompts import observation_text

ANSWER_KEYS = ("analysis", "action", "reasoning")

REFLECTION_TASK = (
    "You are reviewing one move from a game you played. You will see the game state before the move, the move "
    "you made, the state after it and what happened next. Say what went wrong and which legal action would have "
    "been better.\n"
    "Answer with one JSON object and nothing else, in this form:\n"
    '{"analysis": "<what went wrong>", "action": "<one legal action name>", "reasoning": "<why it is better>"}'
)

ANALYSIS_TASK = (
    "You are reviewing one move from a game you played. You will see the game state before the move, the move "
    "you made, the state after it and what happened next. In one or two sentences, say what went wrong."
)

_ACTION_PAIR = re.compile(r'"action"\s*:\s*"([^"\n]{1,64})"', re.IGNORECASE)
_REASONING_PAIR = re.compile(r'"reasoning"\s*:\s*"([^"\n]*)"', re.IGNORECASE)


def reflection_instructions(env_instructions: str, answer: str = "json") -> str:
    """The system message of a reflection: the game's rules, then the reviewing task (``json``: the JSON answer;
    ``scored``: the analysis only)."""
    task = REFLECTION_TASK if answer == "json" else ANALYSIS_TASK
    rules = env_instructions.strip()
    return f"{rules}\n\n{task}" if rules else task


@dataclass(frozen=True)
class StepForReflection:
    """What the model is shown about one poor step."""

    before: Any
    """The observation the move was chosen on (text, or a vision env's ``{"image", "text"}``)."""
    after: Any
    """The observation right after the move."""
    action_name: str
    """The move that was made."""
    legal_names: tuple[str, ...]
    """The legal actions at ``before``."""
    reward: float
    """Reward of the step itself."""
    outcome: float
    """The step's credit-assigned outcome (discounted reward-to-go, see ``credit``)."""
    horizon_rewards: tuple[float, ...]
    """The rewards of the next few steps, as they came (for the model to see what followed)."""


def reflection_observation(step: StepForReflection, answer: str = "json") -> Any:
    """The user message of a reflection: text for text envs; ``{"images": [before, after], "text"}`` when the
    observations carry images (the vision backend puts one image placeholder per image, in order)."""
    later = ", ".join(f"{r:+g}" for r in step.horizon_rewards) or "none (the game ended)"
    text = (
        f"State before your move:\n{observation_text(step.before)}\n\n"
        f"Your move: {step.action_name}\n\n"
        f"State after your move:\n{observation_text(step.after)}\n\n"
        f"Reward of this move: {step.reward:+g}. Rewards of the following steps: {later}. "
        f"Discounted outcome: {step.outcome:+.3f} (this was one of your worst moves).\n"
        f"Legal actions: {', '.join(step.legal_names)}\n"
        + ("Your JSON answer:" if answer == "json" else "What went wrong?")
    )
    images = [obs["image"] for obs in (step.before, step.after) if isinstance(obs, Mapping) and "image" in obs]
    return {"images": images, "text": text} if images else text


def scored_choice_observation(observation: Any, analysis: str) -> Any:
    """``scored`` mode, second step: the reflection prompt followed by the model's analysis, asking for the action
    (the legal actions' names are then scored as the answer)."""
    addition = f"\nWhat went wrong: {analysis.strip() or '(no answer)'}\nThe better move, as one legal action name:"
    if isinstance(observation, Mapping):
        return {**observation, "text": observation_text(observation) + addition}
    return observation + addition


@dataclass(frozen=True)
class Reflection:
    """A parsed reflection."""

    action: int
    """The proposed action id (legal at the reflected step)."""
    action_name: str
    analysis: str
    reasoning: str


def _json_objects(text: str) -> list[dict[str, Any]]:
    """Every JSON object that starts at a ``{`` in ``text`` and decodes, in order."""
    decoder = json.JSONDecoder()
    found = []
    for start, char in enumerate(text):
        if char != "{":
            continue
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def parse_reflection(
    text: str,
    legal_names: Sequence[str],
    legal_ids: Sequence[int],
    aliases: Mapping[str, int] | None = None,
) -> Reflection | None:
    """The reflection in a model's answer, or None when no legal action can be read from it (never raises)."""
    if not isinstance(text, str):
        return None
    candidates: list[tuple[Any, Any, Any]] = [
        (obj.get("action"), obj.get("analysis", ""), obj.get("reasoning", ""))
        for obj in _json_objects(text)
        if "action" in obj
    ]
    if not candidates:  # broken JSON: an "action": "X" pair still says what the model proposes
        pair = _ACTION_PAIR.search(text)
        if pair:
            reasoning = _REASONING_PAIR.search(text)
            candidates.append((pair.group(1), "", reasoning.group(1) if reasoning else ""))
    for action, analysis, reasoning in candidates:
        if not isinstance(action, (str, int)) or isinstance(action, bool):
            continue
        parsed = parse_action(str(action), list(legal_names), list(legal_ids), aliases)
        # Only a name, an alias or an id counts: a mention inside a sentence is not a proposal.
        if parsed.action is None or parsed.method not in ("name", "id", "prefix"):
            continue
        name = legal_names[list(legal_ids).index(parsed.action)]
        return Reflection(parsed.action, str(name), str(analysis or ""), str(reasoning or ""))
    return None


def format_reflection(analysis: str, action_name: str, reasoning: str) -> str:
    """A reflection answer in the expected format (what a well-behaved model writes; used for examples and tests)."""
    return json.dumps({"analysis": analysis, "action": action_name, "reasoning": reasoning})
