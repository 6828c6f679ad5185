#!/usr/bin/env bash
# Trace-v0 from ground truth (issue 15): fresh generated programs as demos (parallel shards) -> sft (LoRA on every
# layer, by default one epoch: the generator never repeats a program, so more data beats more epochs) -> exact match
# and partial credit on held-out tasks -> optionally PPO on partial credit from the sft adapter -> the same evaluation.
#
# Held-out tasks: seeds 10,000-10,063. The demos' seeds 0..DEMOS-1 cover those seeds once DEMOS > 10,000, so demos
# whose task id is a held-out task's are dropped before training (the count is printed).
# Defaults are the long version for a GPU box (~100k demos: about an hour of an H100 at the measured 30 demos/s);
# the short CPU smoke version:
#   DEMOS=32 SHARDS=2 EVAL_TASKS=2 MAX_TOKENS=64 PPO_STEPS=4 NUM_ENVS=2 TRAINABLE_LAYERS=2 scripts/trace_sft_ppo.sh
# WORKED=1 (level 1 only) trains on worked solutions: each demo's answer is the program's computation, one operation
# per step, in a <think> block before the stdout (`llm-gym demos --set worked=true`); answers are then ~5x longer
# (median ~330 tokens), so MAX_TOKENS defaults to 512.
# Results: OUT/results.json (and each evaluation's JSON in OUT/); the partial-credit evaluation keeps its answers
# (OUT/eval_<stage>_answers.jsonl).
# Stopped anywhere (a lease's end, a kill, SFT_SECONDS or PPO_SECONDS) and run again with the same settings, it goes
# on where it stopped (scripts/train_stage.sh): the demos, a finished stage and the sft evaluation are kept, an
# unfinished training run resumes from its last complete checkpoint. A run longer than one lease:
#   SFT_SECONDS=600 PPO_SECONDS=600 PPO_STEPS=4096 scripts/trace_sft_ppo.sh   # again in each lease until it ends
set -euo pipefail

OUT=${OUT:-runs/trace_sft_ppo}
LLM_GYM=${LLM_GYM:-.venv/bin/llm-gym}
LEVEL=${LEVEL:-1}
SEED=${SEED:-0}
DEMOS=${DEMOS:-100000}         # ground-truth demos (one per task: an episode is one answer)
SHARDS=${SHARDS:-8}            # demo writers side by side (the sandbox runs each program in a subprocess)
EPOCHS=${EPOCHS:-1}
SFT_LR=${SFT_LR:-5e-4}
TRAINABLE_LAYERS=${TRAINABLE_LAYERS:-0}   # 0: LoRA on every layer (the measured GPU run)
WORKED=${WORKED:-0}            # 1: demos with worked solutions (level 1)
if [ "$WORKED" = 1 ]; then MAX_TOKENS=${MAX_TOKENS:-512}; GROUND_TRUTH=(--set worked=true); else
    MAX_TOKENS=${MAX_TOKENS:-192}; GROUND_TRUTH=(); fi
EVAL_TASKS=${EVAL_TASKS:-64}
PPO_STEPS=${PPO_STEPS:-0}      # 0: no PPO stage
PPO_LR=${PPO_LR:-1e-5}
NUM_ENVS=${NUM_ENVS:-64}
VALUE_WARMUP=${VALUE_WARMUP:-4}  # sft's value head learnt 1.0 everywhere (ground truth is always exact)
SFT_SECONDS=${SFT_SECONDS:-0}  # >0: stop sft after this many seconds; the script then ends (exit 75): run it again
PPO_SECONDS=${PPO_SECONDS:-0}  # >0: stop PPO after this many seconds and evaluate its newest checkpoint
SCRIPTS=$(cd "$(dirname "$0")" && pwd)
source "$SCRIPTS/train_stage.sh"
if [ -z "${PYTHON:-}" ]; then  # the interpreter that has llm_gym: the one beside llm-gym in a venv
    PYTHON=python3; [ -x "$(dirname "$LLM_GYM")/python" ] && PYTHON="$(dirname "$LLM_GYM")/python"
fi
ENV=(--env Trace-v0 --env-arg level="$LEVEL")
MODEL=(--set action_mode=generate --set max_new_tokens="$MAX_TOKENS" --set trainable_layers="$TRAINABLE_LAYERS"
       --set lora_rank=16 --set lora_alpha=32)

mkdir -p "$OUT"

# 0. The held-out tasks: their task ids are kept out of the demos.
if [ ! -f "$OUT/heldout_demos.jsonl" ]; then
    "$LLM_GYM" demos "${ENV[@]}" "${GROUND_TRUTH[@]}" --episodes "$EVAL_TASKS" --seed 10000 \
        --out "$OUT/heldout_demos.jsonl.tmp" > /dev/null
    mv "$OUT/heldout_demos.jsonl.tmp" "$OUT/heldout_demos.jsonl"
fi

