#!/usr/bin/env bash
# Fill the standard suite's expensive rows (the LM entries, the LM checkpoints, the FIRE baselines) on a bigger
# machine (a GPU and >= 16 cores): one `llm-gym bench` per shard in parallel, each into its own store (resumable:
# run the script again after a time limit and each shard continues where it stopped), then all shards merged into
# one file that `llm-gym bench --merge` adds to the committed store. See docs/guides/bench.md, "Filling the LM rows".
#
#   scripts/leaderboard_shards.sh OUT.sqlite [SECONDS_PER_SHARD]      # default 480
#   llm-gym bench --suite standard --db leaderboard/episodes.sqlite --merge OUT.sqlite --leaderboard --out leaderboard
#
# Needs the checkpoints at the paths the suites name (runs/...); a shard whose checkpoint is missing plays nothing.
# LG overrides the command (e.g. LG="python3 -m llm_gym.cli").
set -u
out=${1:?usage: scripts/leaderboard_shards.sh OUT.sqlite [SECONDS_PER_SHARD]}
limit=${2:-480}
LG=${LG:-llm-gym}
stores=runs/leaderboard_shards
mkdir -p "$stores"
pin() { # one shard per core set where the machine has the cores (torch then takes that many threads)
  local cores=$1
  shift
  if command -v taskset >/dev/null && [ "$(nproc)" -ge 16 ]; then taskset -c "$cores" "$@"; else "$@"; fi
}
set -f # the --env patterns below are for bench, not the shell
while read -r name cores args; do
  [ -f "$stores/$name.sqlite" ] || cp leaderboard/episodes.sqlite "$stores/$name.sqlite"
  (
    # shellcheck disable=SC2086  # $LG and $args are word lists
    pin "$cores" timeout "$limit" $LG bench --suite standard --record-trajectories --no-progress \
      --db "$stores/$name.sqlite" $args >>"$stores/$name.log" 2>&1
    echo "shard $name exit $? (124: time limit, run again to continue)" >>"$stores/$name.log"
  ) </dev/null &
done <<'SHARDS'
lm_breakout 0 --entry lm-smollm2-135m --env breakout-text --env breakout-ascii
lm_breakout_fire 1 --entry lm-smollm2-135m --env breakout-fire-*
lm_pong 2 --entry lm-smollm2-135m --env pong-text --env pong-ascii
lm_pong_fire 3 --entry lm-smollm2-135m --env pong-fire-*
lm_mcts 8-10 --entry lm-smollm2-135m --env *-vs-mcts-*
lm_rest 11-12 --entry lm-smollm2-135m --entry lm-smollm2-135m-generate --entry sft-tictactoe-solver --env *-vs-random --env trace-* --env tic_tac_toe-*
base 13-15 --entry random --entry scripted --entry sb3_ppo-breakout-100k --entry nanogpt_ppo-breakout-100k --env *-fire-* --env breakout-ascii
SHARDS
wait
set +f
merges=()
for store in "$stores"/*.sqlite; do merges+=(--merge "$store"); done
# shellcheck disable=SC2086
$LG bench --suite standard --db "$out" "${merges[@]}"
tail -qn 1 "$stores"/*.log
