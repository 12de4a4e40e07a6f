#!/usr/bin/env bash
# Gateway benchmarks on loopback.
#  1. latency added at 1k/5k req/s, max throughput, streaming TTFT — gateway vs direct vs
#     nginx proxy_pass (apt-get install nginx), all in one process;
#  2. 10,000 concurrent hedged requests whose primary stalls before its first token, with
#     the gateway and the two upstreams as separate processes (fd limits), peak RSS of the
#     gateway from /usr/bin/time.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p tailcut-cli >/dev/null 2>&1
cargo build --release -p tailcut-gateway --benches >/dev/null 2>&1
bench=$(ls -t target/release/deps/gateway_load-* | grep -v '\.d$' | head -1)
echo "== in-process: latency, throughput, TTFT"
TAILCUT_LOG=off "$bench" 2>/dev/null | sed '/^10,000/,$d'
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
bin=target/release/tailcut
$bin sim-provider --profile runpod --port 8101 --time-scale 1 --max-workers 1000000 >"$work/stall.log" 2>&1 &
$bin sim-provider --profile instant --port 8102 --max-workers 1000000 >"$work/fast.log" 2>&1 &
cat >"$work/gw.toml" <<TOML
[budget]
ledger = ":memory:"
[gateway]
store = ":memory:"
max_in_flight = 100000
total_timeout_s = 60
hedge_budget_percent = 1000
hedge_budget_burst = 100000
[providers.stall]
adapter = "openai"
base_url = "http://127.0.0.1:8101/v1"
rate_usd_per_s = 0.0
[providers.fast]
adapter = "openai"
base_url = "http://127.0.0.1:8102/v1"
rate_usd_per_s = 0.0
[policies.h]
kind = "hedge"
primary = "stall"
hedge = "fast"
delay_ms = 50
[routes.chat]
kind = "openai"
models = ["m"]
policy = "h"
first_token_hedge_ms = 50
TOML
sleep 0.5
TAILCUT_LOG=off /usr/bin/time -v $bin serve --config "$work/gw.toml" --listen 127.0.0.1:8100 >"$work/gw.out" 2>"$work/gw.time" &
gwpid=$!
sleep 1
echo "== 10,000 concurrent hedged requests through a separate gateway process"
TAILCUT_GATEWAY_URL=http://127.0.0.1:8100 TAILCUT_LOG=off "$bench" --stall-only 2>/dev/null | tail -2
curl -s http://127.0.0.1:8100/metrics | grep -E '^tailcut_(cancels|leaks|hedges|stream_hedges|wins)_total' || true
# /usr/bin/time does not forward signals: stop the gateway itself so time can report.
servepid=$(pgrep -P "$gwpid" || echo "$gwpid")
grep -E "VmHWM" "/proc/$servepid/status" | sed 's/^/gateway peak RSS /' || true
kill -TERM "$servepid"; wait "$gwpid" 2>/dev/null || true
grep -E "Maximum resident" "$work/gw.time" | sed 's/^/gateway /' || true
