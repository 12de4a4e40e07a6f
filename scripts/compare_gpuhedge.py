#!/usr/bin/env python3
"""Cross-check `tailcut replay --json` against GPUHedge's own replay on the same file.

Usage: compare_gpuhedge.py ROUNDS.jsonl TAILCUT_JSON [CALIBRATION_ROUNDS]
Needs `pip install gpuhedge`. Compares every policy on every split after GPUHedge's own
output rounding (to_record) and prints a one-line verdict; exits 1 on any difference.
"""
import json
import math
import sys

from gpuhedge.benchmark.replay import load_rounds, standard_policy_sweep
from gpuhedge.config import load_config


def main() -> int:
    rounds_path, ours_path = sys.argv[1], sys.argv[2]
    k = int(sys.argv[3]) if len(sys.argv) > 3 else None
    cfg = load_config(None)
    rounds = load_rounds(rounds_path)
    ours = json.load(open(ours_path))
    splits = {"all": rounds}
    if k is not None:
        splits["calibration"] = [r for r in rounds if r.round_id <= k]
        splits["evaluation"] = [r for r in rounds if r.round_id > k]
    checked, diffs = 0, []
    for name, subset in splits.items():
        theirs = [r.to_record() for r in standard_policy_sweep(cfg, subset)]
        mine = ours[name]
        if [t["policy"] for t in theirs] != [m["policy"] for m in mine]:
            diffs.append(f"{name}: policy lists differ")
            continue
        for t, m in zip(theirs, mine):
            r1 = lambda x: None if x is None else round(x, 1)
            pairs = [
                ("n", t["n"], m["n"]),
                ("p50_s", t["p50_s"], r1(m["p50_s"])),
                ("p95_s", t["p95_s"], r1(m["p95_s"])),
                ("max_s", t["max_s"], r1(m["max_s"])),
                ("mean_cost_usd", t["mean_cost_usd"], round(m["active_usd_per_req"], 4)),
                ("mean_billed_usd", t["mean_billed_usd"], round(m["billed_usd_per_req"], 4)),
                ("hedge_rate", t["hedge_rate"], round(m["hedge_rate"], 3)),
            ]
            pairs += [(f"miss_{d}", v, m["miss_counts"][str(d)]) for d, v in t["miss_counts"].items()]
            for field, a, b in pairs:
                if a != b:
                    diffs.append(f"{name} {t['policy']} {field}: gpuhedge {a} vs tailcut {b}")
            checked += 1
    print(f"cross-check vs gpuhedge: {checked} policy records compared over {len(splits)} split(s), {len(diffs)} differences")
    for d in diffs[:20]:
        print("  " + d)
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
