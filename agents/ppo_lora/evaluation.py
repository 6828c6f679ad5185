"""``ppo_lora``'s evaluations of the adapter being trained: greedy and sampled play on held-out seeds (the greedy
one keeps the best checkpoint), and with ``eval_exact`` the greedy policy's exact values on small OpenSpiel games."""

from __future__ import annotations

import numpy as np

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.acting import LivePolicy
from llm_gym.agents.ppo_lora.checkpoint import Counters
from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.agents.ppo_lora.session import Session
from llm_gym.agents.ppo_lora.strategies import Strategy
from llm_gym.envs.tasks import TaskSampler
from llm_gym.runs import Run
from llm_gym.stats import mean_ci95
from llm_gym.training import loop as training
from llm_gym.training.exact import ExactResult, evaluate_exact

EVAL_SEED_OFFSET = 10_000
"""Evaluation episodes use seeds seed + 10,000 + i: the same at every evaluation, apart from training's first ones."""


def evaluate_session(session: Session, untrained: bool = False) -> bool:
    """One evaluation of the adapter as it stands (exact, then played); True when a callback asked to stop. The
    ``untrained`` adapter's is the curves' first point only: no best checkpoint, no callback."""
    s, config = session, session.config
    if config.eval_exact:
        evaluate_exactly(s.ac, s.strategy, s.env, s.run, s.counters)
    if config.eval_episodes == 0:
        return False
    returns, scores = evaluate_both(s.ac, s.strategy, s.env, config, s.run, s.counters, s.traits.renders_frames,
                                    s.sampler)  # fmt: skip
    if untrained:
        training.record_evaluation(s.run, s.counters, returns, scores)
        return False
    return training.evaluated(s.run, s.callbacks, s.counters, returns, scores, s.save)


def evaluate(
    ac: ActorCritic, strategy: Strategy, env: EnvConfig, config: PPOLoRAConfig, run: Run, step: int, renders: bool,
    greedy: bool = True, sampler: TaskSampler | None = None,
) -> tuple[list[float], list[float]]:  # fmt: skip
    """Returns and game scores of evaluation episodes with the current adapter, greedy or sampled (the policy as it
    acts in training), on the env's task or, with a training ``sampler`` (a curriculum), its current stage's tasks.
    The first greedy episode is recorded as a video where the env renders frames."""
    video = run.video_path(f"eval_step_{step}.mp4") if (config.video and renders and greedy) else None
    policy = LivePolicy(ac, strategy, env.env_id, seed=config.seed, greedy=greedy)
    seed = EVAL_SEED_OFFSET + config.seed
    # Returns include any reward shaping the env was asked for; the score is the game's own.
    max_steps = training.scaled_eval_steps(config.eval_max_steps, config.eval_episodes, config.total_steps)
    return training.play_evaluation(
        policy, env, config.eval_episodes, seed, max_steps, video, strategy.text_actions,
        training.evaluation_sampler(sampler, seed),
    )  # fmt: skip


def evaluate_exactly(ac: ActorCritic, strategy: Strategy, env: EnvConfig, run: Run, counters: Counters) -> ExactResult:
    """``eval_exact``: the greedy policy's exact evaluation against the random opponent, logged and kept."""
    result = evaluate_exact(LivePolicy(ac, strategy, env.env_id, greedy=True), env)
    scalars = {"eval/exact_return": result.expected_return, "eval/exact_win": result.win,
               "eval/exact_draw": result.draw, "eval/exact_loss": result.loss}  # fmt: skip
    optional = {"eval/exact_worst_return": result.worst_return, "eval/exploitability": result.exploitability}
    scalars |= {k: v for k, v in optional.items() if v is not None}
    run.log_scalars(counters.global_step, scalars)
    counters.exact_eval_history.append((counters.global_step, result.expected_return, result.win, result.loss))
    return result


def evaluate_both(
    ac: ActorCritic, strategy: Strategy, env: EnvConfig, config: PPOLoRAConfig, run: Run, counters: Counters,
    renders: bool, sampler: TaskSampler | None = None,
) -> tuple[list[float], list[float]]:  # fmt: skip
    """Sampled play beside greedy play on the same seeds (a greedy policy can stall where the sampled one plays):
    the sampled evaluation is logged as ``eval/sampled_*`` and kept in the counters; the greedy returns and scores
    are returned, for ``eval/mean_return`` and the best checkpoint."""
    step = counters.global_step
    returns, scores = evaluate(ac, strategy, env, config, run, step, renders, greedy=False, sampler=sampler)
    mean, ci = mean_ci95(returns)
    score = float(np.mean(scores))
    counters.sampled_eval_history.append((counters.global_step, mean, score))
    run.log_scalars(
        counters.global_step,
        {"eval/sampled_mean_return": mean, "eval/sampled_ci95": ci, "eval/sampled_mean_score": score},
    )
    return evaluate(ac, strategy, env, config, run, step, renders, sampler=sampler)
