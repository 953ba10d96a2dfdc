#!/usr/bin/env bash
# plait side by side with other agent frameworks on the same scripted workloads, in one run.
#
#   bash bench/peers.sh                 # plait, Strands and a hand-written asyncio loop
#   ONLY=plait_adapter,strands_adapter,baseline_adapter,langgraph_adapter bash bench/peers.sh
#   REPS=1 SCALE=0.1 bash bench/peers.sh   # quick
#
# PEERS points at the comparison harness (default: ../shared/bench/peers next to this clone).
# The frameworks are installed into .venv-peers (kept out of git); the report is written to
# bench/results/peers.md and the figures to bench/results/peers.json.
set -euo pipefail
cd "$(dirname "$0")/.."
PEERS=${PEERS:-../shared/bench/peers}
ONLY=${ONLY:-plait_adapter,strands_adapter,baseline_adapter}
REPS=${REPS:-3}
SCALE=${SCALE:-1}
if [ ! -f "$PEERS/driver.py" ]; then
  echo "no comparison harness at $PEERS (set PEERS=...)" >&2
  exit 1
fi
if [ ! -x .venv-peers/bin/python ]; then
  python3 -m venv .venv-peers
fi
.venv-peers/bin/pip install -q -e . strands-agents
mkdir -p bench/results
.venv-peers/bin/python "$PEERS/driver.py" --reps "$REPS" --scale "$SCALE" --only "$ONLY" \
  --md bench/results/peers.md --json bench/results/peers.json | tail -n 1 > /dev/null
cat bench/results/peers.md | sed -n '/## Main table/,/## Fake-model/p'
