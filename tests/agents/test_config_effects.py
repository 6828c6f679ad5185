"""What each agent config field affects (``training_only`` / ``speed_only`` / unmarked = play), checked for every
registered agent: the markers agree with ``fixed_on_resume`` and across agents, and the policy each agent builds
plays the same actions with every training-only field set to another value (and with every speed-only field changed,
the same actions at the same probabilities up to float rounding). Real agents, real envs, tiny random models."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from llm_gym.agent import AgentConfig, EnvConfig, act_with_details
from llm_gym.config import apply_overrides, field_effect, fields_with_effect, nested_agent_fields, training_only
from llm_gym.plugins import agents

TTT = "OpenSpiel-tic_tac_toe-v0"

SAME_NAME_OTHER_EFFECT = {
    "temperature": "lm: sampling temperature of play; reflection: of the trial only (its policy plays greedily)",
    "lora_targets": "ppo_lora, sft: fixed by the checkpoint; reflection: the shape of a fresh adapter only",
}
"""Field names that mean different things in different agents, and why (every other name has one effect)."""


def test_every_field_of_every_agent_has_one_consistent_effect() -> None:
    effects: dict[str, dict[str, str]] = {}
    for name, agent_cls in agents().items():
        config_cls = agent_cls.Config
        names = [f.name for f in dataclasses.fields(config_cls)]
        assert set(agent_cls.fixed_on_resume) <= set(names), f"{name}: fixed_on_resume names a field it lacks"
        speed = fields_with_effect(config_cls, "speed")
        assert not speed & set(agent_cls.fixed_on_resume), f"{name}: a checkpoint cannot hold a speed-only field"
        assert field_effect(config_cls, "total_steps") == "training", f"{name}: total_steps lost its marker"
        assert field_effect(config_cls, "seed") == "play", name
        for field in names:
            effects.setdefault(field, {})[name] = field_effect(config_cls, field)
    mixed = {field: by_agent for field, by_agent in effects.items() if len(set(by_agent.values())) > 1}
    assert set(mixed) == set(SAME_NAME_OTHER_EFFECT), mixed


def test_a_subclass_that_redeclares_a_field_keeps_its_marker() -> None:
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Base(AgentConfig):
        rate: float = training_only(0.1)
        """A rate."""

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Child(Base):
        total_steps: int = 5
        """Another default."""
        rate: float = 0.2
        """Another default."""

    assert field_effect(Child, "total_steps") == field_effect(Child, "rate") == "training"
    assert Child().rate == 0.2 and Child().total_steps == 5
    assert fields_with_effect(Child, "play") == {"seed"}


# -- the policy path does not read training-only fields ----------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm_gym.lm.testing import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("effects") / "model", layers=2, hidden=32)


LM = {"dtype": "float32", "threads": 1}
RECIPES: dict[str, Callable[[Path], tuple[str, dict[str, Any]]]] = {
    # agent -> (env id, the base config's settings) for a fresh policy that is cheap to build here
    "random": lambda model: (TTT, {}),
    "scripted": lambda model: ("LLMBreakout-text-v0", {}),
    "constant": lambda model: ("LLMBreakout-text-v0", {"action": "LEFT"}),
    "mcts": lambda model: (TTT, {"simulations": 4}),
    "solver": lambda model: (TTT, {}),
    "best_response": lambda model: ("OpenSpiel-kuhn_poker-v0", {}),
    "lm": lambda model: (TTT, {"model": str(model), **LM}),
    "ppo_lora": lambda model: (TTT, {"model": str(model), **LM}),
    "sft": lambda model: (TTT, {"model": str(model), **LM}),
    "reflection": lambda model: (TTT, {"model": str(model), **LM}),
    "curriculum": lambda model: (TTT, {"base_config": {"model": str(model), **LM}}),
    "nanogpt_ppo": lambda model: ("LLMBreakout-ascii-v0", {"threads": 1}),
    "sb3_ppo": lambda model: ("LLMBreakout-text-v0", {}),
}


def test_every_registered_agent_has_a_recipe() -> None:
    assert set(agents()) <= set(RECIPES), "add the new agent to RECIPES so its markers are checked against its policy"


def other_value(config: Any, name: str) -> list[Any]:
    """Valid-looking values of field ``name`` other than its current one, most different first."""
    value = getattr(config, name)
    annotation = typing.get_type_hints(type(config))[name]
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is typing.Literal:
        return [choice for choice in args if choice != value]
    if value is None and args:
        annotation = args[0]
    kind = annotation if isinstance(annotation, type) else type(value)
    if kind is bool:
        return [not value]
    if kind is int:
        return [(value or 1) * 2 + 1, 1]
    if kind is float:
        return [(value or 1.0) * 0.5, 0.75]
    if kind is str:
        return [f"{value}-other" if value else "not-used-in-play"]
    if isinstance(value, tuple) and value:
        return [value[:1]]
    if value == () and args and typing.get_origin(args[0]) is dict:  # an empty tuple of dicts (episode_options)
        return [({},)]
    return []


def varied(config: Any, effect: str, only: set[str] | None = None) -> tuple[Any, list[str]]:
    """``config`` with every field of ``effect`` (or of ``only``) set to another value it accepts, and the fields
    that changed."""
    changed: list[str] = []
    for name in sorted(only if only is not None else fields_with_effect(type(config), effect)):
        for candidate in other_value(config, name):
            try:
                config = dataclasses.replace(config, **{name: candidate})
            except (TypeError, ValueError):
                continue
            changed.append(name)
            break
    return config, changed


def decisions(agent_name: str, config: Any, env: EnvConfig, steps: int = 6) -> list[tuple[Any, list[float]]]:
    """The actions and probabilities of a fresh policy over the first ``steps`` decisions of two seeded episodes."""
    from llm_gym.plugins import get_agent

    threads = torch.get_num_threads()
    try:
        policy = get_agent(agent_name)(config).policy(env)
        game = env.make()
        out, seed = [], 0
        observation, info = game.reset(seed=seed)
        for _ in range(steps):
            actions, details = act_with_details(policy, [observation], [info])
            out.append((actions[0], list(details[0].get("probs", []))))
            observation, _, terminated, truncated, info = game.step(actions[0])
            if terminated or truncated:
                seed += 1
                observation, info = game.reset(seed=seed)
        game.close()
        return out
    finally:
        torch.set_num_threads(threads)  # a policy may set torch's threads (speed-only): leave the process as it was


@pytest.mark.parametrize("agent_name", sorted(RECIPES))
def test_training_only_fields_do_not_change_play_and_speed_only_fields_change_no_action(
    agent_name: str, tiny_model: Path
) -> None:
    if agent_name not in agents():
        pytest.skip(f"{agent_name} is not installed here")
    env_id, settings = RECIPES[agent_name](tiny_model)
    agent_cls = agents()[agent_name]
    base = dataclasses.replace(agent_cls.Config(), **settings)
    env = EnvConfig(env_id)
    played = decisions(agent_name, base, env)

    trained_other, changed = varied(base, "training")
    assert decisions(agent_name, trained_other, env) == played, f"{agent_name}: one of {changed} changes play"
    # Fields that refuse a value beside one varied above (ppo_lora's action_head and rollout_backend=vllm) are
    # varied again from the base config, on their own.
    untestable = fields_with_effect(type(base), "training") - set(changed) - {"stages"}
    if untestable:
        alone, changed = varied(base, "training", only=untestable)
        untestable -= set(changed)
        assert decisions(agent_name, alone, env) == played, f"{agent_name}: one of {changed} changes play"
    assert not untestable, f"{agent_name}: no other value tried for {sorted(untestable)}"

    faster, changed = varied(base, "speed")
    same_actions(agent_name, faster, env, played, changed)

    # A dict field holding another agent's settings (base_config): that agent's markers hold for its keys too.
    for field, inner_agent in nested_agent_fields(type(base)).items():
        inner_cls = agents()[getattr(base, inner_agent)].Config
        inner = apply_overrides(inner_cls(), getattr(base, field))
        own = {f.name for f in dataclasses.fields(base)}
        for effect in ("training", "speed"):
            other, changed = varied(inner, effect)
            # Keys the outer agent has itself (total_steps, seed) it passes down; the curriculum refuses them here.
            changed = [name for name in changed if name not in own]
            assert changed, f"{agent_name}.{field}: no {effect}-only key varied"
            keys = {**getattr(base, field), **{name: getattr(other, name) for name in changed}}
            nested = dataclasses.replace(base, **{field: keys})
            if effect == "training":
                assert decisions(agent_name, nested, env) == played, f"{agent_name}: {field} {changed} changes play"
            else:
                same_actions(agent_name, nested, env, played, [f"{field}.{name}" for name in changed])


def same_actions(agent_name: str, config: Any, env: EnvConfig, played: list, changed: list[str]) -> None:
    """The policy of ``config`` takes the ``played`` actions at the same probabilities up to float rounding."""
    if changed:
        again = decisions(agent_name, config, env)
        assert [a for a, _ in again] == [a for a, _ in played], f"{agent_name}: {changed} changes actions"
        for (_, probs), (_, before) in zip(again, played, strict=True):
            np.testing.assert_allclose(probs, before, atol=1e-5)
