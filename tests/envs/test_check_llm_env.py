"""``llm_gym.check_llm_env`` on toy envs: a sound one passes; each broken one fails with a message naming the fix."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import llm_gym
from llm_gym.errors import EnvProtocolError

NAMES = ("LEFT", "STAY", "RIGHT")


class ToyEnv(gym.Env):
    """Walk on a line of five cells; reach the right end. Legal moves exclude walking off the line."""

    metadata = {"render_modes": []}

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Text(max_length=64)
        self.action_space = gym.spaces.Discrete(3)
        self.instructions = "You stand on a line of five cells. Answer LEFT, STAY or RIGHT to reach the right end."
        self.noop_action = 1
        self.position = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        self.position = int(self.np_random.integers(0, 3))
        return self._obs(), self._info()

    def step(self, action: int) -> tuple[str, float, bool, bool, dict]:
        self.position = min(4, max(0, self.position + int(action) - 1))
        done = self.position == 4
        return self._obs(), float(done), done, False, self._info()

    def _obs(self) -> str:
        return f"position {self.position} of 0..4"

    def legal(self) -> list[int]:
        return [a for a in range(3) if 0 <= self.position + a - 1 <= 4]

    def _info(self) -> dict[str, Any]:
        legal = self.legal()
        mask = np.zeros(3, dtype=bool)
        mask[legal] = True
        return {"legal_actions": legal, "action_names": [NAMES[a] for a in legal], "action_mask": mask}


class NoLegalActions(ToyEnv):
    def _info(self) -> dict[str, Any]:
        info = super()._info()
        del info["legal_actions"]
        return info


class MaskDisagrees(ToyEnv):
    def _info(self) -> dict[str, Any]:
        info = super()._info()
        info["action_mask"] = np.ones(3, dtype=bool)  # marks LEFT legal at position 0 too
        return info


class NoInstructions(ToyEnv):
    def __init__(self) -> None:
        super().__init__()
        del self.instructions


def test_a_sound_env_passes() -> None:
    llm_gym.check_llm_env(ToyEnv())


@pytest.mark.parametrize(
    ("env_cls", "fix"),
    [
        (NoLegalActions, "has no 'legal_actions'; a Discrete env puts legal_actions (ids)"),
        (MaskDisagrees, "but legal_actions lists [1, 2]; build the mask from the same list"),
        (NoInstructions, "has no instructions: set `self.instructions` to the rules of the game"),
    ],
)
def test_a_broken_env_fails_naming_the_fix(env_cls: type[gym.Env], fix: str) -> None:
    with pytest.raises(EnvProtocolError) as caught:
        llm_gym.check_llm_env(env_cls())
    message = str(caught.value)
    assert fix in message, message
    assert message.startswith(env_cls.__name__), message
    assert "\n" not in message


class BrokenSnapshot(ToyEnv):
    """Snapshots the position but not the RNG, and reset draws from the RNG: fine. Its step adds noise it forgets."""

    def clone_state(self) -> int:
        return self.position

    def restore_state(self, snapshot: int) -> None:
        self.position = snapshot

    def step(self, action: int) -> tuple[str, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = super().step(action)
        return f"{obs} noise {int(self.np_random.integers(1000))}", reward, terminated, truncated, info


def test_a_snapshot_that_misses_the_rng_fails() -> None:
    with pytest.raises(EnvProtocolError, match="the RNG included"):
        llm_gym.check_llm_env(BrokenSnapshot())


def test_wrapped_envs_are_checked_through_their_wrappers() -> None:
    with pytest.raises(EnvProtocolError, match="no instructions"):
        llm_gym.check_llm_env(gym.wrappers.TimeLimit(NoInstructions(), 50))
