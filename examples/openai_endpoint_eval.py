"""Evaluate a model behind any OpenAI-compatible endpoint (vllm serve, llama.cpp, a hosted API) on an llm-gym game.

    python examples/openai_endpoint_eval.py --base-url http://127.0.0.1:8000/v1 --model NAME [--env ID] [--episodes 20]

The same in one command: llm-gym play --agent lm --backend openai --model NAME --set base_url=URL
--set action_mode=generate --env ID --episodes 20. A local model on such an endpoint, for trying it out:
python -m llm_gym.lm.openai_server --model smollm2-135m --port 8000.
"""

import argparse

from llm_gym import EnvConfig, run_episodes
from llm_gym.lm.backends import make_backend
from llm_gym.lm.policy import LMPolicy
from llm_gym.stats import mean_ci95

parser = argparse.ArgumentParser()
parser.add_argument("--base-url", required=True)
parser.add_argument("--model", required=True, help="the model name the server knows")
parser.add_argument("--env", default="OpenSpiel-kuhn_poker-v0")
parser.add_argument("--episodes", type=int, default=20)
parser.add_argument("--seed", type=int, default=10_000, help="first seed (the same seeds for every model compared)")
args = parser.parse_args()

backend = make_backend("openai", args.model, base_url=args.base_url)
env = EnvConfig(args.env)
policy = LMPolicy(backend, env, mode="generate", greedy=True, max_new_tokens=16)
results = run_episodes(policy, env, args.episodes, seed=args.seed)
mean, ci = mean_ci95([r.episode_return for r in results])
print(
    f"{args.model} on {args.env}: mean return {mean:+.3f} ± {ci:.3f} over {len(results)} episodes "
    f"(seeds {args.seed}..{args.seed + args.episodes - 1}), unparsed answers {policy.parse_failures}"
)
