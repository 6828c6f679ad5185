"""A saved LoRA adapter's config is the same bytes whatever the process's string hashing (peft writes sets in hash
order), still loads with plain peft, and keeps the weights."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]

SAVE = """
import sys, torch
from pathlib import Path
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM
from llm_gym.lm.adapter_files import save_adapter
base = AutoModelForCausalLM.from_pretrained(sys.argv[1])
torch.manual_seed(0)
model = get_peft_model(base, LoraConfig(r=4, target_modules=sys.argv[3].split(","), task_type="CAUSAL_LM"))
save_adapter(model, Path(sys.argv[2]))
"""


def _save(model_dir: Path, out: Path, hash_seed: str) -> bytes:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    subprocess.run([sys.executable, "-c", SAVE, str(model_dir), str(out), ",".join(TARGETS)], env=env, check=True)
    return (out / "adapter_config.json").read_bytes()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm_gym.lm.testing import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny"))


def test_config_bytes_do_not_depend_on_string_hashing(tiny: Path, tmp_path: Path) -> None:
    # Two hash seeds under which peft's own writer lists the seven modules in different orders.
    first, second = _save(tiny, tmp_path / "a", "1"), _save(tiny, tmp_path / "b", "2")
    assert first == second
    assert json.loads(first)["target_modules"] == sorted(TARGETS)
    assert (tmp_path / "a" / "adapter_model.safetensors").read_bytes() == (
        tmp_path / "b" / "adapter_model.safetensors"
    ).read_bytes()


def test_saved_adapter_loads_with_plain_peft(tiny: Path, tmp_path: Path) -> None:
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM

    from llm_gym.lm.adapter_files import save_adapter

    torch.manual_seed(0)
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny), LoraConfig(r=4, target_modules=TARGETS, task_type="CAUSAL_LM")
    )
    with torch.no_grad():  # non-zero B matrices, so the loaded adapter changes the output
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_()
    save_adapter(model, tmp_path / "adapter")
    loaded = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny), str(tmp_path / "adapter"))
    assert loaded.peft_config["default"].target_modules == set(TARGETS)
    ids = torch.tensor([[5, 6, 7, 8]])
    model.eval()
    with torch.no_grad():
        assert torch.equal(model(ids).logits, loaded(ids).logits)
