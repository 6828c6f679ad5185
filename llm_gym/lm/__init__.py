"""The LM runtime: models, prompts, backends and the two batched action modes.

* :mod:`llm_gym.lm.models` — ``--model`` names to loaded models (the default converted once into a local cache);
* :mod:`llm_gym.lm.prompts` — the one place prompts are built (env instructions + observation, chat template);
* :mod:`llm_gym.lm.packing`, :mod:`llm_gym.lm.forward` — score many continuations of many prompts in one forward
  pass over the cached shared prefix;
* :mod:`llm_gym.lm.split` — the same forward cut at a layer, for training the top layers cheaply;
* :mod:`llm_gym.lm.generation` — batched sampling with recorded log-probs;
* :mod:`llm_gym.lm.backends` — the backend interface and the ``hf`` / ``openai`` / ``vllm`` backends;
* :mod:`llm_gym.lm.policy` — :class:`~llm_gym.lm.policy.LMPolicy`, a batched policy on any backend.

Heavy modules (torch, transformers) load only when used.
"""

from llm_gym.lm.backends import Completion, GenerateRequest, LMBackend, ScoreRequest, make_backend
from llm_gym.lm.models import (
    DEFAULT_MODEL,
    MODEL_ALIASES,
    ModelNotFoundError,
    load_causal_lm,
    model_cache_dir,
    resolve_model,
)
from llm_gym.lm.prompts import PromptBuilder, chat_messages, observation_text

__all__ = [
    "DEFAULT_MODEL",
    "MODEL_ALIASES",
    "Completion",
    "GenerateRequest",
    "LMBackend",
    "ModelNotFoundError",
    "PromptBuilder",
    "ScoreRequest",
    "chat_messages",
    "load_causal_lm",
    "make_backend",
    "model_cache_dir",
    "observation_text",
    "resolve_model",
]
