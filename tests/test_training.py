"""The training plumbing both learning agents share: the same callbacks fire in the same places."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from llm_gym.callbacks import Callback
from llm_gym.runs import Run
from llm_gym.training.loop import BEST, Counters, checkpointed, crossed, evaluated


class Recorder(Callback):
    def __init__(self, stop_below: float = float("-inf")) -> None:
        self.calls: list[tuple] = []
        self.stop_below = stop_below

    def on_evaluation(self, step: int, returns: Sequence[float]) -> bool:
        self.calls.append(("evaluation", step, list(returns)))
        return sum(returns) / len(returns) >= self.stop_below

    def on_checkpoint(self, step: int, path: Path) -> None:
        self.calls.append(("checkpoint", step, path.name))


def test_a_better_evaluation_keeps_best_and_every_checkpoint_is_announced(tmp_path: Path) -> None:
    run = Run.create("LLMPong-v0", "test", {}, path=tmp_path / "run")
    counters, recorder = Counters(), Recorder(stop_below=0.5)

    def save(directory: Path) -> None:
        (directory / "weights").write_text(str(counters.global_step))

    counters.global_step = 10
    assert not evaluated(run, [recorder], counters, [1.0, 2.0], [0.5, 0.5], save)
    counters.global_step = 20
    stop = evaluated(run, [recorder], counters, [0.0, 0.0], [0.0, 0.0], save)  # worse: best stays; asks to stop
    checkpointed(run, [recorder], counters, keep=1, save=save)
    run.close()

    assert stop and counters.best_eval_return == 1.5
    assert counters.eval_history == [(10, 1.5, 0.5), (20, 0.0, 0.0)]
    assert (run.checkpoints_dir / BEST / "weights").read_text() == "10"
    assert recorder.calls == [
        ("checkpoint", 10, BEST),
        ("evaluation", 10, [1.0, 2.0]),
        ("evaluation", 20, [0.0, 0.0]),
        ("checkpoint", 20, "step_20"),
    ]


def test_counters_round_trip_and_intervals() -> None:
    counters = Counters(global_step=5, eval_history=[(5, 1.0, 0.5)])
    assert Counters.from_state_dict(counters.state_dict()) == counters
    assert crossed(90, 110, 100) and not crossed(100, 190, 100) and not crossed(0, 500, 0)


def test_evaluations_scale_with_the_run() -> None:
    from llm_gym.training.loop import MIN_EVALUATION_DECISIONS, scaled_eval_steps

    # A 32-step run on Breakout: 4 episodes cut at 64 steps (256 decisions in all), not at 2,000.
    assert scaled_eval_steps(2000, 4, 32) == MIN_EVALUATION_DECISIONS // 4 == 64
    assert scaled_eval_steps(2000, 4, 20_000) == 2000  # a long run keeps whole games up to its own cut
    assert scaled_eval_steps(0, 8, 4096) == 512  # no cut of its own: the run's budget still bounds it
