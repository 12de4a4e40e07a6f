#!/usr/bin/env bash
# Replay benchmark: tailcut on 1,000,000 synthetic rounds (time, peak RSS, rounds/s),
# and tailcut vs the reference tool (GPUHedge 0.1.0) on the same 20,000-round input,
# both doing the same work (matrix + per-provider table + three split sweeps).
#
# Usage: scripts/bench-replay.sh [VENV]   (VENV defaults to .bench-venv; created with
# `pip install gpuhedge` if it has no gpuhedge).
#        scripts/bench-replay.sh --learned-only [BIN]   only the 1,000,000-round
# `replay --learned` (issue 28: < 10 s and < 1 GiB), with BIN (default: the dist build).
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# `replay --learned` on 1,000,000 rounds: wall, CPU (user + sys: the replay is one
# thread, so parallelism hides nothing) and peak RSS.
learned_1m() {
  echo "== tailcut replay --learned, 1,000,000 rounds (auto with its experts, adaptive, singler)"
  /usr/bin/time -v "$bin" replay "$work/r1m.jsonl" --learned >"$work/outl.txt" 2>"$work/timel.txt"
  awk -F': ' '/Elapsed \(wall clock\)/ {w=$2} /User time/ {u=$2} /System time/ {s=$2} /Maximum resident/ {r=$2}
    END {printf "wall %s, user %.2f s + sys %.2f s = CPU %.2f s, peak RSS %d MB\n", w, u, s, u + s, r / 1024}' "$work/timel.txt"
}

if [ "${1:-}" = "--learned-only" ]; then
  bin="${2:-target/dist/tailcut}"
  [ -n "${2:-}" ] || cargo build --profile dist -p tailcut-cli >/dev/null 2>&1
  "$bin" synth --rounds 1000000 --seed 7 -o "$work/r1m.jsonl"
  learned_1m
  exit 0
fi
venv="${1:-.bench-venv}"

cargo build --profile dist -p tailcut-cli >/dev/null 2>&1
bin=target/dist/tailcut

echo "== synth"
$bin synth --rounds 1000000 --seed 7 -o "$work/r1m.jsonl"
$bin synth --rounds 20000 --seed 11 -o "$work/r20k.jsonl"
ls -la "$work"/*.jsonl | awk '{print $5, $9}'

echo "== tailcut replay, 1,000,000 rounds, full standard sweep (55 policies)"
/usr/bin/time -v $bin replay "$work/r1m.jsonl" >"$work/out1m.txt" 2>"$work/time1m.txt"
wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$work/time1m.txt")
rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$work/time1m.txt")
secs=$(echo "$wall" | awk -F: '{ if (NF == 3) print $1*3600 + $2*60 + $3; else print $1*60 + $2 }')
echo "wall ${wall} (${secs} s), peak RSS ${rss} KiB, $(awk -v s="$secs" 'BEGIN { printf "%.0f", 1000000 / s }') rounds/s"

echo "== tailcut replay, 1,000,000 rounds, with --calibration-rounds 18 (three splits, 165 policy evaluations)"
/usr/bin/time -v $bin replay "$work/r1m.jsonl" --calibration-rounds 18 >/dev/null 2>"$work/time1m3.txt"
grep -E "Elapsed|Maximum resident" "$work/time1m3.txt"

learned_1m

if [ ! -x "$venv/bin/gpuhedge" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q gpuhedge
fi

echo "== same 20,000-round input: tailcut vs gpuhedge (matrix + provider table + 3 splits)"
t0=$(date +%s.%N)
$bin replay "$work/r20k.jsonl" --calibration-rounds 18 --matrix >"$work/tc20k.txt"
t1=$(date +%s.%N)
"$venv/bin/gpuhedge" replay "$work/r20k.jsonl" >"$work/gh20k.txt" 2>&1
t2=$(date +%s.%N)
tc=$(echo "$t1 - $t0" | bc -l)
gh=$(echo "$t2 - $t1" | bc -l)
printf "tailcut %.3f s, gpuhedge %.3f s, ratio %.0fx\n" "$tc" "$gh" "$(echo "$gh / $tc" | bc -l)"

echo "== cross-check the numbers on the 20,000-round input"
$bin replay "$work/r20k.jsonl" --calibration-rounds 18 --json >"$work/tc20k.json"
"$venv/bin/python" scripts/compare_gpuhedge.py "$work/r20k.jsonl" "$work/tc20k.json" 18

echo "== recording the README's figure (docs/figures.json)"
# The load average goes with the figure: wall times on a busy 2-core machine are not
# those of an idle one (peak RSS is).
load=$(cut -d' ' -f1 /proc/loadavg)
value=$(python3 -c 'import sys; s, rss, ratio, load = float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
print(f"1,000,000 rounds, full sweep: {s:.2f} s, {rss // 1024} MB peak RSS (~{1e6 / s:,.0f} rounds/s); {ratio:.0f}x faster than `gpuhedge replay` on 20,000 rounds (load average {load} at the end of the run)")' \
  "$secs" "$rss" "$(echo "$gh / $tc" | bc -l)" "$load")
python3 scripts/figures.py record --id replay-speed --what "replay speed" --value "$value" \
  --command "bash scripts/bench-replay.sh" --script scripts/bench-replay.sh
python3 scripts/figures.py render
