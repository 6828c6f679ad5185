# Sourced by the pipeline scripts (breakout_sft_ppo.sh, trace_sft_ppo.sh): one `llm-gym train`
# stage that a pipeline can be stopped in anywhere and run again, so that a long run fits several short sessions
# (a device lease, a CPU session) and nothing finished is trained twice.
#
#   train_stage RUN_DIR SECONDS LLM_GYM train --agent ... [ARGS]      (no --run-dir: RUN_DIR is appended)
#
# A finished run (RUN_DIR/summary.json) is skipped. A run with a checkpoint goes on from its last complete one
# (`llm-gym train --resume RUN_DIR`, which reads the run's own config). A run killed before its first checkpoint has
# nothing to keep and starts again. SECONDS > 0 stops the stage after that long (SIGTERM, then SIGKILL 30 s later).
# Returns 0 when the run is finished, 124 when SECONDS stopped it (run the pipeline again to go on), else the
# failure's status.
train_stage() {
  local dir=$1 seconds=$2
  shift 2
  local llm_gym=$1
  [[ -f $dir/summary.json ]] && return 0
  local limit=()
  ((seconds > 0)) && limit=(timeout -k 30 "$seconds")
  local status=0
  if compgen -G "$dir/checkpoints/step_*" > /dev/null; then
    echo "resuming $dir from its last checkpoint" >&2
    ${limit[@]+"${limit[@]}"} "$llm_gym" train --resume "$dir" || status=$?
  else
    rm -rf "$dir"
    ${limit[@]+"${limit[@]}"} "$@" --run-dir "$dir" || status=$?
  fi
  ((seconds > 0 && status == 137)) && status=124 # the SIGKILL after the grace period: still the limit's doing
  return "$status"
}

# after_stage NAME RUN_DIR STATUS SECONDS [newest]: what a pipeline does with train_stage's STATUS. A failure ends the
# script with its status. A stage that SECONDS stopped ends it with 75 (run the pipeline again to go on), except with
# `newest`, where the pipeline goes on with the run's newest checkpoint as it is (if it has one).
after_stage() {
  local name=$1 dir=$2 status=$3 seconds=$4 newest=${5:-}
  ((status == 0)) && return 0
  ((status == 124)) || exit "$status"
  if [[ -n $newest ]] && compgen -G "$dir/checkpoints/step_*" > /dev/null; then
    echo "$name stopped after $seconds s; its newest checkpoint goes on" >&2
    return 0
  fi
  echo "$name stopped after $seconds s; run this script again to go on" >&2
  exit 75
}
