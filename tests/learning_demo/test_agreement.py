"""Agreement per position: the demonstrator's distinct positions in the held-out games (with its answer, its action
values and how often each came up), the positions only random play reaches (in no demonstration), any policy's
greedy answer in each, and the refusal of a demonstrator that answers one observation in two ways. Real Kuhn poker,
the exact best response, the uniform random agent."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from llm_gym.agent import EnvConfig
from llm_gym.learning_demo.agreement import agreement, demonstrator_positions, unreached_positions
from llm_gym.learning_demo.report import position_column, position_labels
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


def test_the_tables_position_column_moves_each_lines_key_to_the_header(positions) -> None:
    header, cells = position_column(positions)
    # The keys every position's lines start with are named once, in the header; the cells keep what differs, so a
    # row fits on one line of `make demo`'s table (the full labels are 80-100 characters).
    assert header == "position: Kuhn Poker: … | Your card: … | Actions so far, oldest first: …"
    assert len(set(cells)) == len(positions) == 10
    assert "you are player 0 of 2. | J | none yet" in cells
    assert "you are player 1 of 2. | K | player 0: Pass" in cells
    assert max(len(cell) for cell in cells) < 60 < min(len(label) for label in position_labels(positions))


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


def test_random_play_finds_the_two_positions_the_demonstrator_never_reaches(positions) -> None:
    # The learner has 12 information states; the best response never passes the jack or the queen first, so the
    # first seat facing a bet after its own pass, with either card, comes up only in other play.
    best_response = get_agent("best_response")().policy(KUHN)
    explorer = get_agent("random")().policy(KUHN)
    unreached = unreached_positions(best_response, explorer, KUHN, 400, 10_000, positions)
    assert len(unreached) == 2 and not set(unreached.by_key) & set(positions.by_key)
    answers = {}
    for position in unreached:
        text = str(position.observation)
        assert "you are player 0" in text and "player 0 (you): Pass, player 1: Bet" in text
        assert position.visits == 0 and len(position.values) == 2 and position.is_best(position.action)
        card = text.split("Your card: ")[1][0]
        answers[card] = position.name(position.action)
    # The best response folds the jack (calling loses 2 chips to the queen and the king) and calls with the queen.
    assert answers == {"J": "Pass", "Q": "Bet"}
    bet = agreement(_constant(1), "always bet", unreached)
    assert bet.agreed_positions == bet.best_positions == 1
    assert bet.as_dict()["best_positions"] == 1


def _constant(action: int):
    class Constant:
        def act(self, observations, infos):
            return [action for _ in observations]

    return Constant()


def test_a_demonstrator_that_answers_one_position_two_ways_is_refused() -> None:
    random_agent = get_agent("random")()
    with pytest.raises(ValueError, match="answered one observation in two ways"):
        demonstrator_positions(random_agent.policy(KUHN), KUHN, 60, seed=0)


def test_the_position_column_keeps_full_labels_where_shortening_would_mislead() -> None:
    def column(*observations: str) -> tuple[str, list[str]]:
        return position_column([SimpleNamespace(observation=o) for o in observations])  # type: ignore[arg-type]

    # Lines in different numbers: nothing lines up, so the cells are the full labels.
    assert column("Board: x\nTurn: 1", "Board: o")[1] == ["Board: x | Turn: 1", "Board: o"]
    # A line without a shared key keeps all its words; the header marks its slot with "…" alone.
    assert column("Seat: 0\nplays first", "Seat: 1\nwaits") == (
        "position: Seat: … | …",
        ["0 | plays first", "1 | waits"],
    )
