#!/usr/bin/env bash
# Re-measures the README's figures, records the README's own rows in docs/figures.json
# (scripts/figures.py, which re-renders the README's table from that file), and prints
# every figure with the command that produced it, followed by the raw per-run values. Figures that vary
# from run to run (the HTTP walkthrough, the load test, the contention run) are measured
# RUNS times and given as min–max ranges; the deterministic ones (the demo, the replay
# tables, the reference live traces, the conformance test count) once.
#
# Non-interactive and bounded: with RUNS=3 (the default) it takes about 15 minutes after
# the release build on a 2-core machine (each walkthrough ~2.8 min, each load test and
# contention run ~20 s, plus compiling the conformance tests once); every step runs under
# `timeout`, so with RUNS=3 it ends within 80 minutes whatever hangs (RUNS=1 took 9 min 11 s on a
# debug build with the machine's load at 12). Out of its scope: the gateway
# benchmark (scripts/bench-gateway.sh), the replay speed comparison with GPUHedge
# (scripts/bench-replay.sh) and the engine benchmark (cargo bench -p tailcut-core).
#
# Usage: scripts/readme-figures.sh            (RUNS=N for more or fewer runs;
#        TAILCUT_BIN=path skips the release build, e.g. to try it on a debug build)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${RUNS:-3}"
started=$(date +%s)
log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }

bin="${TAILCUT_BIN:-target/release/tailcut}"
if [ -z "${TAILCUT_BIN:-}" ]; then
  log "building target/release/tailcut"
  cargo build --release -p tailcut-cli --quiet
fi
export TAILCUT_BIN="$bin"
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fx=fixtures/gpuhedge-2026-07

# --- deterministic figures -------------------------------------------------------------
log "demo (deterministic, seed 1)"
timeout 120 "$bin" demo --json >"$work/demo.json"
log "replay of the committed rounds (deterministic)"
timeout 120 "$bin" replay "$fx/moss_rounds.jsonl" --calibration-rounds 18 --json >"$work/replay.json"
log "reference live traces (deterministic)"
timeout 60 "$bin" report "$fx/live_hedge.jsonl" --json >"$work/live.json"
log "conformance tests (count)"
timeout 900 cargo test -q -p tailcut-providers --test conformance -- --list 2>/dev/null | grep -c ': test$' >"$work/conformance.txt" || echo "?" >"$work/conformance.txt"

# --- HTTP walkthrough, RUNS times --------------------------------------------------------
for r in $(seq 1 "$RUNS"); do
  log "walkthrough run $r/$RUNS (~2.5 min)"
  timeout 600 bash scripts/sim-walkthrough.sh --keep "$work/walk$r" >"$work/walk$r.log" 2>&1 || log "walkthrough run $r failed: see its log below"
  if [ -f "$work/walk$r/single.jsonl" ]; then
    "$bin" report "$work/walk$r/single.jsonl" "$work/walk$r/cutover.jsonl" --deadline 0.6 --json >"$work/walk$r.json"
  fi
done

# --- load test against two sim-providers, RUNS times --------------------------------------
sed -e 's/127.0.0.1:8001/127.0.0.1:8011/; s/127.0.0.1:8002/127.0.0.1:8012/' examples/sim-walkthrough.toml >"$work/load.toml"
"$bin" sim-provider --profile runpod --port 8011 --time-scale 0.01 >"$work/sim1.log" 2>&1 &
pids+=($!)
"$bin" sim-provider --profile cerebrium --port 8012 --time-scale 0.01 >"$work/sim2.log" 2>&1 &
pids+=($!)
sleep 1
load_cmd="tailcut run --config examples/sim-walkthrough.toml --policy cutover --repeat 1000 --concurrency 1000 --json"
for r in $(seq 1 "$RUNS"); do
  log "load test run $r/$RUNS: 1,000 concurrent cutover requests"
  if [ -x /usr/bin/time ]; then
    timeout 300 /usr/bin/time -v "$bin" run --config "$work/load.toml" --policy cutover --repeat 1000 --concurrency 1000 --json \
      --trace "$work/load$r.jsonl" >"$work/load$r.json" 2>"$work/load$r.time" || true
  else
    timeout 300 "$bin" run --config "$work/load.toml" --policy cutover --repeat 1000 --concurrency 1000 --json \
      --trace "$work/load$r.jsonl" >"$work/load$r.json" 2>/dev/null || true
  fi
  sleep 2
done

