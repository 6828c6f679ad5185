"""The env state file is data: what the stepper saves comes back equal, and nothing in a file can name code."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

import llm_gym  # noqa: F401  (registers the envs)
from llm_gym.envs import state_codec
from llm_gym.envs.snapshots import can_store
from llm_gym.envs.state_codec import StateCodecError, dumps, loads


def test_an_atari_snapshot_comes_back_and_replays_the_same_frames() -> None:
    env = gym.make("LLMBreakout-ascii-v0")
    env.reset(seed=3)
    for action in (1, 2, 2, 3):
        env.step(action)
    snapshot = env.unwrapped.clone_state()
    state = {"snapshot": snapshot, "image": np.arange(12, dtype=np.uint8).reshape(3, 4), "n": np.int64(7),
             "pairs": {(1, "a"): [1.5, None, True]}, "raw": b"\x00\xff"}  # fmt: skip
    back = loads(dumps(state))
    assert back["snapshot"].game_state == snapshot.game_state and back["snapshot"].ale_state.equals(snapshot.ale_state)
    assert np.array_equal(back["image"], state["image"]) and back["image"].dtype == np.uint8
    assert (
        back["n"] == 7
        and back["n"].dtype == np.int64
        and back["pairs"] == state["pairs"]
        and back["raw"] == b"\x00\xff"
    )
    expected = [env.step(a)[0] for a in (0, 3, 3)]
    env.unwrapped.restore_state(back["snapshot"])
    assert [env.step(a)[0] for a in (0, 3, 3)] == expected


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"$type": "os:system", "fields": {"command": "true"}}, "an unknown type 'os:system'"),
        ({"$array": ["|O", [1], "AAAAAAAAAAA="]}, "not plain numbers"),
        ({"$array": ["<i8", [1000], "AAAAAAAAAAA="]}, "malformed"),
        ({"__reduce__": ["os.system", ["true"]]}, "an unknown value"),
        ({"$dict": [[[1], 2]]}, "not hashable"),
    ],
)
def test_a_crafted_file_is_refused(value: object, problem: str) -> None:
    with pytest.raises(StateCodecError, match=problem):
        loads(json.dumps({"format": state_codec.FORMAT, "value": value}))


def test_what_it_cannot_write_is_not_stored() -> None:
    class Opaque:
        pass

    assert not can_store([Opaque()]) and not can_store(np.array([object()]))
    with pytest.raises(StateCodecError, match="not a registered state type"):
        dumps({"x": Opaque()})
    assert can_store({"ok": (1, 2.5, "x", None)})
