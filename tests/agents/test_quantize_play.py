"""``--set quantize=int8`` through the agents: the zero-shot ``lm`` agent and a ppo_lora checkpoint (its adapter
merged, then int8) play with it; training, the reflection agent and non-hf backends refuse it in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from ppo_lora_runs import train_tiny_breakout_run  # tests/agents/ppo_lora_runs.py
from typer.testing import CliRunner

from llm_gym.cli import build_app

runner = CliRunner()


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_tiny_breakout_run(tmp_path_factory.mktemp("int8-play"))


def play(*args: str) -> object:
    return runner.invoke(build_app(), ["play", "--episodes", "1", "--max-steps", "6", "--json", *args])


def test_a_ppo_lora_checkpoint_plays_merged_then_int8(trained_run: Path) -> None:
    from llm_gym.agent import EnvConfig
    from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
    from llm_gym.agents.ppo_lora.policy import checkpoint_policy
    from llm_gym.config import from_dict
    from llm_gym.lm.quantize import quantized_linear_count
    from llm_gym.runs import Run

    run, checkpoint = Run.resolve_checkpoint(trained_run)
    config = from_dict(PPOLoRAConfig, {**run.read_config()["config"], "quantize": "int8"})
    policy = checkpoint_policy(config, EnvConfig("LLMBreakout-text-v0"), checkpoint)
    assert quantized_linear_count(policy.backend.model) == 2 * 7
    assert policy.backend.value_head is not None, "the checkpoint's value head still reports values"
    result = play("--checkpoint", str(trained_run), "--set", "quantize=int8")
    assert result.exit_code == 0, result.output
    on_gpu = play("--checkpoint", str(trained_run), "--set", "quantize=int8", "--set", "device=cuda")
    assert on_gpu.exit_code == 2 and "quantize=int8 runs on the CPU only" in on_gpu.output, on_gpu.output


def test_training_with_int8_is_refused_in_one_line(trained_run: Path) -> None:
    model = trained_run.parent / "model"
    args = ["train", "--agent", "ppo_lora", "--env", "LLMBreakout-text-v0", "--run-dir", str(trained_run.parent / "x")]
    args += ["--set", f"model={model}", "--set", "quantize=int8", "--set", "total_steps=4"]
    result = runner.invoke(build_app(), args)
    assert result.exit_code == 2
    assert "training the adapter stays float: use quantize=none" in result.output


def test_the_lm_agent_plays_with_int8_and_refuses_it_elsewhere(trained_run: Path) -> None:
    model = str(trained_run.parent / "model")
    ok = play("--agent", "lm", "--env", "OpenSpiel-tic_tac_toe-v0", "--model", model, "--set", "quantize=int8")
    assert ok.exit_code == 0, ok.output
    mistakes = {
        ("--set", "quantize=int9"): "choose one of none, int8",
        ("--set", "quantize=int8", "--set", "backend=openai"): "quantize=int8 is an hf backend option",
        ("--set", "quantize=int8", "--set", "dtype=bfloat16"): "use dtype=float32 or auto",
    }
    for extra, message in mistakes.items():
        result = play("--agent", "lm", "--env", "LLMBreakout-text-v0", "--model", model, *extra)
        assert result.exit_code == 2 and message in result.output, result.output


def test_reflection_refuses_int8(trained_run: Path) -> None:
    from llm_gym.agents.reflection.config import ReflectionConfig
    from llm_gym.agents.reflection.model import ReflectionModel
    from llm_gym.errors import ConfigError

    config = ReflectionConfig(model=str(trained_run.parent / "model"), quantize="int8")
    with pytest.raises(ConfigError, match="reflection runs its model in float"):
        ReflectionModel(config)


def test_lm_episodes_stored_before_quantize_existed_keep_their_identity_at_none() -> None:
    import dataclasses

    from llm_gym.bench.entries import keep_stored_identity, resolve_entry
    from llm_gym.bench.suite import SuiteEntry

    plain = resolve_entry(SuiteEntry(name="lm", agent="lm"))
    before = {k: v for k, v in dataclasses.asdict(plain.config).items() if k != "quantize"}
    old_hash = dataclasses.replace(plain, saved_fields=frozenset(before)).entry_hash
    stored = {("lm", old_hash): {"agent": "lm", "config": before}}
    assert keep_stored_identity(plain, stored).entry_hash == old_hash
    int8 = resolve_entry(SuiteEntry(name="lm", agent="lm", settings={"quantize": "int8"}))
    assert keep_stored_identity(int8, stored).entry_hash != old_hash, "int8 episodes are another policy's"
