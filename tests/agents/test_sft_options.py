"""sft's options for long runs, on tiny random models: micro-batches give the whole batch's gradient, a run starts
from another checkpoint's adapter (``init_adapter``), and a run killed inside an epoch resumes from its mid-epoch
checkpoint to the same weights as an uninterrupted run; and ``value_input`` sets the head a ppo_lora run inherits."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from sft_demos import sft_settings, write_demos  # tests/agents/sft_demos.py

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.model import VALUE_HEAD_FILE, ActorCritic
from llm_gym.agents.ppo_lora.testing import tiny_config
from llm_gym.agents.ppo_lora.train import initial_actor_critic
from llm_gym.agents.ppo_lora.value_head import INPUTS
from llm_gym.agents.sft import SFTAgent
from llm_gym.agents.sft.batches import Batches, accumulate
from llm_gym.agents.sft.config import SFTConfig
from llm_gym.agents.sft.data import DemoEncoder
from llm_gym.config import to_dict
from llm_gym.demos.format import read_demos
from llm_gym.envs.catalog import EnvTraits
from llm_gym.errors import CheckpointError
from llm_gym.plugins import get_agent
from llm_gym.runs import Run

TTT = "OpenSpiel-tic_tac_toe-v0"


@pytest.fixture(scope="module")
def ttt_demos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    env = EnvConfig(TTT)
    return write_demos(tmp_path_factory.mktemp("demos") / "ttt.jsonl", env, get_agent("solver")().policy(env), 8)


def _train(path: Path, config: SFTConfig, resume: bool = False) -> tuple[dict, Run]:
    run = Run.open(path) if resume else Run.create(TTT, "sft", to_dict(config), path=path)
    if resume:
        run.resumed_from = run.latest_checkpoint()
    try:
        return SFTAgent(config).train(EnvConfig(TTT), run), run
    finally:
        run.close()


def _adapter(checkpoint: Path) -> dict[str, torch.Tensor]:
    return load_file(str(checkpoint / "adapter" / "adapter_model.safetensors"))


def test_micro_batches_give_the_whole_batch_gradient(tiny_model_dir: Path, ttt_demos: Path) -> None:
    config = sft_settings(tiny_model_dir, ttt_demos)
    ac = ActorCritic(config.as_ppo_lora(), EnvTraits.probe(EnvConfig(TTT)).instructions)
    examples = [DemoEncoder(ac.builder, True).encode(r) for r in read_demos(ttt_demos)[:7]]
    data = Batches(ac, examples, batch_size=4)
    params = ac.trainable_parameters()
    gradients, logged = [], []
    for micro in (7, 3, 1):
        for p in params:
            p.grad = None
        logged.append(
            accumulate(data, ac, list(range(7)), sft_settings(tiny_model_dir, ttt_demos, micro_batch_size=micro))
        )
        gradients.append([p.grad.clone() for p in params])
    for other in gradients[1:]:
        assert all(torch.allclose(a, b, rtol=1e-4, atol=1e-7) for a, b in zip(gradients[0], other, strict=True))
    for other in logged[1:]:
        assert other == pytest.approx(logged[0], rel=1e-4)  # the logged losses are the whole batch's too


def test_a_run_starts_from_another_checkpoints_adapter(tiny_model_dir: Path, ttt_demos: Path, tmp_path: Path) -> None:
    first, _ = _train(tmp_path / "first", sft_settings(tiny_model_dir, ttt_demos, epochs=2))
    # With a learning rate of 0 the run ends where it started: exactly the first run's adapter and losses.
    still = sft_settings(tiny_model_dir, ttt_demos, epochs=1, learning_rate=0.0, init_adapter=str(tmp_path / "first"))
    second, _ = _train(tmp_path / "second", still)
    a, b = _adapter(Path(first["checkpoint"])), _adapter(Path(second["checkpoint"]))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert second["validation"] == pytest.approx(first["validation"], rel=1e-5)
    fresh, _ = _train(tmp_path / "fresh", sft_settings(tiny_model_dir, ttt_demos, epochs=1, learning_rate=0.0))
    assert fresh["validation"]["val/answer_loss"] > first["validation"]["val/answer_loss"]
    with pytest.raises(CheckpointError, match="does not exist"):
        _train(tmp_path / "bad", sft_settings(tiny_model_dir, ttt_demos, init_adapter=str(tmp_path / "missing")))


def test_a_unit_value_head_is_trained_here_and_a_ppo_run_with_the_same_input_takes_it_silently(
    tiny_model_dir: Path, ttt_demos: Path, tmp_path: Path
) -> None:
    summary, _ = _train(tmp_path / "unit", sft_settings(tiny_model_dir, ttt_demos, epochs=1, value_input="unit"))
    checkpoint = Path(summary["checkpoint"])
    assert INPUTS[int(torch.load(checkpoint / VALUE_HEAD_FILE, weights_only=True)["input_mode"])] == "unit"
    instructions = EnvTraits.probe(EnvConfig(TTT)).instructions
    settings = dict(init_adapter=str(checkpoint), lora_rank=sft_settings(tiny_model_dir, ttt_demos).lora_rank)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warm = initial_actor_critic(tiny_config(tiny_model_dir, value_input="unit", **settings), instructions, None)
    assert warm.value_head.input_mode == "unit"
    assert not [w for w in caught if "does not apply" in str(w.message)]
    with pytest.warns(UserWarning, match="value_input=hidden does not apply"):  # the mismatch still says so
        initial_actor_critic(tiny_config(tiny_model_dir, **settings), instructions, None)


def test_a_run_killed_inside_an_epoch_resumes_to_the_same_weights(
    tiny_model_dir: Path, ttt_demos: Path, tmp_path: Path
) -> None:
    config = sft_settings(
        tiny_model_dir, ttt_demos, epochs=2, minibatch_size=4, checkpoint_every=1, keep_checkpoints=100
    )
    straight, run = _train(tmp_path / "straight", config)
    steps = [step for step, _ in run.checkpoints()]
    per_epoch = straight["demo_decisions"]["train"]
    inside = [s for s in steps if s < per_epoch][1]  # the second step of epoch 1: a mid-epoch checkpoint
    assert inside % per_epoch and inside + 4 < per_epoch
    # The "killed" copy: the run directory as it was when the mid-epoch checkpoint was its newest.
    killed = tmp_path / "killed"
    shutil.copytree(run.path, killed)
    for step in steps:
        if step > inside:
            shutil.rmtree(killed / "checkpoints" / f"step_{step}")
    (killed / "summary.json").unlink(missing_ok=True)
    resumed, again = _train(killed, config, resume=True)
    assert resumed["updates"] == straight["updates"] and resumed["epochs"] == 2
    a, b = _adapter(Path(straight["checkpoint"])), _adapter(Path(resumed["checkpoint"]))
    assert Path(straight["checkpoint"]).name == Path(resumed["checkpoint"]).name
    assert all(torch.equal(a[k], b[k]) for k in a), "the resumed run's adapter differs from the uninterrupted run's"


def test_the_report_calls_only_the_untrained_evaluation_before(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # With eval_at_start=false the only evaluation comes after training; the table must not call it "before".
    from llm_gym.agents.sft.report import EvaluationRecord, print_report

    monkeypatch.setenv("COLUMNS", "200")  # rich wraps narrower tables' cells

    summary = {"env_id": "Trace-v0", "checkpoint": "runs/x/checkpoints/step_8"}
    after = EvaluationRecord(examples_seen=8, epoch=1, returns=[1.0, 0.0], scores=[1.0, 0.0])
    print_report(summary, [after])
    table = capsys.readouterr().out
    assert "after (epoch 1)" in table and "before" not in table
    before = EvaluationRecord(examples_seen=0, epoch=0, returns=[0.0, 0.0], scores=[0.0, 0.0])
    print_report(summary, [before, after])
    table = capsys.readouterr().out
    assert table.index("before training") < table.index("after (epoch 1)")


def test_a_resume_trains_at_the_learning_rate_it_is_given(
    tiny_model_dir: Path, ttt_demos: Path, tmp_path: Path
) -> None:
    """``train --resume RUN --set learning_rate=X`` wrote X into config.json while the optimizer and scheduler state
    brought the old rate back; X now applies from the resumed point of the schedule on."""
    from llm_gym.agents.sft.train import STATE_FILE

    first = sft_settings(
        tiny_model_dir, ttt_demos, epochs=1, minibatch_size=4, checkpoint_every=1, keep_checkpoints=100
    )
    _, run = _train(tmp_path / "run", first)
    faster = sft_settings(tiny_model_dir, ttt_demos, epochs=2, minibatch_size=4, checkpoint_every=1, keep_checkpoints=100,
                          learning_rate=first.learning_rate * 10)  # fmt: skip
    resumed, _ = _train(tmp_path / "run", faster, resume=True)
    state = torch.load(Path(resumed["checkpoint"]) / STATE_FILE, weights_only=True)
    group = state["optimizer"]["param_groups"][0]
    assert group["initial_lr"] == faster.learning_rate and state["scheduler"]["base_lrs"] == [faster.learning_rate]
    assert group["lr"] == pytest.approx(faster.learning_rate * faster.min_lr_ratio)  # the new rate, at the end


def test_demos_that_cannot_be_trained_on_are_one_line_and_leave_no_run(
    tiny_model_dir: Path, ttt_demos: Path, tmp_path: Path
) -> None:
    """A binary demos file ended in a UnicodeDecodeError, a 2M-character message in an attempt to allocate 4 TB;
    both left a run directory behind."""
    import json

    from llm_gym.testing import error_line, invoke

    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(bytes(range(128, 256)) * 64)  # no newline: one long line of bytes that are not UTF-8
    huge = tmp_path / "huge.jsonl"
    first = json.loads(ttt_demos.read_text().splitlines()[0])
    first["messages"][1]["content"] = "x" * 2_000_000
    huge.write_text(json.dumps(first) + "\n")
    for demos, said in ((binary, "binary.jsonl:1: not UTF-8 text"), (huge, "more than the model's context of 2,048")):
        run = tmp_path / f"run-{demos.stem}"
        result = invoke("train", "--agent", "sft", "--env", TTT, "--run-dir", str(run), "--set", f"demos={demos}",
                        "--set", f"model={tiny_model_dir}", "--set", "dtype=float32", "--set", "eval_episodes=0")  # fmt: skip
        assert said in error_line(result)
        assert not run.exists(), "a refused run leaves no directory"
