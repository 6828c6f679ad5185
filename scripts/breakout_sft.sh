#!/usr/bin/env bash
# Breakout from scripted demonstrations: the commands behind docs/results/breakout_sft.md, in order.
# Seeds: demonstrations 1000-1023, the sft run's own evaluation 10000-10007, the reported evaluation 100-107
# (never trained on). Run where `llm-gym` is on PATH (make install; a GPU makes the sft step ~2.5 min instead of
# hours on a 2-core CPU). RUNS defaults to runs/breakout_sft.
set -euo pipefail
RUNS=${RUNS:-runs/breakout_sft}
ENV=(--env LLMBreakout-text-v0 --env-arg fire_on_reset=true)
EVAL=(--episodes 8 --num-envs 8 --seed 100 --max-steps 1000 --json)
mkdir -p "$RUNS"

# 1. 24 games of the scripted ball tracker, each cut at 1000 steps: ~23.6k decisions
llm-gym demos --agent scripted "${ENV[@]}" --max-steps 1000 --episodes 24 --num-envs 24 --seed 1000 \
  --out "$RUNS/demos.jsonl"
# 2. the demonstrator itself under the reported evaluation
llm-gym play --agent scripted "${ENV[@]}" "${EVAL[@]}" > "$RUNS/scripted_eval.json"
# 3. LoRA on the top 8 layers, loss on the answer tokens only: 3 epochs, lr 1e-3, batch 64
llm-gym train --agent sft "${ENV[@]}" --run-dir "$RUNS/sft" --set demos="$RUNS/demos.jsonl" --set epochs=3 \
  --set learning_rate=1e-3 --set batch_size=64 --set trainable_layers=8 --set eval_episodes=0 --set progress=false
# 4. greedy play of the sft checkpoint under the same evaluation
llm-gym play --checkpoint "$RUNS/sft" "${ENV[@]}" "${EVAL[@]}" > "$RUNS/sft_eval.json"
# 5. PPO from the sft adapter (kl_coef=0: the reference is the base model, which would pull back to zero-shot)
if [ "${PPO_STEPS:-0}" -gt 0 ]; then
  llm-gym train --agent ppo_lora --env LLMBreakout-text-v0 --run-dir "$RUNS/ppo" --set init_adapter="$RUNS/sft" \
    --set trainable_layers=8 --set num_envs=64 --set num_steps=16 --set learning_rate=5e-5 --set kl_coef=0 \
    --set entropy_coef=0 --set total_steps="$PPO_STEPS" --set eval_every=16384 --set eval_episodes=8 \
    --set eval_max_steps=1000 --set checkpoint_every=16384 --set video=false --set progress=false
  llm-gym play --checkpoint "$RUNS/ppo/checkpoints/best" "${ENV[@]}" "${EVAL[@]}" > "$RUNS/ppo_eval.json"
fi
python3 - "$RUNS" <<'PY'
import json, sys, pathlib
runs = pathlib.Path(sys.argv[1])
for name in ("scripted_eval", "sft_eval", "ppo_eval"):
    path = runs / f"{name}.json"
    if path.is_file():
        data = json.loads(path.read_text())
        scores = [e["return"] for e in data["episodes"]]
        print(f"{name:14s} {data['mean_return']:6.2f} ± {data['ci95']:5.2f}  {scores}")
PY
