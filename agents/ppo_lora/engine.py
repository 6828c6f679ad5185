"""Rollouts through vLLM (``--set rollout_backend=vllm``): a vLLM engine picks the actions of every rollout while
the training model (peft, in this process) keeps computing what the PPO update needs.

How the two stay in step:

* **The engine serves the latest adapter.** After every PPO update (and once before the first rollout) the trainer
  saves its adapter with ``save_pretrained`` into a fresh directory and hands it to the engine as a new
  ``LoRARequest`` with a new version (:meth:`RolloutEngine.sync`), as verl and ART do with LoRA. No rollout starts
  before that: the policy that picks the actions is never stale, not even by one update. A new version is also a
  new key for vLLM's adapter cache and prefix cache, so no KV block computed under an older adapter is reused.
  Why not a weight sync (TRL's ``update_named_param``): only the adapter changes (about 5 MB for the default
  model at rank 16 on 8 layers, against 540 MB of weights), the base weights stay frozen in the engine, and
  vLLM's in-process weight loading reaches into worker internals that differ between its GPU and CPU builds.
* **The PPO ratio is the trainer's own.** The engine only chooses the action; the training model's forward
  recomputes its log-probability (the ratio's denominator), the value and the reference log-probs on the same
  tokens (:func:`llm_gym.agents.ppo_lora.acting.act`), so the update is exactly the update of an ``hf`` rollout
  that happened to draw those actions. The engine's own log-probability of each action is kept and the largest
  gap per rollout is logged (``charts/engine_logprob_gap_max``): it measures numerical drift (float summation
  order, kernels), and a stale adapter would show up there at once.
* **A dead engine ends the run cleanly**: the rollout in progress is dropped, a checkpoint of the state before it
  is written, and the run stops with one line naming ``--resume`` (:class:`EngineStoppedError`).

The engine runs in child processes of its own (a script that trains with it needs an ``if __name__ ==
"__main__":`` guard; ``llm-gym`` has one) and is started once per run: minutes on a CPU, where vLLM compiles the
model at every start.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.errors import ConfigError, LLMGymError, MissingDependencyError
from llm_gym.lm.adapter_files import save_adapter
from llm_gym.lm.backends import Completion, GenerateRequest, ScoreRequest
from llm_gym.lm.backends.vllm_backend import INSTALL_HINT, EngineStoppedError, VLLMBackend, vllm_available

__all__ = ["EngineStoppedError", "RolloutEngine", "require_vllm"]

LORA_RANKS = (8, 16, 32, 64, 128, 256, 512)
"""The adapter ranks vLLM accepts as ``max_lora_rank``."""


class VLLMMissingError(MissingDependencyError):
    """``rollout_backend=vllm`` without vLLM installed."""

    def __init__(self) -> None:
        LLMGymError.__init__(self, f"rollout_backend=vllm needs vLLM: {INSTALL_HINT} (or leave rollout_backend=hf)")


def require_vllm() -> None:
    """Fail fast (before the model loads) when vLLM is missing, with what to install."""
    if not vllm_available():
        raise VLLMMissingError


class RolloutEngine:
    """A vLLM backend that serves the training model's current adapter.

    Args:
        backend: the engine (made with ``enable_lora=True`` and a ``max_lora_rank`` of at least the adapter's).
        owned: close the backend with :meth:`close` (False: the caller shares it, e.g. a test session's).
    """

    def __init__(self, backend: VLLMBackend, owned: bool = True) -> None:
        self.backend = backend
        self.owned = owned
        self.version = 0
        """The adapter version the engine serves now (0: none synced yet)."""
        self.syncs = 0
        """Adapters handed over so far (one per update, plus the first)."""
        self._workdir = Path(tempfile.mkdtemp(prefix="llm-gym-rollout-adapters-"))
        self._served: Path | None = None

    @classmethod
    def start(cls, config: PPOLoRAConfig) -> RolloutEngine:
        """An engine for ``config``'s model, dtype and LoRA shape (minutes on a CPU)."""
        require_vllm()
        if any(target in ("lm_head", "embed_tokens") for target in config.lora_targets):
            raise ConfigError(
                "rollout_backend=vllm serves adapters on the projection layers only (vLLM 0.32 fails on prompt "
                "log-probs with a LoRA on the head); drop lm_head/embed_tokens from lora_targets"
            )
        rank = next((r for r in LORA_RANKS if r >= config.lora_rank), None)
        if rank is None:
            raise ConfigError(f"rollout_backend=vllm takes lora_rank <= {LORA_RANKS[-1]}, got {config.lora_rank}")
        backend = VLLMBackend(
            config.model,
            dtype=config.dtype,
            score_with_end=config.score_with_end,
            kv_cache_gib=config.rollout_kv_cache_gib,
            gpu_memory_utilization=config.rollout_memory_share,
            enable_lora=True,
            max_lora_rank=rank,
            lora_targets=config.lora_targets,
            seed=config.seed,
        )
        return cls(backend, owned=True)

    def sync(self, ac: ActorCritic) -> int:
        """Serve ``ac``'s adapter from the next request on: saved into a fresh directory, handed over as a new
        version. Returns that version."""
        directory = self._workdir / f"update-{self.syncs}"
        save_adapter(ac.model, directory)  # the trained adapter alone, as a checkpoint holds it
        self.version = self.backend.set_adapter(str(directory))
        self.syncs += 1
        # The engine reads an adapter when the first request naming its version arrives, so the one served until
        # now can go, the new one must stay.
        if self._served is not None:
            shutil.rmtree(self._served, ignore_errors=True)
        self._served = directory
        return self.version

    # -- the backend interface, so acting treats the engine as any backend -------------------------------------

    name = "vllm"

    def score(self, requests: Sequence[ScoreRequest]) -> list[np.ndarray]:
        return self.backend.score(requests)

    def generate(
        self, requests: Sequence[GenerateRequest], *, max_new_tokens: int, temperature: float, seed: int | None = None
    ) -> list[Completion]:
        return self.backend.generate(requests, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)

    def close(self) -> None:
        """Stop the engine (when owned) and remove the adapter directories."""
        if self.owned:
            self.backend.close()
        else:
            self.backend.set_adapter(None)
        shutil.rmtree(self._workdir, ignore_errors=True)

    def __enter__(self) -> RolloutEngine:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
