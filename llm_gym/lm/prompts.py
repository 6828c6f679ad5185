"""Prompts are built here and nowhere else: the env's ``instructions`` become the system message, the observation
the user message, both through the model's chat template, ending where the assistant's answer begins.

The system message is the same on every step of every env, so its tokens form a prefix whose KV cache is computed
once (:mod:`llm_gym.lm.forward`). :class:`PromptBuilder` finds that prefix at a token boundary and tells, per
prompt, whether the tokenised prompt really starts with it (BPE merges across the boundary would make it differ;
such a prompt is then run without the cached prefix, never with a wrong one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llm_gym.envs.protocol import env_instructions, observation_text

__all__ = ["EncodedPrompt", "PromptBuilder", "chat_messages", "env_instructions", "observation_text"]

_SENTINELS = ("Aa", "z 9")


Turns = tuple[tuple[str, str], ...]
"""Earlier (observation text, move) pairs of the episode, oldest first (:mod:`llm_gym.envs.history`)."""


def chat_messages(
    instructions: str, observation: Any, system_role: bool = True, turns: Turns = ()
) -> list[dict[str, str]]:
    """The chat messages for one decision: the env's rules as the system message, then each earlier turn as a user
    message (its observation) and an assistant message (the move), then the observation as the user's. Every backend
    builds its prompt from these (``system_role=False`` folds the rules into the first user message for templates
    without a system role)."""
    users = [observation_text(o) for o, _ in turns] + [observation_text(observation)]
    if instructions and not system_role:
        users[0] = f"{instructions}\n\n{users[0]}"
    messages = [{"role": "system", "content": instructions}] if instructions and system_role else []
    for (_, move), user in zip(turns, users, strict=False):
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": move}]
    return [*messages, {"role": "user", "content": users[-1]}]


@dataclass(frozen=True)
class EncodedPrompt:
    """One prompt as token ids, and whether it starts with the builder's shared prefix."""

    ids: list[int]
    uses_prefix: bool


class PromptBuilder:
    """Chat-template prompts for one env (one system prompt) and one tokenizer.

    Args:
        tokenizer: a Hugging Face tokenizer; without a chat template a plain ``instructions / observation /
            Answer:`` layout is used.
        instructions: the env's rules text, the system message ('' for none).
    """

    def __init__(self, tokenizer: Any, instructions: str = "") -> None:
        self.tokenizer = tokenizer
        self.instructions = instructions
        self._system_role = True
        self.prefix_ids: list[int] = self._find_prefix()
        self.answer_end_ids: list[int] = self._find_answer_end()
        self._choice_cache: dict[tuple[str, bool], list[int]] = {}

    def choice_ids(self, choice: str, with_end: bool = True) -> list[int]:
        """Token ids of ``choice`` as the whole answer: its tokens, then (``with_end``) the token that closes an
        answer in this chat template, so that an action whose name is a prefix of another's ("1" vs "10") gets
        the probability of being the *whole* answer."""
        key = (choice, with_end)
        if key not in self._choice_cache:
            ids = list(self.tokenizer(choice, add_special_tokens=False)["input_ids"])
            if not ids:
                raise ValueError(f"choice {choice!r} has no tokens")
            self._choice_cache[key] = ids + (self.answer_end_ids if with_end else [])
        return self._choice_cache[key]

    def messages(self, observation: Any, turns: Turns = (), instructions: str | None = None) -> list[dict[str, str]]:
        """The chat messages for one observation (after the episode's earlier ``turns``); ``instructions`` replace
        the builder's for this prompt (a task with its own rules)."""
        rules = self.instructions if instructions is None else instructions
        return chat_messages(rules, observation, self._system_role, turns)

    def text(self, observation: Any, turns: Turns = (), instructions: str | None = None) -> str:
        """The whole prompt as text, ending where the answer starts."""
        if getattr(self.tokenizer, "chat_template", None):
            try:
                return self.tokenizer.apply_chat_template(
                    self.messages(observation, turns, instructions), tokenize=False, add_generation_prompt=True
                )
            except Exception:  # some templates (e.g. Gemma's) reject a system role: fold it into the user turn
                if not self._system_role:
                    raise
                self._system_role = False
                return self.text(observation, turns, instructions)
        rules = self.instructions if instructions is None else instructions
        parts = [f"{observation_text(o)}\n\nAnswer: {move}" for o, move in turns]
        body = "\n\n".join([*parts, f"{observation_text(observation)}\n\nAnswer: "])
        return f"{rules}\n\n{body}" if rules else body

    def encode(
        self,
        observations: Sequence[Any],
        turns: Sequence[Turns] | None = None,
        instructions: Sequence[str | None] | None = None,
    ) -> list[EncodedPrompt]:
        """Token ids of each prompt (each after its episode's earlier ``turns``, and with its own ``instructions``
        where given), and whether each starts with :attr:`prefix_ids` (a prompt with other rules does not)."""
        turns = turns if turns is not None else [()] * len(observations)
        rules = instructions if instructions is not None else [None] * len(observations)
        texts = [self.text(o, t, r) for o, t, r in zip(observations, turns, rules, strict=True)]
        batch = self.tokenizer(texts, add_special_tokens=False)["input_ids"]
        n = len(self.prefix_ids)
        return [EncodedPrompt(list(ids), n > 0 and ids[:n] == self.prefix_ids) for ids in batch]

    def _find_answer_end(self) -> list[int]:
        """The first token the chat template writes after an assistant answer (``<|im_end|>`` for ChatML), or EOS."""
        eos = [] if self.tokenizer.eos_token_id is None else [int(self.tokenizer.eos_token_id)]
        if not getattr(self.tokenizer, "chat_template", None):
            return eos
        sentinel = "\x01"
        try:
            text = self.tokenizer.apply_chat_template(
                [*self.messages("x"), {"role": "assistant", "content": sentinel}], tokenize=False
            )
        except Exception:
            return eos
        after = text[text.rfind(sentinel) + len(sentinel) :]
        ids = self.tokenizer(after, add_special_tokens=False)["input_ids"] if after.strip() else []
        special = set(getattr(self.tokenizer, "all_special_ids", []))
        return [int(ids[0])] if ids and ids[0] in special else eos

    def _find_prefix(self) -> list[int]:
        # The longest common token prefix of two prompts with different observations, less one token so that a
        # merge with the observation's first characters cannot hide in the last prefix token.
        a, b = (self.tokenizer(self.text(s), add_special_tokens=False)["input_ids"] for s in _SENTINELS)
        common = 0
        for x, y in zip(a, b, strict=False):
            if x != y:
                break
            common += 1
        return list(a[: max(common - 1, 0)])
