#!/usr/bin/env bash
# End to end with no accounts: two simulated providers over HTTP (RunPod-like and
# Cerebrium-like, time scale 0.01), 50 sequential single-provider requests and 50
# queue-cutover requests through the real adapters, then the report and a replay.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p tailcut-cli >/dev/null 2>&1
bin=target/release/tailcut
work="$(mktemp -d)"
# Only the processes started here are stopped, by pid, however the script ends.
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
$bin sim-provider --profile runpod --port 8001 --time-scale 0.01 >"$work/runpod.log" 2>&1 &
pids+=($!)
$bin sim-provider --profile cerebrium --port 8002 --time-scale 0.01 >"$work/cerebrium.log" 2>&1 &
pids+=($!)
sleep 1
cfg=examples/sim-walkthrough.toml
echo "== 50 sequential requests, single provider (1 s apart so workers scale to zero)"
$bin run --config "$cfg" --policy single --repeat 50 --wait 1s --trace "$work/single.jsonl" | tail -1
echo "== 50 sequential requests, queue cutover runpod -> cerebrium"
$bin run --config "$cfg" --policy cutover --repeat 50 --wait 1s --trace "$work/cutover.jsonl" | tail -1
echo "== report (deadline 0.6 s = 60 simulated seconds)"
$bin report "$work/single.jsonl" "$work/cutover.jsonl" --deadline 0.6
echo "== paired rounds and replay (times in real seconds: ×100 for simulated)"
$bin bench --config "$cfg" --rounds 20 --wait 1s --out "$work/rounds.jsonl" | tail -1
$bin replay "$work/rounds.jsonl" --config "$cfg" --deadlines 1 --delays 0,0.05,0.1,0.2 --all
echo "== what the simulated providers billed"
curl -s localhost:8001/metrics | grep -v '^#'
curl -s localhost:8002/metrics | grep -v '^#'
