#!/usr/bin/env bash
# Focused SFT rounds on tic-tac-toe (docs/sft_tic_tac_toe.md): each round audits the current checkpoint on every solver
# position (scripts/ttt_audit.py, MCTS system text), then trains one epoch, starting from that checkpoint's
# adapter, on every position under the MCTS text once plus the positions it still plays suboptimally (under every
# system text) REPEAT more times. Ends with an audit of the last round's checkpoint.
# With WALK=1 each round also walks the checkpoint against every opponent reply (`llm-gym demos --all-replies`,
# MCTS text) and adds the corrected lines of the walk's suboptimal positions (`ttt_audit.py --walk --failed-out`) to
# the repeated ones: the positions past the checkpoint's own mistakes, which the solver's tree never reaches.
# With ACCUMULATE=1 each round repeats every earlier round's failed lines too, so a position fixed in one round is
# still trained on in the next (without it, a round's change of move can bring back a mistake fixed before), and a
# position that keeps failing gets more weight each round.
#
#   scripts/ttt_focus_rounds.sh START_CHECKPOINT TREE.jsonl OUT_DIR ROUNDS [REPEAT=3] [-- EXTRA TRAIN ARGS]
#
# TREE.jsonl is `llm-gym demos --agent solver --all-replies` under both opponents' texts (docs/sft_tic_tac_toe.md). Round k
# writes OUT_DIR/round_k/{audit.json,failed.jsonl,demos.jsonl} (with WALK=1 also walk.jsonl, walk.txt, walk_audit.json
# and walk_failed.jsonl) and trains OUT_DIR/round_k/run (seed k).
# Killed at any point and run again with the same arguments, it goes on where it stopped: a finished audit is kept,
# a finished run (its summary.json) is skipped, an unfinished one resumes from its last checkpoint.
set -euo pipefail
start=$1 tree=$2 out=$3 rounds=$4 repeat=${5:-3}
shift $(($# < 5 ? $# : 5))
[[ ${1:-} == -- ]] && shift
extra=("$@")  # more `--set k=v` for each round's `llm-gym train` (they come last, so they win)
llm_gym=${LLM_GYM:-llm-gym}
python=${PYTHON:-python}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/train_stage.sh"
# walk CHECKPOINT PREFIX: PREFIX.jsonl (its moves in every position any reply reaches), PREFIX.txt (the walk's report:
# its worst game per seat), PREFIX_audit.json and PREFIX_failed.jsonl (their corrected lines); a finished walk is kept.
walk() {
  local checkpoint=$1 prefix=$2
  [[ -s ${prefix}_audit.json ]] && return
  rm -f "$prefix.jsonl" "${prefix}_failed.jsonl.part"
  "$llm_gym" demos --agent "$checkpoint" --env OpenSpiel-tic_tac_toe-v0 --env-arg opponent=mcts --all-replies \
    --out "$prefix.jsonl" > "$prefix.txt"
  "$python" "$here/ttt_audit.py" --walk "$prefix.jsonl" --failed-out "${prefix}_failed.jsonl.part" > "${prefix}_audit.json.part"
  touch "${prefix}_failed.jsonl.part"
  mv "${prefix}_failed.jsonl.part" "${prefix}_failed.jsonl"
  mv "${prefix}_audit.json.part" "${prefix}_audit.json"
}
checkpoint=$start
for ((k = 1; k <= rounds; k++)); do
  dir=$out/round_$k
  mkdir -p "$dir"
  if [[ ! -s $dir/audit.json ]]; then
    rm -f "$dir/failed.jsonl.part"
    "$python" "$here/ttt_audit.py" "$checkpoint" --opponent mcts --demos "$tree" \
      --failed-out "$dir/failed.jsonl.part" > "$dir/audit.json.part"
    touch "$dir/failed.jsonl.part"
    mv "$dir/failed.jsonl.part" "$dir/failed.jsonl"
    mv "$dir/audit.json.part" "$dir/audit.json"
  fi
  failed=("$dir/failed.jsonl")
  if [[ -n ${WALK:-} ]]; then
    walk "$checkpoint" "$dir/walk"
    failed+=("$dir/walk_failed.jsonl")
  fi
  if [[ -n ${ACCUMULATE:-} ]]; then
    for ((j = 1; j < k; j++)); do
      failed+=("$out/round_$j/failed.jsonl")
      [[ -n ${WALK:-} ]] && failed+=("$out/round_$j/walk_failed.jsonl")
    done
  fi
  grep -F 'played by an MCTS player' "$tree" > "$dir/demos.jsonl" || { echo "no MCTS-text lines in $tree" >&2; exit 2; }
  for ((r = 0; r < repeat; r++)); do cat "${failed[@]}" >> "$dir/demos.jsonl"; done
  echo "round $k: $(cat "${failed[@]}" | wc -l) failed lines, $(wc -l < "$dir/demos.jsonl") demos, from $checkpoint"
  train_stage "$dir/run" 0 "$llm_gym" train --agent sft --env OpenSpiel-tic_tac_toe-v0 --set seed="$k" \
    --set demos="$dir/demos.jsonl" --set init_adapter="$checkpoint" --set trainable_layers=0 --set lora_rank=16 \
    --set lora_alpha=32 --set epochs=1 --set batch_size=32 --set micro_batch_size=8 --set learning_rate=2e-4 \
    --set min_lr_ratio=0.5 --set validation_fraction=0 --set eval_episodes=0 --set checkpoint_every=4 --set keep_checkpoints=2 \
    "${extra[@]}"
  checkpoint=$(ls -d "$dir"/run/checkpoints/step_* | sort -V | tail -1)
done
"$python" "$here/ttt_audit.py" "$checkpoint" --opponent mcts --demos "$tree" > "$out/final_audit.json"
if [[ -n ${WALK:-} ]]; then walk "$checkpoint" "$out/final_walk"; fi
echo "last checkpoint: $checkpoint"
