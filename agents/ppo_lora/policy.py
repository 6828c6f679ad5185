"""Playing a ``ppo_lora`` checkpoint: the adapter merged into the base weights, acting through the LM runtime's
:class:`~llm_gym.lm.policy.LMPolicy`, so playing costs no more than the base model. (The live adapter acts during
training through :mod:`llm_gym.agents.ppo_lora.acting`.)"""

from __future__ import annotations

from pathlib import Path

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.lm.policy import LMPolicy


def checkpoint_policy(config: PPOLoRAConfig, env: EnvConfig, checkpoint: Path | None) -> LMPolicy:
    """Greedy actions of a checkpoint's adapter merged into the base model (or of the base model without one)."""
    from llm_gym.agents.ppo_lora.checkpoint import adapter_dir
    from llm_gym.agents.ppo_lora.model import resolve_device
    from llm_gym.lm.backends.hf import HFBackend
    from llm_gym.lm.models import load_causal_lm
    from llm_gym.lm.runtime import configure_threads, quiet_peft

    configure_threads(config.threads)
    model, tokenizer = load_causal_lm(config.model, dtype=config.dtype, device=resolve_device(config.device))
    if checkpoint is not None:
        from peft import PeftModel

        with quiet_peft():
            model = PeftModel.from_pretrained(model, str(adapter_dir(Path(checkpoint)))).merge_and_unload()
        model.eval()
    backend = HFBackend.from_model(model, tokenizer, score_with_end=config.score_with_end)
    return LMPolicy(
        backend, env, mode=config.action_mode, greedy=True, max_new_tokens=config.max_new_tokens, seed=config.seed
    )
