"""Acting with a ``ppo_lora`` model: during training (the live adapter, for the periodic greedy evaluation) and from
a checkpoint (adapter merged into the base weights, so playing costs no more than the base model)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.lm.backends import Completion, GenerateRequest, ScoreRequest
from llm_gym.lm.generation import generate, stop_token_ids
from llm_gym.lm.policy import LMPolicy


class ActorCriticBackend:
    """The LM backend interface over a live :class:`ActorCritic` (its current adapter, its cached prefixes)."""

    name = "ppo_lora"

    def __init__(self, ac: ActorCritic, batch_size: int = 32) -> None:
        self.ac, self.batch_size = ac, batch_size
        self._generator = torch.Generator()

    def _check(self, requests: Sequence[ScoreRequest | GenerateRequest]) -> None:
        if any(r.instructions != self.ac.builder.instructions for r in requests):
            raise ValueError("this model was built for one env's instructions; a request carried others")

    def score(self, requests: Sequence[ScoreRequest]) -> list[np.ndarray]:
        self._check(requests)
        results: list[np.ndarray] = []
        for start in range(0, len(requests), self.batch_size):
            chunk = requests[start : start + self.batch_size]
            prompts = self.ac.encode([r.observation for r in chunk])
            continuations = [self.ac.choices(r.choices) for r in chunk]
            batch = self.ac.pack([p.ids for p in prompts], [p.uses_prefix for p in prompts], continuations)
            out, _ = self.ac.top(self.ac.bottom(batch), batch, "rollout")
            values = out.seq_logprobs.double().cpu().numpy()
            offset = 0
            for row in continuations:
                results.append(values[offset : offset + len(row)])
                offset += len(row)
        return results

    def generate(
        self, requests: Sequence[GenerateRequest], *, max_new_tokens: int, temperature: float, seed: int | None = None
    ) -> list[Completion]:
        self._check(requests)
        if seed is not None:
            self._generator.manual_seed(seed)
        stop = stop_token_ids(self.ac.tokenizer, self.ac.model)
        results = []
        for start in range(0, len(requests), self.batch_size):
            chunk = requests[start : start + self.batch_size]
            generations = generate(
                self.ac.model,
                self.ac.encode([r.observation for r in chunk]),
                self.ac.full_prefix(),
                max_new_tokens=max_new_tokens,
                stop_ids=stop,
                pad_id=self.ac.pad_id,
                temperature=temperature,
                generator=self._generator,
            )
            for g in generations:
                text = self.ac.tokenizer.decode(g.tokens, skip_special_tokens=True)
                results.append(Completion(text, float(sum(g.logprobs)), len(g.tokens), g.stopped))
        return results

    def close(self) -> None:
        pass


def live_policy(ac: ActorCritic, env: EnvConfig, config: PPOLoRAConfig) -> LMPolicy:
    """Greedy actions of the adapter being trained (the periodic evaluation)."""
    return LMPolicy(
        ActorCriticBackend(ac),
        env,
        mode=config.action_mode,
        greedy=True,
        max_new_tokens=config.max_new_tokens,
        seed=config.seed,
    )


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