# --- contention run, RUNS times -------------------------------------------------------------
for r in $(seq 1 "$RUNS"); do
  log "contend run $r/$RUNS: fft + gemm, same-core (~20 s)"
  timeout 300 "$bin" contend run --agent fft --agent gemm --mode same-core --json >"$work/contend$r.json" 2>/dev/null || true
done

log "done in $(($(date +%s) - started)) s; the table follows on stdout"
python3 - "$work" "$RUNS" <<'PY'
import json, os, re, sys

work, runs = sys.argv[1], int(sys.argv[2])

def load(name):
    p = os.path.join(work, name)
    try:
        with open(p) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

def rng(vals, fmt="{:.0f}"):
    """min–max of the values; `–` stands for a run with no value (no valid result at that rank)."""
    have = [v for v in vals if v is not None]
    if not have:
        return "–"
    lo, hi = min(have), max(have)
    a, b = fmt.format(lo), fmt.format(hi)
    out = a if a == b else f"{a}–{b}"
    missing = len(vals) - len(have)
    return out if missing == 0 else f"{out} (– in {missing} of {len(vals)} runs)"

def runs_label(k):
    return f"{k} run" if k == 1 else f"{k} runs"

rows = []  # (figure, value, command)

demo = load("demo.json") or []
for r in demo:
    p99 = "-" if r["p99_s"] is None else f"{r['p99_s']:.1f}"
    rows.append((f"demo: {r['policy']}", f"p50 {r['p50_s']:.1f} s, p95 {r['p95_s']:.1f} s, p99 {p99} s, miss>60s {r['misses']}/{r['n']}, hedge rate {r['hedge_rate']:.0%}, billed ${r['billed_usd_per_req']:.4f}/req", "tailcut demo"))

rep = load("replay.json") or {}
for row in rep.get("evaluation", []):
    if row["policy"] in ("single:runpod", "hedge:runpod->cerebrium@10s", "cutover:runpod->cerebrium@q2.5s+s8.5s"):
        m = row["miss_counts"].get("60", row["miss_counts"].get("60s"))
        rows.append((f"replay evaluation: {row['policy']}", f"p50 {row['p50_s']:.1f}, p95 {row['p95_s']:.1f}, miss>60 {m}/{row['n']}, active ${row['active_usd_per_req']:.4f}, billed ${row['billed_usd_per_req']:.4f}, hedge rate {row['hedge_rate']:.0%}", "tailcut replay fixtures/gpuhedge-2026-07/moss_rounds.jsonl --calibration-rounds 18"))

live = load("live.json")
if live:
    arms = [a for a in live["arms"] if a["arm"] != "all"]
    n = sum(a["n"] for a in arms)
    hedged = sum(a["hedged"] for a in arms)
    receipts = sum(a["receipts"] for a in arms)
    leaked = sum(a["leaked"] for a in arms)
    acks = [x for a in arms if a.get("ack_ms") for x in (a["ack_ms"]["min"], a["ack_ms"]["max"])]
    rows.append(("reference live traces", f"{n} requests, hedge launched on {hedged}, {receipts} receipts, {leaked} leaked, cancel acks {rng(acks)} ms", "tailcut report fixtures/gpuhedge-2026-07/live_hedge.jsonl"))

with open(os.path.join(work, "conformance.txt")) as f:
    rows.append(("conformance tests", f.read().strip(), "cargo test -p tailcut-providers --test conformance -- --list"))

walk = [load(f"walk{r}.json") for r in range(1, runs + 1)]
walk = [w for w in walk if w]
for arm in ("single:runpod", "cutover:runpod->cerebrium"):
    a = [next((x for x in w["arms"] if x["arm"].startswith(arm)), None) for w in walk]
    a = [x for x in a if x]
    if not a:
        rows.append((f"walkthrough {arm}", "(not measured: see the walkthrough log)", "scripts/sim-walkthrough.sh"))
        continue
    ev = {}
    for x in a:
        for k, v in x["evidence"].items():
            ev.setdefault(k, []).append(v)
    evs = ", ".join(f"{k} {rng(v)}" for k, v in sorted(ev.items())) or "none"
    p95s = rng([x["p95_s"] for x in a], "{:.1f}")
    rows.append((f"walkthrough {arm} ({runs_label(len(a))})",
                 f"n {rng([x['n'] for x in a])}, p50 {rng([x['p50_s'] for x in a], '{:.1f}')} s, p90 {rng([x['p90_s'] for x in a], '{:.1f}')} s, p95 {p95s} s, miss>0.6s {rng([x['misses'] for x in a])}/{a[0]['n']}, receipts {rng([x['receipts'] for x in a])} ({evs}), leaked {rng([x['leaked'] for x in a])}",
                 "scripts/sim-walkthrough.sh; tailcut report single.jsonl cutover.jsonl --deadline 0.6"))

