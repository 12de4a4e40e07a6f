#!/usr/bin/env bash
# Gateway benchmarks on loopback (apt-get install nginx wrk for the baseline and the
# closed-loop load generator):
#  1. `cargo bench -p tailcut-cli --bench gateway`: added latency at 1k/5k req/s, max
#     throughput and streaming time to first token, tailcut serve vs nginx proxy_pass,
#     each in its own process, in interleaved rounds;
#  2. 10,000 concurrent hedged requests whose primary stalls before its first token, in
#     process, then with the gateway and the two upstreams as separate processes; peak
#     RSS of the gateway from /proc.
set -euo pipefail
cd "$(dirname "$0")/.."
# Every process this script starts is recorded by pid and stopped on exit (also on
# Ctrl-C or an error), so a run leaves nothing behind; it never stops processes it did
# not start (a user's own gateway keeps running).
pids=()
work="$(mktemp -d)"
cleanup() {
    for pid in "${pids[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# Someone else's process on a port this script needs: say so instead of killing it.
for port in 8100 8101 8102; do
    if ss -Htln "( sport = :$port )" 2>/dev/null | grep -q .; then
        echo "port $port is in use (by a process this script did not start); free it and re-run" >&2
        exit 1
    fi
done
echo "== 1. latency, throughput, time to first token (tailcut vs nginx, separate processes)"
cargo bench -p tailcut-cli --bench gateway 2>/dev/null | grep -v '^$'
cargo build --profile dist -p tailcut-cli >/dev/null 2>&1
cargo build --profile dist -p tailcut-gateway --benches >/dev/null 2>&1
bench=$(ls -t target/dist/deps/gateway_load-* | grep -v '\.d$' | head -1)
echo
echo "== 2a. 10,000 concurrent hedged requests, gateway in process"
TAILCUT_LOG=off "$bench" 2>/dev/null | grep -v '^$'
bin=target/dist/tailcut
$bin sim-provider --profile runpod --port 8101 --time-scale 1 --max-workers 1000000 >"$work/stall.log" 2>&1 &
pids+=($!)
$bin sim-provider --profile instant --port 8102 --max-workers 1000000 >"$work/fast.log" 2>&1 &
pids+=($!)
cat >"$work/gw.toml" <<TOML
[budget]
ledger = ":memory:"
[gateway]
# Loopback only, for the benchmark.
auth = "none"
store = ":memory:"
max_in_flight = 100000
admission_wait_ms = 30000
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
TAILCUT_LOG=off $bin serve --config "$work/gw.toml" --listen 127.0.0.1:8100 >"$work/gw.out" 2>&1 &
gwpid=$!
pids+=("$gwpid")
sleep 1
echo
echo "== 2b. 10,000 concurrent hedged requests through a separate gateway process ($(ulimit -Hn) open files allowed)"
TAILCUT_GATEWAY_URL=http://127.0.0.1:8100 TAILCUT_LOG=off "$bench" 2>/dev/null | grep -v '^$' | tail -3
curl -s http://127.0.0.1:8100/metrics | grep -E '^tailcut_(cancels|leaks|hedges|stream_hedges|wins)_total' || true
echo "connections still open to the stalled upstream: $(ss -Htn state established "( dport = :8101 )" | wc -l)"
grep -E "VmHWM" "/proc/$gwpid/status" | sed 's/^/gateway peak RSS /' || true
kill -TERM "$gwpid"; wait "$gwpid" 2>/dev/null || true
