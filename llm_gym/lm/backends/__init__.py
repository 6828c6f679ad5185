"""The LM backend interface: what an agent asks of a language model, whoever serves it.

A backend answers two kinds of batched requests:
* :meth:`LMBackend.score`: the log-likelihood of each choice (an action's text) as the model's whole answer to a
  prompt; a policy turns them into a categorical over the legal actions;
* :meth:`LMBackend.generate`: a sampled answer per prompt (up to ``max_new_tokens``), with its log-probability.

A prompt is the env's ``instructions``, the episode's earlier turns (none unless the agent asks for history) and
one observation; each backend renders it with
:func:`llm_gym.lm.prompts.chat_messages` (the ``hf`` backend through the model's chat template, the ``openai``
backend as chat messages). Backends are registered by name through the ``register_backends`` hook
(``llm_gym.lm.backends.plugin`` registers the built-in ones) and made with ``get_backend(name)(model, **options)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from llm_gym.plugins import get_backend


@dataclass(frozen=True)
class ScoreRequest:
    """Score ``choices`` as answers to one prompt."""

    instructions: str
    observation: Any
    choices: tuple[str, ...]
    turns: tuple[tuple[str, str], ...] = ()
    """Earlier (observation text, move) pairs of the episode, rendered as chat turns before ``observation``."""


@dataclass(frozen=True)
class GenerateRequest:
    """Sample one answer to one prompt."""

    instructions: str
    observation: Any
    turns: tuple[tuple[str, str], ...] = ()
    """Earlier (observation text, move) pairs of the episode, rendered as chat turns before ``observation``."""


@dataclass(frozen=True)
class Completion:
    """A sampled answer."""

    text: str
    """The answer, special tokens and the stop token removed."""
    logprob: float
    """Sum of the sampled tokens' log-probabilities (nan where the backend does not report them)."""
    num_tokens: int
    stopped: bool
    """True when the model ended the answer itself (False: cut at ``max_new_tokens``)."""
    token_ids: tuple[int, ...] = ()
    """The sampled token ids, the stop token included when one was sampled (empty where the backend does not
    report them: ``openai``). A trainer recomputes the answer's log-probs from them exactly."""


@runtime_checkable
class LMBackend(Protocol):
    """What every backend provides."""

    name: str

    def score(self, requests: Sequence[ScoreRequest]) -> list[np.ndarray]:
        """Per request, the log-likelihood of each choice (float64 array, one entry per choice)."""
        ...

    def generate(
        self, requests: Sequence[GenerateRequest], *, max_new_tokens: int, temperature: float, seed: int | None = None
    ) -> list[Completion]:
        """One completion per request (``temperature=0``: greedy)."""
        ...

    def close(self) -> None:
        """Free what the backend holds (models, connections)."""
        ...


def make_backend(name: str, model: str, **options: Any) -> LMBackend:
    """The backend ``name`` (``hf``, ``openai``, ``vllm`` or a plugin's) for ``model``."""
    return get_backend(name)(model, **options)


__all__ = ["Completion", "GenerateRequest", "LMBackend", "ScoreRequest", "make_backend"]
