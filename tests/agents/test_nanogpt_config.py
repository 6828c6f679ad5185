"""The nanogpt_ppo config: presets, overrides over presets, and the reference preset as the issue lists it."""

from __future__ import annotations

import pytest

from llm_gym.agents.nanogpt_ppo.config import PRESETS, NanoGPTPPOConfig
from llm_gym.config import apply_overrides, field_docs, from_dict, to_dict
from llm_gym.errors import ConfigError


def test_every_field_is_documented_and_every_preset_fills_every_open_field() -> None:
    config = NanoGPTPPOConfig()
    docs = field_docs(NanoGPTPPOConfig)
    open_fields = {name for name, value in to_dict(config).items() if value is None}
    assert set(to_dict(config)) <= set(docs)
    for name, values in PRESETS.items():
        assert set(values) == open_fields, name
        resolved = NanoGPTPPOConfig(preset=name).resolved()  # type: ignore[arg-type]
        assert all(v is not None for v in to_dict(resolved).values())


def test_reference_preset_is_the_original_setup() -> None:
    ref = NanoGPTPPOConfig(preset="reference").resolved()
    assert (ref.n_layer, ref.n_head, ref.n_embd) == (6, 6, 96)
    assert (ref.grid_rows, ref.grid_cols) == (24, 80)  # 24 lines of 80 + newline = 1944 tokens with the query
    assert (ref.num_envs * ref.num_steps, ref.minibatch_size, ref.update_epochs) == (1024, 64, 10)
    assert (ref.clip_coef, ref.value_clip_coef, ref.value_coef, ref.entropy_coef, ref.max_grad_norm) == (
        0.2,
        0.2,
        1.0,
        0.01,
        0.5,
    )
    assert (ref.learning_rate, ref.final_learning_rate, ref.adam_beta2, ref.gamma, ref.gae_lambda) == (
        1e-4,
        5e-5,
        0.95,
        0.99,
        0.95,
    )


def test_a_field_given_explicitly_overrides_the_preset_and_survives_a_preset_switch() -> None:
    config = apply_overrides(NanoGPTPPOConfig(), {"n_layer": "4", "learning_rate": "3e-4"})
    assert config.resolved().n_layer == 4 and config.resolved().n_embd == PRESETS["cpu"]["n_embd"]
    switched = apply_overrides(config, {"preset": "reference"})
    assert switched.resolved().n_layer == 4 and switched.resolved().learning_rate == 3e-4
    assert switched.resolved().n_embd == 96  # not given, so it follows the new preset
    # A saved config (None for what the preset fills) reads back to the same thing.
    assert from_dict(NanoGPTPPOConfig, to_dict(switched)) == switched


def test_default_is_the_cpu16_preset_which_is_cpu_with_16_envs_and_the_key_frequency_bias() -> None:
    config = NanoGPTPPOConfig()
    assert config.preset == "cpu16"
    assert config.rollout_size == 16 * PRESETS["cpu"]["num_steps"]
    assert NanoGPTPPOConfig(total_steps=config.rollout_size + 1).num_updates == 2
    differs = {k for k, v in PRESETS["cpu16"].items() if PRESETS["cpu"][k] != v}
    assert differs == {"num_envs", "key_frequency_bias"} and config.resolved().key_frequency_bias


def test_a_saved_config_keeps_its_preset_when_the_default_changes() -> None:
    """A run's config.json names its preset, so a run started on `cpu` resumes on `cpu` (8 envs, no bias)."""
    saved = to_dict(NanoGPTPPOConfig(preset="cpu"))
    assert saved["preset"] == "cpu" and saved["num_envs"] is None
    resumed = from_dict(NanoGPTPPOConfig, saved).resolved()
    assert resumed.num_envs == 8 and not resumed.key_frequency_bias


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [("preset", "gpu", "choose one of"), ("n_head", "0", "at least 1"), ("positons", "absolute", "did you mean")],
)
def test_bad_values_say_what_is_wrong(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        apply_overrides(NanoGPTPPOConfig(), {key: value})


def test_old_field_names_say_the_new_one_and_old_runs_still_load() -> None:
    with pytest.raises(ConfigError, match=r"^--set: 'lr' is now called 'learning_rate'; use learning_rate=3e-4$"):
        apply_overrides(NanoGPTPPOConfig(), {"lr": "3e-4"})
    old_run = {"rollout_steps": 16, "epochs": 2, "torch_threads": 1, "lr": 1e-3}
    config = from_dict(NanoGPTPPOConfig, old_run)
    assert (config.num_steps, config.update_epochs, config.threads, config.learning_rate) == (16, 2, 1, 1e-3)


def test_the_resolved_config_is_the_same_class_with_no_field_left_at_none() -> None:
    """resolved() fills the preset's fields into the config itself (no second class re-declaring them), so the
    training loop reads one set of fields: every one set, and resolving again changes nothing."""
    import dataclasses

    for preset in PRESETS:
        config = NanoGPTPPOConfig(preset=preset, n_layer=3)  # type: ignore[arg-type]
        settings = config.resolved()
        assert type(settings) is NanoGPTPPOConfig and settings.resolved() == settings
        assert all(getattr(settings, f.name) is not None for f in dataclasses.fields(settings))
        assert settings.n_layer == 3 and settings.learning_rate == PRESETS[preset]["learning_rate"]
