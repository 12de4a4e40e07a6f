#!/usr/bin/env bash
# End to end with no accounts: two simulated providers over HTTP (RunPod-like and
# Cerebrium-like, time scale 0.01), 50 sequential single-provider requests and 50
# queue-cutover requests through the real adapters, then the report and a replay.
# About 3 minutes after the build; each step says what it does and how long it takes,
# and on a terminal the long ones draw a progress bar.
#
# Usage: scripts/sim-walkthrough.sh [--keep DIR]   (--keep: copy the traces to DIR)
set -euo pipefail
cd "$(dirname "$0")/.."
keep=""
if [ "${1:-}" = "--keep" ]; then keep="${2:?--keep needs a directory}"; fi
step() { printf '\n== [%s] %s\n' "$(date +%T)" "$*"; }

# TAILCUT_BIN=path/to/tailcut skips the build (e.g. a debug build).
bin="${TAILCUT_BIN:-target/release/tailcut}"
if [ -z "${TAILCUT_BIN:-}" ]; then
  step "building target/release/tailcut (cargo build --release; several minutes the first time on 2 cores)"
  cargo build --release -p tailcut-cli --quiet
fi
work="$(mktemp -d)"
# Only the processes started here are stopped, by pid, however the script ends (the
# traces are copied to --keep DIR first).
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; if [ -n "$keep" ]; then mkdir -p "$keep" && cp "$work"/*.jsonl "$keep"/ 2>/dev/null || true; fi; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
step "starting two simulated providers on 127.0.0.1:8001 (RunPod-like) and :8002 (Cerebrium-like), time scale 0.01"
$bin sim-provider --profile runpod --port 8001 --time-scale 0.01 >"$work/runpod.log" 2>&1 &
pids+=($!)
$bin sim-provider --profile cerebrium --port 8002 --time-scale 0.01 >"$work/cerebrium.log" 2>&1 &
pids+=($!)
sleep 1
echo "   (a 100 s cold start takes 1 s; timers in examples/sim-walkthrough.toml are scaled the same way)"
echo "   (the simulated providers truncate 1 % of results on purpose, to exercise validation: a"
echo "    'no valid result ... missing required field output' line below is one of those, not a fault)"
cfg=examples/sim-walkthrough.toml
step "50 sequential requests, single provider, 1 s apart so workers scale to zero (~1 min)"
$bin run --config "$cfg" --policy single --repeat 50 --wait 1s --trace "$work/single.jsonl" | tail -1
step "50 sequential requests, queue cutover runpod -> cerebrium (~1 min)"
$bin run --config "$cfg" --policy cutover --repeat 50 --wait 1s --trace "$work/cutover.jsonl" | tail -1
step "report (deadline 0.6 s = 60 simulated seconds)"
$bin report "$work/single.jsonl" "$work/cutover.jsonl" --deadline 0.6
step "20 paired rounds (the same request to both providers, ~40 s), then replay"
$bin bench --config "$cfg" --rounds 20 --wait 1s --out "$work/rounds.jsonl" | tail -1
# Replay times are real seconds at time scale 0.01 (×100 for simulated ones), so the
# queue-state timers are scaled by the same factor: --time-scale 0.01 turns the
# reference's cutover@q2.5s+s8.5s into q0.025s+s0.085s, which can fire on a 1 s cold start.
$bin replay "$work/rounds.jsonl" --config "$cfg" --deadlines 1 --delays 0,0.05,0.1,0.2 --time-scale 0.01 --all
step "what the simulated providers billed (their /metrics)"
curl -s localhost:8001/metrics | grep -v '^#'
curl -s localhost:8002/metrics | grep -v '^#'
step "done (any 'missing required field output' above was the simulator's injected 1 % truncation)"
