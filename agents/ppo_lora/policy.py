"""Playing a ``ppo_lora`` checkpoint: the adapter merged into float32 base weights, acting through the LM runtime's
:class:`~llm_gym.lm.policy.LMPolicy`, so playing costs no more than the base model. On bfloat16 or float16 weights
the adapter stays beside them, run as training ran it (:class:`~llm_gym.lm.adapter_compute.AdapterCompute`): their
8-bit (or 11-bit) mantissa would round away much of a LoRA delta that is small against the weight. Either way a
bfloat16 forward is not training's to the bit, and a greedy policy with near-ties can pick other moves at a few
positions (issue 87's notes: two tic-tac-toe checkpoints' exact loss rates moved by up to 0.9 points between the
training evaluation and bfloat16 play, merged or not); float32 play is the faithful reference. (The live adapter acts
during training through :mod:`llm_gym.agents.ppo_lora.acting`.)

A run trained with ``--env-arg history=K`` acted on the episode's last K turns; its checkpoint plays the same way
(the policy asks ``play`` for envs with ``history=K`` through ``LMPolicy.env_kwargs``) unless the env given says
otherwise."""

from __future__ import annotations

from pathlib import Path

import torch
from peft import PeftModel

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.action_head import load_action_head
from llm_gym.agents.ppo_lora.calibration import load_action_bias
from llm_gym.agents.ppo_lora.checkpoint import adapter_dir
from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.model import VALUE_HEAD_FILE, resolve_device
from llm_gym.agents.ppo_lora.tokens import check_tokenizer_record
from llm_gym.agents.ppo_lora.value_head import ValueHead, load_value_head_file
from llm_gym.lm.adapter_compute import AdapterCompute
from llm_gym.lm.backends.hf import HFBackend
from llm_gym.lm.models import load_causal_lm
from llm_gym.lm.policy import LMPolicy
from llm_gym.lm.prompts import PromptBuilder
from llm_gym.lm.quantize import check_quantize, quantize_model
from llm_gym.lm.runtime import configure_threads, quiet_peft
from llm_gym.runs import played_history


def checkpoint_policy(config: PPOLoRAConfig, env: EnvConfig, checkpoint: Path | None) -> LMPolicy:
    """Greedy actions of a checkpoint's adapter merged into the base model (kept beside it on bfloat16 or float16
    weights; or of the base model without one), with the merged decoder's Linear layers int8 where
    ``config.quantize`` says so. With the checkpoint's value head, the policy reports a value estimate per score-mode
    decision (``act_with_details``, shown in the bench's trajectory viewer)."""
    configure_threads(config.threads)
    device = "cpu" if config.quantize == "int8" and config.device == "auto" else resolve_device(config.device)
    check_quantize(config.quantize, device=device, dtype=config.dtype)  # before the load: fail in no time
    dtype = "float32" if config.quantize == "int8" else config.dtype
    model, tokenizer = load_causal_lm(config.model, dtype=dtype, device=device)
    value_head, action_head, action_bias, compute = None, None, {}, None
    if checkpoint is not None:
        adapter = adapter_dir(Path(checkpoint))
        check_tokenizer_record(adapter, tokenizer, PromptBuilder(tokenizer, "").answer_end_ids)
        weights = next(model.parameters())
        with quiet_peft():
            model = PeftModel.from_pretrained(model, str(adapter))
        if weights.dtype == torch.float32:
            model = model.merge_and_unload()
        else:  # kept beside the low-precision weights (module docstring)
            compute = AdapterCompute(model, weights.dtype, weights.device, config.adapter_compute)
        model.eval()
        value_head = load_value_head(Path(checkpoint), model.config.hidden_size, device)
        action_head = load_action_head(Path(checkpoint), model.config.hidden_size, device)  # action_head=standardized
        action_bias = load_action_bias(Path(checkpoint))  # the run's calibrated prior over action names, if any
    model = quantize_model(model, config.quantize)  # after the merge: int8 of the trained weights
    backend = HFBackend.from_model(
        model,
        tokenizer,
        score_with_end=config.score_with_end,
        value_head=value_head,
        choice_head=action_head,
        compute=compute,
    )
    return LMPolicy(
        backend, env, mode=config.action_mode, greedy=True, max_new_tokens=config.max_new_tokens, seed=config.seed,
        history=played_history(env.kwargs, checkpoint), action_bias=action_bias,
    )  # fmt: skip


def load_value_head(checkpoint: Path, hidden_size: int, device: str) -> ValueHead | None:
    """The checkpoint's value head (float32, as training keeps it), or None where the checkpoint has none."""
    path = checkpoint / VALUE_HEAD_FILE
    return load_value_head_file(path, hidden_size, device) if path.is_file() else None
