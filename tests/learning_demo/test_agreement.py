"""Agreement per position: the demonstrator's distinct positions in the held-out games (with its answer, its action
values and how often each came up), any policy's greedy answer in each, and the refusal of a demonstrator that
answers one observation in two ways. Real Kuhn poker, the exact best response, the uniform random agent."""

from __future__ import annotations

import pytest

from llm_gym.agent import EnvConfig
from llm_gym.learning_demo.agreement import agreement, demonstrator_positions
from llm_gym.learning_demo.report import position_labels
from llm_gym.plugins import get_agent

KUHN = EnvConfig("OpenSpiel-kuhn_poker-v0")


@pytest.fixture(scope="module")
def positions():
    return demonstrator_positions(get_agent("best_response")().policy(KUHN), KUHN, 100, seed=10_000)


def test_positions_are_the_demonstrators_information_states_with_their_visits(positions) -> None:
    # 100 games: one or two decisions of the demonstrator each, in the 10 information states it ever reaches.
    assert len(positions) == 10 and 100 <= positions.decisions <= 200
    labels = position_labels(positions)
    assert len(set(labels)) == 10  # what differs between the observations names each position
    assert all("Your card: " in label and "player" in label for label in labels)
    assert not any("(" in label for label in labels)  # the asides are dropped
    for position in positions:
        assert position.visits >= 1 and len(position.values) == len(position.info["legal_actions"]) == 2
        assert position.is_best(position.action)


def test_the_demonstrator_agrees_with_itself_and_a_constant_policy_only_where_it_matches(positions) -> None:
    demonstrator = agreement(get_agent("best_response")().policy(KUHN), "itself", positions)
    assert demonstrator.agreed_decisions == demonstrator.best_decisions == positions.decisions
    assert demonstrator.agreed_positions == 10

    class AlwaysBet:
        def act(self, observations, infos):
            return [1 for _ in observations]

    bet = agreement(AlwaysBet(), "always bet", positions)
    demo_bets = [p for p in positions if p.action == 1]
    assert bet.agreed_positions == len(demo_bets) == 8  # the best response passes twice: K first, J facing a bet
    assert bet.agreed_decisions == sum(p.visits for p in demo_bets)
    # Betting the king first is as good as the best response's pass (1.5 chips either way): a tie, so "as good".
    king_first = next(p for p in positions if p.action == 0 and p.values[0] == p.values[1])
    assert bet.best_decisions == bet.agreed_decisions + king_first.visits
    assert bet.as_dict()["answers"] == ["Bet"] * 10


def test_a_demonstrator_that_answers_one_position_two_ways_is_refused() -> None:
    random_agent = get_agent("random")()
    with pytest.raises(ValueError, match="answered one observation in two ways"):
        demonstrator_positions(random_agent.policy(KUHN), KUHN, 60, seed=0)
