"""``llm-gym demos --all-replies`` on real OpenSpiel: the solver's tic-tac-toe tree holds every decision it meets
in sampled games, each distinct decision once, answers that replay legally in the env, and expected returns
against a random opponent; games with chance are refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llm_gym.agent import EnvConfig
from llm_gym.cli import build_app
from llm_gym.demos import read_demos
from llm_gym.demos.record import record_demos
from llm_gym.demos.tree import record_demo_tree
from llm_gym.errors import ConfigError, UnsupportedEnvError
from llm_gym.plugins import get_agent

TTT = "OpenSpiel-tic_tac_toe-v0"


@pytest.fixture(scope="module")
def solver_tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    out = tmp_path_factory.mktemp("tree") / "tree.jsonl"
    env = EnvConfig(TTT)
    summary = record_demo_tree(get_agent("solver")().policy(env), env, out, source={"agent": "solver"})
    return out, summary


def _key(record) -> tuple[str, ...]:
    return tuple(m["content"] for m in record.messages)


def test_the_tree_holds_every_decision_of_sampled_games_once(solver_tree, tmp_path: Path) -> None:
    out, summary = solver_tree
    tree = read_demos(out)
    assert summary.decisions == len(tree) > 100 and summary.episodes > len(tree) / 2
    prompts = [_key(r)[:-1] for r in tree]
    assert len(set(prompts)) == len(prompts)  # one answer per distinct prompt, each once
    seats = {"you are player 0" in r.messages[1]["content"] for r in tree}
    assert seats == {True, False}  # both seats walked

    # Games against random and MCTS opponents meet only decisions the tree holds (the solver is deterministic).
    env = EnvConfig(TTT)
    sampled = tmp_path / "sampled.jsonl"
    record_demos(get_agent("solver")().policy(env), env, 30, sampled, source={"agent": "solver"}, seed=7)
    assert {_key(r) for r in read_demos(sampled)} <= set(map(_key, tree))
    assert all(r.answer in r.choices and r.choice_values for r in read_demos(sampled))  # episodes list them too


def test_answers_are_legal_and_returns_are_expected_values(solver_tree) -> None:
    tree = read_demos(solver_tree[0])
    for record in tree:
        lines = record.messages[1]["content"].splitlines()
        legal = [line.split(" -> ")[1] for line in lines if line.split(" -> ")[0].isdigit()]
        assert record.messages[-1]["content"] in legal
        assert record.choices == tuple(legal)  # what score mode ranks, written beside the answer
        # The solver's minimax value of each: its own move is one of the best, and nothing is better than a win.
        assert len(record.choice_values) == len(legal) and set(record.choice_values) <= {-1.0, 0.0, 1.0}
        assert record.choice_values[legal.index(record.answer)] == max(record.choice_values)
        assert -1.0 <= record.return_to_go <= 1.0
        if record.reward == 1.0:  # the move wins at once: that is its whole return
            assert record.return_to_go == 1.0
    # The solver never loses: no decision has a negative expected return against a random opponent.
    assert min(r.return_to_go for r in tree) >= 0.0
    assert "every opponent reply" in tree[0].source["walk"]


def test_the_cli_writes_the_tree_and_refuses_games_with_chance(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    result = CliRunner().invoke(build_app(), ["demos", "--agent", "solver", "--env", TTT, "--all-replies",
                                              "--env-arg", "opponent=mcts", "--out", str(out), "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    records = read_demos(out)
    assert report["decisions"] == len(records) and "an MCTS player" in records[0].messages[0]["content"]
    result = CliRunner().invoke(build_app(), ["demos", "--agent", "random", "--env", "OpenSpiel-kuhn_poker-v0",
                                              "--all-replies", "--out", str(tmp_path / "k.jsonl")])  # fmt: skip
    assert result.exit_code == 2 and "deterministic turn-based" in result.output
    with pytest.raises(UnsupportedEnvError, match="not an OpenSpiel env"):
        record_demo_tree(None, EnvConfig("Trace-v0"), tmp_path / "x", source={})  # type: ignore[arg-type]


class _FirstLegal:
    """A real deterministic player that always takes the lowest legal move, counting how often it is asked."""

    def __init__(self) -> None:
        self.asked = 0

    def act(self, observations, infos):
        self.asked += len(observations)
        return [min(int(a) for a in info["legal_actions"]) for info in infos]


def _best_reply_value(state, seat: int) -> float:
    """The first-legal player's return in ``seat`` against a perfect opponent, straight from OpenSpiel's state."""
    if state.is_terminal():
        return state.returns()[seat]
    if state.current_player() == seat:
        return _best_reply_value(state.child(min(state.legal_actions())), seat)
    return min(_best_reply_value(state.child(a), seat) for a in state.legal_actions())


def test_each_position_is_decided_once_and_the_worst_game_is_the_best_reply(solver_tree, tmp_path: Path) -> None:
    import pyspiel

    # The solver never loses and tic-tac-toe is a draw under best play: its worst game in either seat is a draw.
    assert solver_tree[1].worst_return_by_seat == {0: 0.0, 1: 0.0}
    player = _FirstLegal()
    summary = record_demo_tree(player, EnvConfig(TTT), tmp_path / "first.jsonl", source={"agent": "first_legal"})
    assert player.asked == summary.decisions == len(read_demos(tmp_path / "first.jsonl"))  # not once per replay
    assert summary.episodes > summary.decisions  # the replays did reach positions decided before
    game = pyspiel.load_game("tic_tac_toe")
    expected = {seat: _best_reply_value(game.new_initial_state(), seat) for seat in (0, 1)}
    assert summary.worst_return_by_seat == expected and min(expected.values()) == -1.0
    result = CliRunner().invoke(build_app(), ["demos", "--agent", "solver", "--env", TTT, "--all-replies",
                                              "--out", str(tmp_path / "cli.jsonl")])  # fmt: skip
    assert result.exit_code == 0 and "seat 0 +0.00, seat 1 +0.00" in result.output, result.output


class _OtherBest:
    """The solver's values, but the highest-numbered of the best moves: a learner that takes another best move than
    the solver's own (what sft's ``choice_target=best`` counts as right)."""

    def __init__(self, solver) -> None:
        self.solver = solver

    def act(self, observations, infos):
        rows = self.solver.action_values(observations, infos)
        return [
            max(int(a) for a, v in zip(info["legal_actions"], values, strict=True) if v >= max(values) - 1e-9)
            for info, values in zip(infos, rows, strict=True)
        ]


def test_all_best_also_walks_the_solvers_other_best_moves(solver_tree, tmp_path: Path) -> None:
    env = EnvConfig(TTT)
    solver = get_agent("solver")().policy(env)
    wide = tmp_path / "best.jsonl"
    summary = record_demo_tree(solver, env, wide, source={"agent": "solver"}, all_best=True)
    tree = {_key(r): r for r in read_demos(solver_tree[0])}
    records = read_demos(wide)
    by_key = {_key(r): r for r in records}
    assert len(by_key) == len(records) == summary.decisions > 5 * len(tree)
    assert len({k[:-1] for k in by_key}) == len(records)  # still one answer, the solver's own, per prompt
    for key, record in tree.items():  # the plain tree's lines are in it unchanged, expected returns included
        assert by_key[key].return_to_go == pytest.approx(record.return_to_go) and by_key[key].reward == record.reward
    assert summary.worst_return_by_seat == {0: 0.0, 1: 0.0}  # every best move keeps the draw
    assert "every move the demonstrator values" in records[0].source["all_best"]

    # A learner that takes the solver's other best moves leaves the plain tree; the wide file holds all it meets.
    played = tmp_path / "other.jsonl"
    record_demos(_OtherBest(solver), env, 40, played, source={"agent": "other_best"}, seed=3)
    prompts = {_key(r)[:-1] for r in read_demos(played)}
    assert not prompts <= {k[:-1] for k in tree}
    assert prompts <= {k[:-1] for k in by_key}


def test_all_best_needs_action_values_and_the_tree_walk(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no action values"):
        record_demo_tree(_FirstLegal(), EnvConfig(TTT), tmp_path / "x.jsonl", source={}, all_best=True)
    result = CliRunner().invoke(build_app(), ["demos", "--agent", "solver", "--env", TTT, "--all-best",
                                              "--out", str(tmp_path / "y.jsonl")])  # fmt: skip
    assert result.exit_code == 2 and "add --all-replies" in result.output, result.output
    assert not (tmp_path / "x.jsonl").exists() and not (tmp_path / "y.jsonl").exists()
