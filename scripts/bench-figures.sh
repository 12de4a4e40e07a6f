#!/usr/bin/env bash
# Re-measures the README's criterion figures and records them in docs/figures.json:
#   engine-overhead    cargo bench -p tailcut-core --bench engine   (races per second)
#   learning-cost      cargo bench -p tailcut-model --bench learn   (µs per update + decision)
# then re-renders the README's table (scripts/figures.py render). Prints criterion's own
# lines too. The first run compiles every crate in the bench profile (fat LTO), which
# takes minutes; later runs reuse it.
#
# Usage: scripts/bench-figures.sh [engine|learn]...   (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
which=("$@")
[ ${#which[@]} -eq 0 ] && which=(engine learn)

ns_of() {
  # The ns/iter of one benchmark in criterion's `--output-format bencher` lines
  # ("test NAME ... bench: N ns/iter (+/- M)"; names may hold spaces).
  python3 - "$1" "$2" <<'PY'
import re, sys
for line in open(sys.argv[1]):
    m = re.match(r"test (.+) \.\.\. bench:\s+([\d,]+) ns/iter", line)
    if m and m.group(1) == sys.argv[2]:
        print(m.group(2).replace(",", ""))
        break
else:
    sys.exit(f"no benchmark named {sys.argv[2]!r} in {sys.argv[1]}")
PY
}

for w in "${which[@]}"; do
  case "$w" in
    engine)
      echo "== cargo bench -p tailcut-core --bench engine" >&2
      cargo bench -q -p tailcut-core --bench engine -- --output-format bencher 2>/dev/null | tee "$work/engine.txt"
      # One iteration is a batch of 1,000 races (benches/engine.rs: BATCH).
      rate() { python3 -c 'import sys; print(f"{1000 / (float(sys.argv[1]) / 1e9):,.0f}")' "$(ns_of "$work/engine.txt" "engine/$1")"; }
      single=$(rate single)
      hedged=$(rate hedged_race_invalid_primary)
      raced=$(rate race_with_loser_cancel)
      python3 scripts/figures.py record --id engine-overhead --what "engine overhead" \
        --value "$single single / $hedged hedged / $raced raced-and-cancelled races/s (load average $(cut -d' ' -f1 /proc/loadavg) at the end of the run)" \
        --command "cargo bench -p tailcut-core --bench engine" --script scripts/bench-figures.sh
      ;;
    learn)
      echo "== cargo bench -p tailcut-model --bench learn" >&2
      cargo bench -q -p tailcut-model --bench learn -- --output-format bencher 2>/dev/null | tee "$work/learn.txt"
      us() { awk -v ns="$(ns_of "$work/learn.txt" "$1")" 'BEGIN { printf "%.2f", ns / 1000 }'; }
      three=$(us "update (3 attempts) + auto decision")
      one=$(us "update (1 attempt) + auto decision")
      censored=$(us "update (3 attempts, 2 censored) + auto decision")
      worst=$(us "auto decision with a table refresh (worst case)")
      python3 scripts/figures.py record --id learning-cost --after learned-policies --what "cost of learning (model update + \`auto\` decision, per request)" \
        --value "${one} µs with 1 attempt, ${three} µs with 3 attempts, ${censored} µs with two cancelled (censored) losers; ${worst} µs for a decision that refreshes its tables (worst case; load average $(cut -d' ' -f1 /proc/loadavg) at the end of the run)" \
        --command "cargo bench -p tailcut-model --bench learn" --script scripts/bench-figures.sh
      ;;
    *) echo "unknown benchmark group '$w' (expected engine or learn)" >&2; exit 2 ;;
  esac
done
python3 scripts/figures.py render
