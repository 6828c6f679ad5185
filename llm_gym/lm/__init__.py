"""The LM runtime: models, prompts, backends and the two batched action modes.

* :mod:`llm_gym.lm.cpu` — the CPU (name, cores, whether it runs the model in bfloat16), without torch;
* :mod:`llm_gym.lm.model_names` — what a ``--model`` name means (aliases, the local cache, the download policy);
* :mod:`llm_gym.lm.models` — ``--model`` names to loaded models (the default converted once into a local cache:
  :mod:`llm_gym.lm.gguf_conversion`);
* :mod:`llm_gym.lm.prompts` — the one place prompts are built (env instructions + observation, chat template);
* :mod:`llm_gym.lm.packing`, :mod:`llm_gym.lm.forward` — score many continuations of many prompts in one forward
  pass over the cached shared prefix;
* :mod:`llm_gym.lm.split` — the same forward cut at a layer, for training the top layers cheaply;
* :mod:`llm_gym.lm.generation` — batched sampling with recorded log-probs;
* :mod:`llm_gym.lm.backends` — the backend interface and the ``hf`` / ``openai`` / ``vllm`` backends;
* :mod:`llm_gym.lm.policy` — :class:`~llm_gym.lm.policy.LMPolicy`, a batched policy on any backend.

Heavy modules (torch, transformers) load only when used: ``load_causal_lm`` is in :mod:`llm_gym.lm.models`, not
here, so ``import llm_gym.lm`` stays light.
"""

from llm_gym.lm.backends import Completion, GenerateRequest, LMBackend, ScoreRequest, make_backend
from llm_gym.lm.model_names import DEFAULT_MODEL, MODEL_ALIASES, ModelNotFoundError, model_cache_dir, resolve_model
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
    "make_backend",
    "model_cache_dir",
    "observation_text",
    "resolve_model",
]
