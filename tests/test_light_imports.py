"""The light paths stay light: ``import llm_gym`` (env registration) and the CLI's listings load none of the heavy
optional packages; those wait for the code that loads a model, trains or renders (issue 85: imports inside functions
only for optional heavy dependencies, the heavy ones at the top of modules that only load where they run)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import get_args, get_type_hints

import pytest

HEAVY = ("torch", "transformers", "peft", "gguf", "safetensors", "scipy", "matplotlib", "vllm", "ray", "tensorboard")

LOADED = """
import json, sys
HEAVY = {heavy!r}
{code}
print(json.dumps(sorted(name for name in HEAVY if name in sys.modules)))
"""

LISTING = """
from llm_gym.cli import main
sys.argv = ["llm-gym", *{argv!r}]
try:
    main()
except SystemExit:
    pass
"""


def heavy_loaded(code: str) -> list[str]:
    """The heavy packages a fresh interpreter has imported after running ``code``."""
    script = LOADED.format(heavy=HEAVY, code=code)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_import_llm_gym_and_make_a_text_env_load_nothing_heavy() -> None:
    code = "import gymnasium as gym, llm_gym\nenv = gym.make('LLMBreakout-text-v0')\nenv.reset(seed=0)\nenv.close()"
    assert heavy_loaded(code) == []


@pytest.mark.parametrize("argv", [["--help"], ["envs"], ["agents"]])
def test_cli_listings_load_nothing_heavy(argv: list[str]) -> None:
    assert heavy_loaded(LISTING.format(argv=argv)) == []


def test_ppo_lora_config_names_the_group_estimators_as_llm_gym_rl_does() -> None:
    """ppo_lora's config (loaded with every CLI run) spells the estimators out rather than import llm_gym.rl, whose
    package loads torch: the two lists must stay the same."""
    from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
    from llm_gym.rl.advantages import ESTIMATORS, GROUP_ESTIMATORS

    assert get_args(get_type_hints(PPOLoRAConfig)["advantage"]) == ESTIMATORS
    for estimator in ESTIMATORS:
        config = PPOLoRAConfig(advantage=estimator, policy_loss="auto" if estimator == "exact" else "clip")
        assert config.uses_groups == (estimator in GROUP_ESTIMATORS)
        assert config.has_value_head == (estimator == "gae")
