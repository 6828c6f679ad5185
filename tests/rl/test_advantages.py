"""The group estimators against hand computations."""

from __future__ import annotations

import math

import pytest
import torch

from llm_gym.rl.advantages import EpisodeSteps, group_advantages, leave_one_out, rewards_to_go


def test_leave_one_out_against_hand_computation():
    # Group 0: returns 1, 0, -1 -> baselines (0 + -1)/2, (1 + -1)/2, (1 + 0)/2 = -0.5, 0, 0.5.
    # Group 7: returns 2, 4 -> baselines 4, 2. Group 3: alone -> no baseline, advantage 0.
    values = torch.tensor([1.0, 2.0, 0.0, 5.0, -1.0, 4.0])
    groups = torch.tensor([0, 7, 0, 3, 0, 7])
    adv = leave_one_out(values, groups)
    assert adv.tolist() == pytest.approx([1.5, -2.0, 0.0, 0.0, -1.5, 2.0])


def test_leave_one_out_scaled_by_group_std():
    values = torch.tensor([1.0, 0.0, -1.0, 3.0, 3.0])
    groups = torch.tensor([0, 0, 0, 1, 1])
    adv = leave_one_out(values, groups, scale=True, eps=0.0)
    std = math.sqrt(2 / 3)  # population std of 1, 0, -1
    assert adv[:3].tolist() == pytest.approx([1.5 / std, 0.0, -1.5 / std])
    assert adv[3:].tolist() == [0.0, 0.0]  # members that agree: 0, not 0/0


def test_rewards_to_go():
    assert rewards_to_go([1.0, 0.0, 2.0], 0.5) == pytest.approx([1.0 + 0.5 * 0.0 + 0.25 * 2.0, 1.0, 2.0])
    assert rewards_to_go([], 0.9) == []


def test_group_estimator_gives_every_decision_its_episodes_advantage():
    episodes = [
        EpisodeSteps(group=0, rewards=(0.0, 1.0), keys=("a", "b")),
        EpisodeSteps(group=0, rewards=(-1.0,), keys=("a",)),
        EpisodeSteps(group=0, rewards=(0.0, 0.0, 0.0), keys=("a", "c", "d")),
        EpisodeSteps(group=1, rewards=(2.0,), keys=("a",)),
    ]
    adv = group_advantages(episodes, "group")
    # Returns 1, -1, 0 in group 0: 1 - (-1 + 0)/2 = 1.5; -1 - (1 + 0)/2 = -1.5; 0 - 0 = 0. Group 1 alone: 0.
    assert [a.tolist() for a in adv] == [[1.5, 1.5], [-1.5], [0.0, 0.0, 0.0], [0.0]]


def test_step_group_adds_the_anchor_sets_leave_one_out_advantage():
    episodes = [
        EpisodeSteps(group=0, rewards=(0.0, 1.0), keys=("a", "b")),
        EpisodeSteps(group=0, rewards=(0.0, -1.0), keys=("a", "b")),
        EpisodeSteps(group=0, rewards=(0.0, 0.0), keys=("a", "c")),
        EpisodeSteps(group=1, rewards=(1.0,), keys=("a",)),  # another group: key "a" is another anchor set there
    ]
    gamma = 0.5
    adv = group_advantages(episodes, "step_group", gamma=gamma, step_weight=2.0)
    # Episode level (returns 1, -1, 0): 1.5, -1.5, 0; group 1 alone: 0.
    # Anchor (0, "a"): rewards-to-go 0.5, -0.5, 0 -> 0.5 - (-0.25) = 0.75, -0.5 - 0.25 = -0.75, 0 - 0 = 0.
    # Anchor (0, "b"): 1, -1 -> 2, -2. Anchor (0, "c") and (1, "a"): alone -> 0.
    assert adv[0].tolist() == pytest.approx([1.5 + 2 * 0.75, 1.5 + 2 * 2.0])
    assert adv[1].tolist() == pytest.approx([-1.5 - 2 * 0.75, -1.5 - 2 * 2.0])
    assert adv[2].tolist() == pytest.approx([0.0, 0.0])
    assert adv[3].tolist() == pytest.approx([0.0])


def test_group_estimators_refuse_gae_and_mismatched_episodes():
    with pytest.raises(ValueError, match="not a group estimator"):
        group_advantages([], "gae")
    with pytest.raises(ValueError, match="one key per reward"):
        EpisodeSteps(group=0, rewards=(1.0, 2.0), keys=("a",))
