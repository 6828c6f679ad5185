"""Config dataclasses: docstrings as help, --set / --config overrides with errors that name the valid keys."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pytest

from llm_gym.agent import AgentConfig
from llm_gym.config import apply_overrides, config_table, field_docs, load_config_file, parse_assignments, to_dict
from llm_gym.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class DemoConfig(AgentConfig):
    lr: float = 1e-3
    """Learning rate."""
    layers: tuple[int, ...] = (64, 64)
    """Hidden sizes."""
    mode: Literal["score", "generate"] = "score"
    """How actions are chosen."""
    model: str | None = None
    """Model id or path."""
    greedy: bool = False
    """Argmax instead of sampling."""


def test_field_docs_include_the_base_class() -> None:
    docs = field_docs(DemoConfig)
    assert docs["lr"] == "Learning rate."
    assert docs["total_steps"].startswith("Environment steps")
    assert [row[0] for row in config_table(DemoConfig)][:2] == ["total_steps", "seed"]


def test_overrides_convert_types() -> None:
    config = apply_overrides(
        DemoConfig(),
        {"lr": "3e-4", "layers": "32,16", "mode": "generate", "model": "none", "greedy": "yes", "total_steps": "1e4"},
    )
    assert (config.lr, config.layers, config.mode, config.model, config.greedy, config.total_steps) == (
        3e-4,
        (32, 16),
        "generate",
        None,
        True,
        10_000,
    )


def test_unknown_key_names_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown key 'lrr'.*did you mean lr\?.*Valid keys: total_steps, seed, tracker, lr"):
        apply_overrides(DemoConfig(), {"lrr": "1"})


@pytest.mark.parametrize(("key", "value"), [("lr", "fast"), ("mode", "beam"), ("greedy", "maybe"), ("seed", "1.5")])
def test_bad_values_name_the_type(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"{key}={value!r} is not a valid"):
        apply_overrides(DemoConfig(), {key: value})


def test_post_init_validation_becomes_a_config_error() -> None:
    with pytest.raises(ConfigError, match="total_steps must be >= 0"):
        apply_overrides(DemoConfig(), {"total_steps": "-1"})


def test_assignments_and_files(tmp_path) -> None:
    assert parse_assignments(["a=1", "b = x=y"]) == {"a": "1", "b": "x=y"}
    with pytest.raises(ConfigError, match="expects key=value"):
        parse_assignments(["oops"])
    toml = tmp_path / "c.toml"
    toml.write_text('lr = 0.5\nlayers = [8, 8]\nmode = "generate"\n')
    config = apply_overrides(DemoConfig(), load_config_file(toml))
    assert (config.lr, config.layers, config.mode) == (0.5, (8, 8), "generate")
    assert to_dict(config)["layers"] == [8, 8]
    with pytest.raises(ConfigError, match="does not exist"):
        load_config_file(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("lr = = 1")
    with pytest.raises(ConfigError, match="cannot read"):
        load_config_file(bad)
