"""Images in the LM runtime: image+text chat models (the Idefics3 / SmolVLM family first) behind the same backend
interface as the text models.

* :mod:`llm_gym.lm.vision.models` — load an image+text model with its processor (whether a ``--model`` is one:
  :func:`llm_gym.lm.model_names.is_vision_model`);
* :mod:`llm_gym.lm.vision.prompts` — prompts with image placeholders, expanded by the model's processor;
* :mod:`llm_gym.lm.vision.forward` — the model seen as a decoder that merges image features on its first call, so
  the text runtime's packed scoring and batched sampling (:mod:`llm_gym.lm.forward`, :mod:`llm_gym.lm.generation`)
  run on it unchanged;
* :mod:`llm_gym.lm.vision.backend` — the ``hf-vision`` backend (score and generate);
* :mod:`llm_gym.lm.vision.testing` — a tiny random Idefics3 and a processor built locally, for tests.
"""
