"""``adapter_compute=auto``: on a bfloat16 model the LoRA products run in bfloat16 under autocast inside ppo_lora's
split forward (sft's and PPO's path), the LoRA weights and their gradients stay float32, plain peft is back outside
the forward, and the result differs from peft's float32 adapter by rounding only; reflection's LoRA trains and acts
the same way. Real peft, a tiny model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from sft_demos import sft_settings  # tests/agents/sft_demos.py

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.agents.sft.batches import Batches
from llm_gym.agents.sft.data import DemoEncoder
from llm_gym.demos.format import read_demos
from llm_gym.envs.catalog import EnvTraits
from llm_gym.lm.adapter_compute import AdapterCompute

KUHN = "OpenSpiel-kuhn_poker-v0"


def _model(tiny_model_dir: Path, demos: Path, mode: str, dtype: str = "bfloat16") -> tuple[ActorCritic, Batches, Any]:
    config = sft_settings(tiny_model_dir, demos, dtype=dtype, adapter_compute=mode, trainable_layers=2, value_coef=0.5)
    torch.manual_seed(0)
    ac = ActorCritic(config.as_ppo_lora(), EnvTraits.probe(EnvConfig(KUHN)).instructions)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():  # a trained adapter's B is not zero (peft's start): the adapter must change the output
        for name, parameter in ac.model.named_parameters():
            if "lora_B" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.05)
    records = read_demos(demos)
    data = Batches(ac, [DemoEncoder(ac.builder, True).encode(r, r.return_to_go) for r in records], batch_size=8)
    return ac, data, config


def _lora_b_output_dtypes(ac: Any) -> tuple[list[torch.dtype], list[Any]]:
    """Hooks that record the output dtype of every LoRA B matrix of ``ac.model``."""
    seen: list[torch.dtype] = []
    handles = [
        module.register_forward_hook(lambda _m, _i, out: seen.append(out.dtype))
        for name, module in ac.model.named_modules()
        if name.endswith("lora_B.default")
    ]
    return seen, handles


def _step(ac: ActorCritic, data: Batches, config: Any) -> tuple[float, list[torch.Tensor]]:
    ac.model.zero_grad(set_to_none=True)
    ac.value_head.zero_grad(set_to_none=True)
    losses = data.losses(ac, list(range(len(data))), config, train=True)
    losses["loss"].backward()
    return float(losses["loss"].detach()), [p.grad.clone() for p in ac.trainable_parameters()]


def test_lora_runs_in_the_base_dtype_and_plain_peft_is_back_outside(tiny_model_dir: Path, kuhn_demos: Path) -> None:
    ac, data, config = _model(tiny_model_dir, kuhn_demos, "auto")
    assert ac.split.dtype is torch.bfloat16 and ac.adapter_compute.active
    lora_layers = ac.adapter_compute.layers
    assert len(lora_layers) == 2 * len(config.lora_targets)  # every LoRA'd linear of the 2 trainable layers
    seen, handles = _lora_b_output_dtypes(ac)
    _, gradients = _step(ac, data, config)
    for handle in handles:
        handle.remove()
    assert seen and set(seen) == {torch.bfloat16}  # the adapter's output never went to float32
    # What the optimiser holds stays float32: the LoRA weights and their gradients.
    lora = [p for name, p in ac.model.named_parameters() if "lora_" in name]
    assert lora and {p.dtype for p in lora} == {torch.float32} and {g.dtype for g in gradients} == {torch.float32}
    assert all(getattr(layer, "cast_input_dtype_enabled", True) for layer in lora_layers)  # peft's cast is back

    with pytest.raises(RuntimeError, match="inside"), ac.adapter_compute():
        assert not any(layer.cast_input_dtype_enabled for layer in lora_layers)
        raise RuntimeError("inside")
    assert all(layer.cast_input_dtype_enabled for layer in lora_layers)  # restored after an error too

    plain, _, plain_config = _model(tiny_model_dir, kuhn_demos, "float32")
    assert not plain.adapter_compute.active
    seen, handles = _lora_b_output_dtypes(plain)
    _step(plain, data, plain_config)
    assert set(seen) == {torch.float32}  # peft's own way: the adapter in float32


def test_auto_differs_from_the_float32_adapter_by_rounding_only(tiny_model_dir: Path, kuhn_demos: Path) -> None:
    results = {}
    for mode in ("auto", "float32"):
        ac, data, config = _model(tiny_model_dir, kuhn_demos, mode)
        results[mode] = _step(ac, data, config)
    (loss_auto, grads_auto), (loss_32, grads_32) = results["auto"], results["float32"]
    assert loss_auto == pytest.approx(loss_32, rel=1e-2)
    flat_auto, flat_32 = torch.cat([g.flatten() for g in grads_auto]), torch.cat([g.flatten() for g in grads_32])
    assert float(torch.nn.functional.cosine_similarity(flat_auto, flat_32, dim=0)) > 0.999
    assert float((flat_auto - flat_32).norm() / flat_32.norm()) < 0.05


def test_rollout_and_update_compute_the_same_log_probs(tiny_model_dir: Path, kuhn_demos: Path) -> None:
    """PPO's first ratio is 1: the rollout (no gradients, cached prefix) and the update (gradients, the prefix
    recomputed) both run the adapter under autocast."""
    ac, data, _ = _model(tiny_model_dir, kuhn_demos, "auto")
    ac.refresh()  # the rollout prefix with this adapter
    index = list(range(8))
    batch = data._pack(ac, index)
    hidden = ac.bottom(batch)
    rollout, rollout_values = ac.top(hidden, batch, "rollout")
    update, update_values = ac.top(hidden, batch, "train")
    torch.testing.assert_close(update.seq_logprobs.detach(), rollout.seq_logprobs, rtol=0, atol=1e-6)
    torch.testing.assert_close(update_values.detach(), rollout_values, rtol=0, atol=1e-6)


def test_nothing_changes_on_a_float32_model_and_unknown_modes_are_refused(
    tiny_model_dir: Path, kuhn_demos: Path
) -> None:
    ac, _, _ = _model(tiny_model_dir, kuhn_demos, "auto", dtype="float32")
    assert not ac.adapter_compute.active  # float32 LoRA on a float32 model: nothing to save
    with pytest.raises(ValueError, match="adapter_compute must be auto or float32"):
        AdapterCompute(ac.model, torch.bfloat16, torch.device("cpu"), "bfloat16")  # type: ignore[arg-type]


def test_reflection_trains_and_acts_with_its_lora_in_the_base_dtype(tiny_model_dir: Path) -> None:
    """reflection (LoRA): ``train_answers`` and the backend it acts through run the adapter under autocast; with
    ``adapter_compute=float32`` both keep peft's float32 adapter, and the losses agree to rounding."""
    from llm_gym.agents.reflection.config import ReflectionConfig
    from llm_gym.agents.reflection.model import ReflectionModel
    from llm_gym.lm.backends import GenerateRequest, ScoreRequest
    from llm_gym.lm.finetune import Example, TrainSettings, train_answers

    settings = TrainSettings(epochs=2, batch_size=4, learning_rate=1e-2, weight_decay=0, max_grad_norm=1.0, seed=0)
    results = {}
    for mode in ("auto", "float32"):
        torch.manual_seed(0)
        config = ReflectionConfig(model=str(tiny_model_dir), dtype="bfloat16", threads=1, lora_rank=8,
                                  adapter_compute=mode, progress=False)  # fmt: skip
        model = ReflectionModel(config)
        assert model.adapter_compute.active == (mode == "auto")
        examples = [model.encode(Example("Play.", f"ball {i}", "UP" if i % 2 else "DOWN")) for i in range(8)]
        seen, handles = _lora_b_output_dtypes(model)
        losses = train_answers(model.model, examples, model.pad_id, settings, compute=model.adapter_compute)
        backend = model.backend()
        (scores,) = backend.score([ScoreRequest("Play.", "ball 3", ["UP", "DOWN"])])
        (completion,) = backend.generate([GenerateRequest("Play.", "ball 3")], max_new_tokens=3, temperature=0.0)
        for handle in handles:
            handle.remove()
        expected = torch.bfloat16 if mode == "auto" else torch.float32
        assert seen and set(seen) == {expected}  # training, scoring and sampling alike
        results[mode] = (losses, scores)
    (losses_auto, scores_auto), (losses_32, scores_32) = results["auto"], results["float32"]
    assert losses_auto == pytest.approx(losses_32, rel=2e-2)
    # The adapters were trained apart (each path's own rounding over 4 steps at lr 1e-2), so the scores agree loosely.
    assert scores_auto == pytest.approx(scores_32, abs=0.3)
