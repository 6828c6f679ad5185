"""A tiny ppo_lora run trained through the CLI, for the tests that play, export or quantize its checkpoint."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from llm_gym.cli import build_app


def train_tiny_breakout_run(root: Path) -> Path:
    """Train 8 env steps of ppo_lora on a tiny random model with LoRA on every layer; returns the run directory."""
    from llm_gym.lm.testing import make_tiny_model

    model = make_tiny_model(root / "model", layers=2, hidden=32)
    settings = dict(model=model, dtype="float32", threads=1, total_steps=8, num_envs=2, num_steps=4, minibatch_size=8,
                    trainable_layers=0, learning_rate=0.05, advantage="gae", eval_every=0, eval_episodes=0, progress=False)  # fmt: skip
    args = ["train", "--agent", "ppo_lora", "--env", "LLMBreakout-text-v0", "--run-dir", str(root / "run")]
    args += [a for k, v in settings.items() for a in ("--set", f"{k}={v}")]
    result = CliRunner().invoke(build_app(), args)
    assert result.exit_code == 0, result.output
    return root / "run"
