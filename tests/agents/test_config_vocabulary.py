"""One vocabulary, declared once (issue 85): the learners' shared fields come from the blocks of
llm_gym/training/config.py, each knob has one name across agents, and the old names still load (real configs, the
real CLI, a real run directory)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llm_gym.cli import build_app
from llm_gym.config import apply_overrides, field_docs, field_effect, from_dict, to_dict
from llm_gym.errors import ConfigError
from llm_gym.lm.agent_config import LoRAConfig
from llm_gym.plugins import agents, get_agent
from llm_gym.runs import Run
from llm_gym.training.checkpoints import checkpoint_config
from llm_gym.training.config import OptimizerConfig, PPOConfig, ScheduleConfig

BLOCKS = {
    "ppo_lora": (PPOConfig, ScheduleConfig, LoRAConfig),
    "nanogpt_ppo": (PPOConfig,),
    "sb3_ppo": (PPOConfig,),
    "sft": (ScheduleConfig, LoRAConfig),
}
"""Each agent config and the shared blocks it inherits."""

RENAMED = {
    "sft": {"warmup_steps": "warmup_updates", "batch_size": "minibatch_size"},
    "reflection": {"epochs": "update_epochs", "train_batch_size": "minibatch_size"},
}
"""The names this change retired, per agent: each is another agent's name for the same knob."""


def own_documented_fields(cls: type) -> set[str]:
    """The fields ``cls``'s own class body declares with a docstring under them (what 'declaring' a field means
    here; a one-line redeclaration gives another default only)."""
    body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body  # type: ignore[attr-defined]
    return {
        node.target.id
        for node, following in zip(body, body[1:], strict=False)
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
        and isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
    }  # fmt: skip


@pytest.mark.parametrize("agent", sorted(BLOCKS))
def test_the_shared_fields_are_declared_once_in_their_block(agent: str) -> None:
    config_cls = get_agent(agent).Config
    for block in BLOCKS[agent]:
        assert issubclass(config_cls, block)
        shared = {f.name for f in dataclasses.fields(block)} - {f.name for f in dataclasses.fields(block.__base__)}
        if block is not LoRAConfig:
            shared |= {f.name for f in dataclasses.fields(OptimizerConfig)} - {"total_steps", "seed", "tracker"}
        assert shared
        # The docstring (the help text) and the marker are the block's; the agent's body documents none of them.
        assert not shared & own_documented_fields(config_cls), agent
        for name in shared:
            assert field_docs(config_cls)[name] == field_docs(block)[name], (agent, name)
            assert field_effect(config_cls, name) == field_effect(block, name), (agent, name)
            assert field_effect(block, name) == "training" or block is LoRAConfig, (agent, name)


def test_ppo_lora_keeps_every_field_and_default_it_had() -> None:
    """ppo_lora's names and defaults are the blocks' own: its fields and values are those it declared itself."""
    config = get_agent("ppo_lora").Config()
    expected = dict(num_envs=8, num_steps=32, update_epochs=2, minibatch_size=64, gamma=0.99, gae_lambda=0.95,
                    clip_coef=0.2, value_clip_coef=0.2, value_coef=0.5, entropy_coef=0.01, target_kl=0.0,
                    max_grad_norm=1.0, learning_rate=None, warmup_updates=1, min_lr_ratio=0.1, weight_decay=0.0)  # fmt: skip
    assert {k: getattr(config, k) for k in expected} == expected


def test_sb3_keeps_sb3s_defaults_under_the_shared_names() -> None:
    config = get_agent("sb3_ppo").Config()
    assert (config.learning_rate, config.num_steps, config.minibatch_size, config.update_epochs) == (
        2.5e-4,
        128,
        256,
        4,
    )
    assert (config.clip_coef, config.value_clip_coef, config.value_coef, config.max_grad_norm) == (0.1, 0.0, 0.5, 0.5)


def test_one_name_per_knob_across_agents() -> None:
    fields = {name: {f.name for f in dataclasses.fields(cls.Config)} for name, cls in agents().items()}
    for agent, renamed in RENAMED.items():
        assert dict(get_agent(agent).Config.renamed) == renamed
        assert not set(renamed) & fields[agent], agent
    for retired in ("warmup_steps", "train_batch_size"):
        assert not [agent for agent, names in fields.items() if retired in names], retired
    # batch_size stays only where it is another knob: the most prompts per forward pass when playing (speed only).
    assert {agent for agent, names in fields.items() if "batch_size" in names} == {"lm", "reflection"}
    assert {field_effect(get_agent(a).Config, "batch_size") for a in ("lm", "reflection")} == {"speed"}
    assert {a for a, names in fields.items() if "minibatch_size" in names} >= {"ppo_lora", "nanogpt_ppo", "sb3_ppo",
                                                                               "sft", "reflection"}  # fmt: skip


@pytest.mark.parametrize(("agent", "old", "new"), [(a, o, n) for a, r in RENAMED.items() for o, n in r.items()])
def test_an_old_name_loads_as_the_new_one(agent: str, old: str, new: str) -> None:
    config_cls = get_agent(agent).Config
    # A saved config (a run's config.json) reads it silently, to the same value.
    assert getattr(from_dict(config_cls, {old: 7}), new) == 7
    # --set (and a preset or --config file) says the new name in one line.
    with pytest.raises(ConfigError, match=rf"^--set: '{old}' is now called '{new}'; use {new}=7$"):
        apply_overrides(config_cls(), {old: "7"})


def test_an_sft_run_saved_before_the_renames_loads_with_its_values(tmp_path: Path) -> None:
    """The config.json of an sft run trained under the old names (as leaderboard entries' runs were) loads, with
    every value where it was: how bench and `play --checkpoint` read it."""
    saved = to_dict(get_agent("sft").Config(minibatch_size=64, warmup_updates=3, epochs=2, demos="d.jsonl"))
    saved["batch_size"], saved["warmup_steps"] = saved.pop("minibatch_size"), saved.pop("warmup_updates")
    Run.create("OpenSpiel-tic_tac_toe-v0", "sft", saved, path=tmp_path / "run").close()
    assert "batch_size" in json.loads((tmp_path / "run" / "config.json").read_text())["config"]
    _, config = checkpoint_config(Run.open(tmp_path / "run"))
    assert (config.minibatch_size, config.warmup_updates, config.epochs, config.demos) == (64, 3, 2, "d.jsonl")


@pytest.mark.parametrize("agent", ["ppo_lora", "nanogpt_ppo", "sb3_ppo", "sft", "reflection"])
def test_the_help_shows_one_name_per_knob(agent: str) -> None:
    result = CliRunner().invoke(build_app(), ["agents", agent, "--all", "--json"])
    assert result.exit_code == 0, result.output
    keys = [row["key"] for row in json.loads(result.output)["fields"]]
    assert len(keys) == len(set(keys))
    assert not set(keys) & set(get_agent(agent).Config.renamed)
