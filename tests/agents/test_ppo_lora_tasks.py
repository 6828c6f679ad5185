"""ppo_lora on tasks with their own rules (a curriculum across OpenSpiel-v0's games): each decision's system prompt
is its task's, the cached prefix follows the game most envs play, and the periodic evaluation plays the current
stage's tasks. Tiny random models, real OpenSpiel envs."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import llm_gym  # noqa: F401  (registers the envs)
from llm_gym.agents.curriculum.samplers import FailureReplay, Stage, StagedCurriculum
from llm_gym.agents.ppo_lora import train as ppo_train
from llm_gym.agents.ppo_lora.acting import act, strategy_for
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.agents.ppo_lora.rollout import cache_common_rules
from llm_gym.agents.ppo_lora.testing import tiny_config
from llm_gym.envs.tasks import TaskRange
from llm_gym.lm.policy import LMPolicy
from llm_gym.training.loop import evaluation_sampler

ENV = "OpenSpiel-v0"
TIC_TAC_TOE, KUHN = 2_200_000_000, 2_400_000_000


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm_gym.lm.testing import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny-lm"), layers=2, hidden=32, init_std=0.5)


def _start(task_id: int, seed: int = 0) -> tuple[gym.Env, str, dict]:
    env = gym.make(ENV)
    observation, info = env.reset(seed=seed, options={"task_id": task_id, "opponent": "random"})
    return env, observation, info


def test_each_decision_gets_its_tasks_rules_and_the_cache_follows_the_majority(tiny_model: Path) -> None:
    ttt_env, ttt_obs, ttt_info = _start(TIC_TAC_TOE)
    kuhn_env, kuhn_obs, kuhn_info = _start(KUHN)
    ttt_rules, kuhn_rules = ttt_env.unwrapped.instructions, kuhn_env.unwrapped.instructions
    assert ttt_info["instructions"] == ttt_rules and kuhn_info["instructions"] == kuhn_rules != ttt_rules
    config = tiny_config(tiny_model, trainable_layers=1, lora_rank=4)
    ac = ActorCritic(config, ttt_rules)  # the env's first task's rules are cached, as train() starts
    with torch.no_grad():
        torch.nn.init.normal_(ac.value_head.weight)  # a value that depends on the prompt

    def decide(observations: list[str], infos: list[dict]):
        generator = torch.Generator().manual_seed(0)
        return act(ac, strategy_for(config), observations, infos, ENV, generator=generator, greedy=True)

    before = decide([ttt_obs, kuhn_obs], [ttt_info, kuhn_info])
    prompts = [ac.tokenizer.decode(ids) for ids in before.prompts]
    assert kuhn_rules in prompts[1] and ttt_rules not in prompts[1] and ttt_rules in prompts[0]
    assert before.uses_prefix == [True, False]  # the other game's prompt runs whole, right but uncached

    cache_common_rules(ac, [ttt_info, kuhn_info, kuhn_info])  # a curriculum moved most envs on to Kuhn
    assert ac.builder.instructions == kuhn_rules
    after = decide([ttt_obs, kuhn_obs], [ttt_info, kuhn_info])
    assert after.prompts == before.prompts and after.uses_prefix == [False, True]
    # The same decision over a cached prefix or a whole prompt: the same policy and value.
    torch.testing.assert_close(after.logprob, before.logprob, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(after.values, before.values, atol=1e-4, rtol=1e-4)
    cache_common_rules(ac, [ttt_info, kuhn_info])  # no majority for another game: the cache stays
    assert ac.builder.instructions == kuhn_rules


def test_the_zero_shot_policy_prompts_each_task_with_its_rules(tiny_model: Path) -> None:
    from llm_gym.agent import EnvConfig
    from llm_gym.lm.backends import ScoreRequest, make_backend
    from llm_gym.lm.policy import legal_choices

    backend = make_backend("hf", str(tiny_model), dtype="float32", threads=1)
    policy = LMPolicy(backend, EnvConfig(ENV), mode="score")  # OpenSpiel-v0's first task is goofspiel
    _, kuhn_obs, kuhn_info = _start(KUHN)
    assert policy.traits.instructions != kuhn_info["instructions"]
    _, details = policy.act_with_details([kuhn_obs], [kuhn_info])
    names = tuple(legal_choices(kuhn_info, ENV)[1])

    def probabilities(rules: str) -> list[float]:
        (loglik,) = backend.score([ScoreRequest(rules, kuhn_obs, names, ())])
        return (np.exp(loglik) / np.exp(loglik).sum()).tolist()

    assert details[0]["probs"] == pytest.approx(probabilities(kuhn_info["instructions"]), abs=1e-5)
    assert details[0]["probs"] != pytest.approx(probabilities(policy.traits.instructions), abs=1e-5)


def _curriculum() -> FailureReplay:
    stages = [
        Stage("ttt", TaskRange(TIC_TAC_TOE, TIC_TAC_TOE), {"opponent": "random"}, threshold=0.0, window=1),
        Stage("kuhn", TaskRange(KUHN, KUHN + 999), {"opponent": "mcts", "mcts": {"simulations": 5}}, threshold=1.0),
    ]
    return FailureReplay(StagedCurriculum(stages, seed=0), replay_share=0.5, seed=0)


def test_evaluation_plays_the_current_stage_with_the_same_tasks_each_time() -> None:
    sampler = _curriculum()
    assert evaluation_sampler(None, 0) is None
    first = evaluation_sampler(sampler, 10_000)
    assert first.next_options() == {"opponent": "random", "task_id": TIC_TAC_TOE}
    sampler.report({"opponent": "random", "task_id": TIC_TAC_TOE}, {"success": 1.0})  # window 1, threshold 0
    draws = [evaluation_sampler(sampler, 10_000) for _ in range(2)]
    tasks = [[s.next_options() for _ in range(4)] for s in draws]
    assert tasks[0] == tasks[1]  # every evaluation within a stage plays the same tasks
    assert all(t["opponent"] == "mcts" and KUHN <= t["task_id"] <= KUHN + 999 for t in tasks[0])


def test_ppo_lora_evaluates_on_the_curriculum_stage(tiny_model: Path, tmp_path: Path, monkeypatch) -> None:
    played: list[dict] = []
    real_play = ppo_train.training.play_evaluation

    def recording(*args, **kwargs):  # the real evaluation, recording the tasks it was handed
        tasks = args[7] if len(args) > 7 else kwargs.get("tasks")
        played.append(tasks.next_options() if tasks is not None else {})
        return real_play(*args, **kwargs)

    monkeypatch.setattr(ppo_train.training, "play_evaluation", recording)
    from llm_gym.agent import EnvConfig
    from llm_gym.runs import Run

    config = tiny_config(
        tiny_model, num_envs=2, num_steps=4, minibatch_size=8, lora_rank=4, total_steps=8, eval_episodes=2,
        eval_every=8, eval_max_steps=10, checkpoint_every=0, kl_coef=0.0,
    )  # fmt: skip
    run = Run.create(ENV, "ppo_lora", {}, path=tmp_path / "run")
    try:
        ppo_train.train(config, EnvConfig(ENV), run, [], "ppo_lora", sampler=_curriculum())
    finally:
        run.close()
    assert played and all(p.get("opponent") in ("random", "mcts") for p in played)
    assert played[0] == {"opponent": "random", "task_id": TIC_TAC_TOE}  # the first stage, before any update