# 1. Ground-truth demos from seeds 0..DEMOS-1, in SHARDS parallel writers, concatenated in seed order, without the
#    held-out tasks.
if [ ! -f "$OUT/demos.jsonl" ]; then
    per=$(( (DEMOS + SHARDS - 1) / SHARDS ))
    pids=()
    for ((k = 0; k < SHARDS; k++)); do
        start=$(( k * per )); count=$(( DEMOS - start < per ? DEMOS - start : per ))
        [ "$count" -gt 0 ] || break
        rm -f "$OUT/demos_$k.jsonl"
        "$LLM_GYM" demos "${ENV[@]}" "${GROUND_TRUTH[@]}" --episodes "$count" --seed "$start" \
            --out "$OUT/demos_$k.jsonl" --json \
            > "$OUT/demos_$k.summary.json" &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid"; done
    for ((k = 0; k < ${#pids[@]}; k++)); do cat "$OUT/demos_$k.jsonl"; done \
        | "$PYTHON" -c '
import json, sys
held = {json.loads(line)["task_id"] for line in open(sys.argv[1])}
dropped = 0
for line in sys.stdin:
    if json.loads(line)["task_id"] in held:
        dropped += 1
    else:
        sys.stdout.write(line)
print(f"demos: dropped {dropped} whose task is held out", file=sys.stderr)
' "$OUT/heldout_demos.jsonl" > "$OUT/demos.jsonl.tmp"
    mv "$OUT/demos.jsonl.tmp" "$OUT/demos.jsonl"
    rm -f "$OUT"/demos_*.jsonl
fi

# 2. sft: answer tokens only; no evaluation inside the run (step 3 is the evaluation). A stopped run ends the
#    script here: the evaluation and PPO need the finished one.
status=0
train_stage "$OUT/sft" "$SFT_SECONDS" "$LLM_GYM" train --agent sft "${ENV[@]}" --seed "$SEED" \
    --set demos="$OUT/demos.jsonl" "${MODEL[@]}" --set epochs="$EPOCHS" --set learning_rate="$SFT_LR" \
    --set minibatch_size=32 --set eval_episodes=0 --set progress=false || status=$?
after_stage sft "$OUT/sft" "$status" "$SFT_SECONDS"

# 3. Exact match and partial credit of a checkpoint on the held-out tasks (greedy); the partial-credit pass records
#    the answers as demos lines (their reward is the partial credit). OUT/eval_NAME.done marks a finished
#    evaluation, which a second call skips.
evaluate() {  # NAME CHECKPOINT
    [ -f "$OUT/eval_$1.done" ] && return
    "$LLM_GYM" play --checkpoint "$2" "${ENV[@]}" --episodes "$EVAL_TASKS" --seed 10000 --num-envs "$EVAL_TASKS" \
        --json > "$OUT/eval_$1_exact.json"
    rm -f "$OUT/eval_$1_answers.jsonl"
    "$LLM_GYM" demos --agent "$2" "${ENV[@]}" --env-arg scoring=partial --episodes "$EVAL_TASKS" --seed 10000 \
        --num-envs "$EVAL_TASKS" --out "$OUT/eval_$1_answers.jsonl" --json > "$OUT/eval_$1_partial.json"
    touch "$OUT/eval_$1.done"
}
evaluate sft "$OUT/sft"

# 4. PPO on partial credit from the sft adapter (and value head, re-fitted first: value_warmup_updates).
if [ "$PPO_STEPS" -gt 0 ]; then
    status=0
    train_stage "$OUT/ppo" "$PPO_SECONDS" "$LLM_GYM" train --agent ppo_lora "${ENV[@]}" --env-arg scoring=partial \
        --seed "$SEED" "${MODEL[@]}" --set init_adapter="$OUT/sft" \
        --set total_steps="$PPO_STEPS" --set num_envs="$NUM_ENVS" --set num_steps=1 --set learning_rate="$PPO_LR" \
        --set kl_coef=0 --set entropy_coef=0 --set value_warmup_updates="$VALUE_WARMUP" --set advantage=gae --set eval_episodes=0 \
        --set checkpoint_every="$NUM_ENVS" --set progress=false || status=$?
    after_stage PPO "$OUT/ppo" "$status" "$PPO_SECONDS" newest
    rm -f "$OUT/eval_ppo.done"  # the PPO run may have gone on since: evaluate its newest checkpoint again
    evaluate ppo "$OUT/ppo"
fi

# 5. One table: exact-match rate and mean partial credit per stage.
python3 - "$OUT" <<'EOF'
import json, sys
from pathlib import Path

out = Path(sys.argv[1])
rows = {}
for stage in ("sft", "ppo"):
    exact, partial = out / f"eval_{stage}_exact.json", out / f"eval_{stage}_partial.json"
    if exact.is_file() and partial.is_file():
        e, p = json.loads(exact.read_text()), json.loads(partial.read_text())
        hits = sum(1 for ep in e["episodes"] if ep["return"] >= 1.0)
        rows[stage] = {"exact": hits, "tasks": len(e["episodes"]), "partial_mean": p["mean_return"],
                       "partial_ci95": p["return_ci95"]}
        print(f"{stage:4s} exact {hits}/{len(e['episodes'])}  partial {p['mean_return']:.3f} ± {p['return_ci95']:.3f}")
(out / "results.json").write_text(json.dumps(rows, indent=2))
EOF
