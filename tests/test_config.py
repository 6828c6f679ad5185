"""Config dataclasses: docstrings as help, --set / --config overrides with errors that name the valid keys."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Literal

import pytest

from llm_gym.agent import AgentConfig
from llm_gym.config import (
    apply_overrides,
    config_table,
    field_docs,
    from_dict,
    load_config_file,
    parse_assignments,
    to_dict,
)
from llm_gym.config_checks import in_range
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
    with pytest.raises(
        ConfigError, match=r"unknown key 'lrr'.*did you mean lr\?.*Valid keys: total_steps, seed, tracker, lr"
    ):
        apply_overrides(DemoConfig(), {"lrr": "1"})


@pytest.mark.parametrize(("key", "value"), [("lr", "fast"), ("mode", "beam"), ("greedy", "maybe"), ("seed", "1.5")])
def test_bad_values_name_the_type(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"{key}={value!r} is not a valid"):
        apply_overrides(DemoConfig(), {key: value})


def test_post_init_validation_becomes_a_config_error() -> None:
    with pytest.raises(ConfigError, match="seed must be >= 0"):
        apply_overrides(DemoConfig(), {"seed": "-1"})


@dataclass(frozen=True, kw_only=True)
class RangedConfig(AgentConfig):
    learning_rate: float = 1e-3
    """Learning rate (a conventional name: > 0)."""
    gamma: float = dataclasses.field(default=2.2, metadata=in_range(above=0))
    """Not a discount here: a gamma correction, declared > 0, so the [0, 1] convention does not apply."""
    mix: tuple[float, ...] = (0.5, 0.5)
    """No range, but finite."""


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        ({"learning_rate": "inf"}, "learning_rate=inf is not a finite number"),
        ({"learning_rate": "0"}, "learning_rate=0 must be > 0"),
        ({"gamma": "-1"}, "gamma=-1 must be > 0"),
        ({"mix": "0.5,nan"}, "mix=(0.5, nan) is not a finite number"),
        ({"total_steps": "-3"}, "total_steps=-3 must be >= 0"),
    ],
)
def test_numbers_are_finite_and_in_range_when_a_config_is_built(overrides: dict, said: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(said)):
        apply_overrides(RangedConfig(), overrides)
    assert apply_overrides(RangedConfig(), {"gamma": "5", "mix": "1e300,0"}).gamma == 5.0  # declared range wins
    with pytest.raises(ConfigError, match=re.escape("config: learning_rate=inf is not a finite number")):
        from_dict(RangedConfig, {"learning_rate": float("inf")})  # a config.json that holds Infinity


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
