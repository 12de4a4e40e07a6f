#!/usr/bin/env bash
# Instructions the gateway executes per proxied request, counted by callgrind: a number
# that does not move with the machine's load, for A/B comparisons of the request path
# between builds (throughput and latency are the benchmark's job: `cargo bench -p
# tailcut-cli --bench gateway`).
#
# Usage: scripts/instructions-per-request.sh [BIN] [hedge|auto|stream ...]
#   BIN     a tailcut binary (default: target/release/tailcut)
#   routes  which route to drive (default: all three): `hedge` a whole reply on a 500 ms
#           timer hedge that never fires, `auto` the same on a learned `auto` route,
#           `stream` a streamed reply (SSE) on a first-token hedge.
#
# One serving thread (`--workers 1`), sequential requests from `wrk -c1` for 5 s after a
# 2 s warm-up, counting only while the measured load runs. The upstream is nginx
# answering at once. Needs valgrind, wrk and nginx. Stops only the processes it started.
set -euo pipefail

if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
fi
bin=${1:-target/release/tailcut}
shift || true
routes=("$@")
[ ${#routes[@]} -eq 0 ] && routes=(hedge auto stream)
for tool in valgrind callgrind_control wrk; do
    command -v "$tool" >/dev/null || { echo "instructions-per-request: needs $tool (apt-get install valgrind wrk)" >&2; exit 2; }
done
nginx=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$nginx" ] || { echo "instructions-per-request: needs nginx (apt-get install nginx)" >&2; exit 2; }
[ -x "$bin" ] || { echo "instructions-per-request: no tailcut binary at $bin (cargo build --release)" >&2; exit 2; }

dir=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
    for _ in $(seq 1200); do  # 120 s: valgrind starts slowly on a loaded machine
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "instructions-per-request: nothing listens on port $1" >&2
    exit 1
}

up=$(free_port)
chat='{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}'
sse='data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\ndata: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\ndata: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
cat >"$dir/up.conf" <<EOF
daemon off; pid $dir/up.pid; error_log $dir/up.err;
worker_processes 1;
events { worker_connections 4096; }
http { access_log off; client_body_temp_path $dir;
  server { listen 127.0.0.1:$up; keepalive_requests 10000000;
    location /sse/ { default_type text/event-stream; return 200 '$sse'; }
    location / { default_type application/json; return 200 '$chat'; } } }
EOF
"$nginx" -c "$dir/up.conf" -p "$dir" >/dev/null 2>&1 &
pids+=($!)
wait_port "$up"

provider() { printf '[providers.%s]\nadapter = "openai"\nbase_url = "http://127.0.0.1:%s%s/v1"\nrate_usd_per_s = 0.001\nexpected_run_s = 0\n' "$1" "$up" "$2"; }
config() {
    local policy
    if [ "$1" = auto ]; then
        policy='[policies.h]\nkind = "auto"\nproviders = ["a", "b"]\ndeadline_ms = 500\ntarget_miss = 0.01\n'
    else
        policy='[policies.h]\nkind = "hedge"\nprimary = "a"\nhedge = "b"\ndelay_ms = 500\n'
    fi
    printf '[budget]\nledger = ":memory:"\n[gateway]\nauth = "none"\nstore = ":memory:"\nmax_in_flight = 100000\ntotal_timeout_s = 60\nhedge_budget_percent = 1000\nhedge_budget_burst = 100000\n'
    # Extra `[gateway]` lines, e.g. TAILCUT_IPR_GATEWAY='fast_path = false' for hyper's path alone.
    if [ -n "${TAILCUT_IPR_GATEWAY:-}" ]; then printf '%s\n' "$TAILCUT_IPR_GATEWAY"; fi
    provider a ""; provider b ""; provider sa /sse; provider sb /sse
    printf "$policy"
    printf '[policies.hs]\nkind = "hedge"\nprimary = "sa"\nhedge = "sb"\ndelay_ms = 500\n'
    printf '[routes.chat]\nkind = "openai"\nmodels = ["m"]\npolicy = "h"\nfirst_token_hedge_ms = 500\n'
    printf '[routes.stream]\nkind = "openai"\nmodels = ["s"]\npolicy = "hs"\nfirst_token_hedge_ms = 500\n'
}

for route in "${routes[@]}"; do
    case "$route" in
        hedge | auto) body='{"model":"m","messages":[{"role":"user","content":"hi"}]}' ;;
        stream) body='{"model":"s","messages":[{"role":"user","content":"hi"}],"stream":true}' ;;
        *) echo "instructions-per-request: unknown route '$route' (hedge, auto or stream)" >&2; exit 2 ;;
    esac
    config "$route" >"$dir/$route.toml"
    printf 'wrk.method = "POST"\nwrk.body = %s\nwrk.headers["Content-Type"] = "application/json"\n' "'$body'" >"$dir/post.lua"
    port=$(free_port)
    TAILCUT_LOG=off valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$dir/$route.cg" \
        "$bin" serve --config "$dir/$route.toml" --listen "127.0.0.1:$port" --workers 1 >/dev/null 2>"$dir/$route.vg" &
    gw=$!
    pids+=("$gw")
    wait_port "$port"
    url="http://127.0.0.1:$port/v1/chat/completions"
    wrk -t1 -c1 -d2s -s "$dir/post.lua" "$url" >/dev/null
    callgrind_control -i on "$gw" >/dev/null 2>&1
    out=$(wrk -t1 -c1 -d5s -s "$dir/post.lua" "$url")
    callgrind_control -d "$gw" >/dev/null 2>&1
    callgrind_control -i off "$gw" >/dev/null 2>&1
    kill "$gw"
    wait "$gw" 2>/dev/null || true
    requests=$(awk '/requests in/ {print $1}' <<<"$out")
    errors=$(awk '/Non-2xx|Socket errors/' <<<"$out")
    total=$(cat "$dir/$route.cg".* | awk '/^totals:/ {s += $2} END {print s + 0}')
    [ -n "$errors" ] && echo "  ($route: $errors)" >&2
    python3 -c "import sys; r, t = int(sys.argv[2]), int(sys.argv[3]); print(f'{sys.argv[1]:<7} {r:>6} requests  {t / max(r, 1):>9,.0f} instructions/request')" "$route" "$requests" "$total"
done