loads, rss = [], []
for r in range(1, runs + 1):
    j = None
    try:
        with open(os.path.join(work, f"load{r}.json")) as f:
            lines = [l for l in f.read().splitlines() if l.startswith("{")]
            j = json.loads(lines[-1]) if lines else None
    except (OSError, ValueError):
        pass
    if j:
        loads.append(j)
    try:
        with open(os.path.join(work, f"load{r}.time")) as f:
            m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", f.read())
            if m:
                rss.append(int(m.group(1)) / 1024)
    except OSError:
        pass
if loads:
    rows.append((f"load test, policy cutover ({runs_label(len(loads))})",
                 f"1,000 concurrent requests in {rng([l['elapsed_s'] for l in loads], '{:.1f}')} s, {rng([l['errors'] for l in loads])} errors, {rng([l['receipts'] for l in loads])} loser receipts, {rng([l['leaked'] for l in loads])} leaked, {rng([l['losers_without_receipt'] for l in loads])} losers without a receipt, peak RSS {rng(rss)} MB, peak open sockets {rng([l['peak_open_sockets'] for l in loads])}",
                 "tailcut run --config examples/sim-walkthrough.toml --policy cutover --repeat 1000 --concurrency 1000 --json (two sim-providers at time scale 0.01; RSS by /usr/bin/time -v)"))
else:
    rows.append(("load test, policy cutover", "(not measured)", "tailcut run … --concurrency 1000"))

cont = [load(f"contend{r}.json") for r in range(1, runs + 1)]
cont = [c for c in cont if c]
if cont:
    def factor(c, agent, key):
        a = next((x for x in c["agents"] if x["agent"] == agent), None)
        d = a and a.get("degradation")
        v = d and d.get(key)
        return v if isinstance(v, (int, float)) else None
    for agent in ("fft", "gemm"):
        rows.append((f"contend same-core, {agent} shared/solo ({runs_label(len(cont))})",
                     f"p50 ×{rng([factor(c, agent, 'p50') for c in cont], '{:.2f}')}, p99 ×{rng([factor(c, agent, 'p99') for c in cont], '{:.2f}')}, throughput ×{rng([factor(c, agent, 'throughput') for c in cont], '{:.2f}')}",
                     "tailcut contend run --agent fft --agent gemm --mode same-core"))

# The README's own rows come from docs/figures.json (scripts/figures.py): record the ones
# this script measures there, then re-render the README's table.
import subprocess

def record(fid, what, value, command):
    subprocess.run([sys.executable, "scripts/figures.py", "record", "--id", fid, "--what", what, "--value", value,
                    "--command", command, "--script", "scripts/readme-figures.sh"], check=True)

ev = {r["policy"]: r for r in rep.get("evaluation", [])}
want = ("single:runpod", "hedge:runpod->cerebrium@10s", "cutover:runpod->cerebrium@q2.5s+s8.5s")
if all(p in ev for p in want):
    def part(p):
        r = ev[p]
        m = r["miss_counts"].get("60", r["miss_counts"].get("60s"))
        return f"{p} {r['p95_s']:.1f} s, {m}/{r['n']}, ${r['active_usd_per_req']:.4f}"
    record("replay-committed-rounds", "hedging on the committed rounds (evaluation split, p95 / misses over 60 s / active $ per request)",
           "; ".join(part(p) for p in want), "tailcut replay fixtures/gpuhedge-2026-07/moss_rounds.jsonl --calibration-rounds 18")
if live:
    confirmed = sum(a.get("evidence", {}).get("confirmed_terminal", 0) for a in arms)
    record("reference-live-traces", "reference live traces",
           f"{n} requests, {hedged} hedges, {confirmed} losers cancelled with confirmed-terminal evidence, {leaked} leaks, acks {rng(acks)} ms",
           "tailcut report fixtures/gpuhedge-2026-07/live_hedge.jsonl")
subprocess.run([sys.executable, "scripts/figures.py", "render"], check=True)

print("| figure | measured | command |")
print("|---|---|---|")
for f, v, c in rows:
    print(f"| {f} | {v} | `{c}` |")
PY
echo
echo "Walkthrough logs of the last run:"
tail -n 25 "$work/walk$RUNS.log" 2>/dev/null || true
