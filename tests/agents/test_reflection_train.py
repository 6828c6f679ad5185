"""Whole reflection iterations with tiny random models: a text Atari game, an OpenSpiel game and a vision env, and
a run killed with SIGKILL mid-iteration that ``--resume`` finishes exactly as an uninterrupted run.

A random model never writes the JSON answer, so these runs use ``reflection_answer=scored`` (the analysis is
generated, the corrected action scored), which always names a legal action and so reaches verification and
fine-tuning; ``test_json_reflections_of_a_random_model_are_counted_and_skipped`` covers the JSON mode.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llm_gym.agent import EnvConfig
from llm_gym.agents.reflection import ReflectionAgent
from llm_gym.agents.reflection.config import ReflectionConfig
from llm_gym.agents.reflection.model import ReflectionModel
from llm_gym.config import to_dict
from llm_gym.runs import Run

FAST = dict(
    dtype="float32",
    threads=1,
    progress=False,
    batch_size=8,
    lora_rank=4,
    update_epochs=2,
    reflection_tokens=12,
    reflection_answer="scored",
)

# One tic-tac-toe iteration: every move short of an immediate win is poor, so a won trial still gives candidates.
TIC_TAC_TOE = dict(
    iterations=1, max_steps=9, reflection_rate=1.0, outcome_threshold=1.0, eval_episodes=2, eval_max_steps=9
)


@pytest.fixture(scope="module")
def tiny_text_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm_gym.lm.testing import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny-lm"), layers=2, hidden=32, init_std=0.5)


def pong_run(*, episodes: int, max_steps: int, reflections: int, eval_max_steps: int) -> dict:
    """A short Pong run's settings: at most ``reflections`` poor steps reflected on, each verified that many steps
    ahead; one evaluation episode."""
    return dict(
        episodes=episodes,
        max_steps=max_steps,
        max_reflections=reflections,
        verify_horizon=reflections,
        eval_episodes=1,
        eval_max_steps=eval_max_steps,
    )


def _check_iteration(run_dir: Path, iterations: int = 1) -> dict:
    summary = json.loads((run_dir / "summary.json").read_text())
    results = json.loads((run_dir / f"iteration_{iterations}" / "results.json").read_text())
    r = results["reflections"]
    assert 0 < r["proposed"] <= r["poor_steps"] and r["parsed"] > 0
    assert r["parsed"] + r["unparsable"] == r["proposed"]
    assert r["verified"] + r["rejected"] + r["unverified"] + r["unchanged"] == r["parsed"]
    assert r["kept"] == r["verified"] + r["unverified"] == results["finetune"]["examples"]
    assert r["improved"] <= r["verified"]
    if r["kept"]:
        assert results["finetune"]["steps"] > 0 and all(math.isfinite(x) for x in results["finetune"]["losses"])
    assert results["trial"]["episodes"] == len(results["trial"]["returns"])
    assert "eval" in results and (run_dir / "iteration_0" / "results.json").is_file()  # zero-shot evaluation
    assert (run_dir / "checkpoints" / f"step_{iterations}" / "adapter" / "adapter_config.json").is_file()
    assert (run_dir / "reward_over_iterations.png").stat().st_size > 1000
    assert list((run_dir / "tb").glob("events.out.tfevents.*"))
    assert summary["iterations"] == iterations and summary["reflections"]["proposed"] >= r["proposed"]
    lines = (run_dir / f"iteration_{iterations}" / "corrections.jsonl").read_text().splitlines()
    assert len(lines) == r["parsed"] - r["unchanged"]
    return results


def _train(model: Path, env_id: str, run_dir: Path, env_kwargs: dict | None = None, **settings) -> dict:
    config = ReflectionConfig(model=str(model), **{**FAST, **settings})
    run = Run.create(env_id, "reflection", to_dict(config), path=run_dir, env_kwargs=env_kwargs)
    try:
        return ReflectionAgent(config).train(EnvConfig(env_id, env_kwargs or {}), run)
    finally:
        run.close()


def test_json_reflections_of_a_random_model_are_counted_and_skipped(tiny_text_model: Path) -> None:
    from llm_gym.agents.reflection.train import reflect
    from llm_gym.agents.reflection.trial import play_trial
    from llm_gym.envs.catalog import EnvTraits
    from llm_gym.lm.policy import LMPolicy

    config = ReflectionConfig(model=str(tiny_text_model), **{**FAST, "reflection_answer": "json"})
    env = EnvConfig("OpenSpiel-tic_tac_toe-v0")
    model = ReflectionModel(config)
    backend = model.backend()
    trial = play_trial(
        LMPolicy(backend, env, greedy=False),
        env,
        4,
        seed=0,
        num_envs=4,
        max_steps=9,
        rate=1.0,
        gamma=0.9,
        threshold=1.0,  # every move short of an immediate win: the random model may win all four games
        context=3,
    )
    assert trial.candidates
    corrections, counts = reflect(backend, trial.candidates, EnvTraits.probe(env), config, seed=0)
    assert counts["proposed"] == len(trial.candidates)
    assert counts["parsed"] + counts["unparsable"] == counts["proposed"] and counts["unparsable"] > 0
    assert len(corrections) == counts["parsed"] - counts["unchanged"]


@pytest.mark.timeout(600)
def test_one_iteration_on_atari_pong_text(tmp_path: Path, tiny_text_model: Path) -> None:
    model = tiny_text_model
    # 80 steps: the first point is lost around step 60, so there are poor steps to reflect on.
    settings = pong_run(episodes=2, max_steps=80, reflections=6, eval_max_steps=10)
    _train(model, "LLMPong-text-v0", tmp_path / "run", iterations=1, **settings)
    results = _check_iteration(tmp_path / "run")
    reflections = results["reflections"]
    assert reflections["proposed"] == 6 < reflections["poor_steps"]  # max_reflections: the 6 lowest outcomes
    assert reflections["unverified"] == 0 and reflections["verified"] + reflections["rejected"] > 0  # ALE clones


@pytest.mark.timeout(600)
def test_one_iteration_on_openspiel(tmp_path: Path, tiny_text_model: Path) -> None:
    model = tiny_text_model
    _train(
        model,
        "OpenSpiel-tic_tac_toe-v0",
        tmp_path / "run",
        **TIC_TAC_TOE,
        episodes=6,
        verify_horizon=4,
        continuation="random",
    )
    _check_iteration(tmp_path / "run")
    # `play --checkpoint` path: the run's newest checkpoint loads (LoRA merged) and plays.
    from llm_gym.training.checkpoints import load_policy
    from llm_gym.training.evaluation import run_episodes

    policy, agent = load_policy(tmp_path / "run")
    assert agent.name == "reflection"
    assert len(run_episodes(policy, EnvConfig("OpenSpiel-tic_tac_toe-v0"), 2, num_envs=2)) == 2


@pytest.mark.timeout(600)
def test_an_iteration_with_history_acts_trains_and_plays_on_the_earlier_turns(
    tmp_path: Path, tiny_text_model: Path
) -> None:
    from llm_gym.training.checkpoints import load_policy

    _train(
        tiny_text_model,
        "OpenSpiel-tic_tac_toe-v0",
        tmp_path / "run",
        {"history": 2},
        **TIC_TAC_TOE,
        episodes=4,
        verify_horizon=3,
        continuation="model",
    )
    _check_iteration(tmp_path / "run")
    policy, _ = load_policy(tmp_path / "run")
    assert policy.history == 2  # the checkpoint plays on the prompts it trained on (the run's history=2)
    env = EnvConfig("OpenSpiel-tic_tac_toe-v0", {"history": 2})
    game = env.make()
    game.reset(seed=0)
    _, _, _, _, info = game.step(4)
    assert policy.turns(info) == tuple(info["turns"]) and len(policy.turns(info)) == 1
    game.close()


@pytest.mark.timeout(600)
def test_one_iteration_on_a_vision_env(tmp_path: Path) -> None:
    from llm_gym.lm.vision.testing import make_tiny_vision_model

    model = make_tiny_vision_model(tmp_path / "vlm", init_std=0.5)
    settings = pong_run(episodes=1, max_steps=70, reflections=3, eval_max_steps=5)
    _train(model, "LLMPong-vision-v0", tmp_path / "run", iterations=1, **settings)
    results = _check_iteration(tmp_path / "run")
    assert results["reflections"]["kept"] > 0 and results["finetune"]["steps"] > 0  # images went through training


def _resume_settings(model: Path) -> list[str]:
    run = pong_run(episodes=2, max_steps=70, reflections=4, eval_max_steps=5)
    settings = dict(FAST, model=str(model), iterations=2, **run)
    return [arg for k, v in settings.items() for arg in ("--set", f"{k}={v}")]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "from llm_gym.cli import main; main()", *args]


@pytest.mark.timeout(900)
def test_sigkill_mid_iteration_then_resume_matches_an_uninterrupted_run(tmp_path: Path, tiny_text_model: Path) -> None:
    model = tiny_text_model
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    common = ["train", "--agent", "reflection", "--env", "LLMPong-text-v0", *_resume_settings(model)]
    subprocess.run(_cli(*common, "--run-dir", str(tmp_path / "whole")), env=env, check=True, capture_output=True)

    killed = tmp_path / "killed"
    process = subprocess.Popen(
        _cli(*common, "--run-dir", str(killed)), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 600
    while not (killed / "checkpoints" / "step_1" / "state.json").is_file():  # iteration 1 finished
        assert process.poll() is None and time.monotonic() < deadline, "the run ended before its first checkpoint"
        time.sleep(0.2)
    time.sleep(1.0)  # well inside iteration 2
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (killed / "checkpoints" / "step_2").exists()
    subprocess.run(_cli("train", "--resume", str(killed)), env=env, check=True, capture_output=True)

    for iteration in (1, 2):
        whole = json.loads((tmp_path / "whole" / f"iteration_{iteration}" / "results.json").read_text())
        resumed = json.loads((killed / f"iteration_{iteration}" / "results.json").read_text())
        for key in ("trial", "reflections", "eval"):
            assert resumed[key] == whole[key], (iteration, key)
        assert resumed["finetune"]["losses"] == pytest.approx(whole["finetune"]["losses"], abs=1e-5)
    summary = json.loads((killed / "summary.json").read_text())
    assert summary["iterations"] == 2 and len(summary["trial_returns"]) == 2
