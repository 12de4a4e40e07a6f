#!/usr/bin/env python3
"""Runs every scenario family over several seeds and checks issue 18's must-shows.

Usage: scripts/scenario-table.py [--bin target/debug/tailcut] [--seeds 1,2,3,4,5] [--requests 4000] [--auto MODE]

Per family it prints, averaged over the seeds, auto, tuned:, the best fixed row by p95
and the cheapest fixed row meeting the miss target, then per seed the three checks:
  meets   auto's miss <= 5 % whenever some fixed policy's is;
  undom   no fixed policy beats auto by more than 10 % on both p95 and active cost;
  tuned   (cadence, degrade, correlated, outage) auto beats tuned: by >= 15 % on p95 or
          active cost while losing no more than 5 % on the other.
"""
import argparse, json, subprocess, statistics

FAMILIES = ["steady-cold", "cadence", "degrade", "correlated", "outage", "price", "straggler"]
TUNED_FAMILIES = {"cadence", "degrade", "correlated", "outage"}


def run(binary, name, seed, requests, auto):
    extra = ["--auto", auto] if auto else []
    out = subprocess.run([binary, "scenario", "run", name, "--seed", str(seed), "--requests", str(requests), "--json", *extra],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def p95(r):
    return r["p95_s"] if r["p95_s"] is not None else float("inf")


def checks(res):
    rows = res["rows"]
    auto = next(r for r in rows if r["policy"].startswith("auto:"))
    tuned = next(r for r in rows if r["policy"].startswith("tuned:"))
    fixed = [r for r in rows if not r["policy"].startswith(("auto:", "adaptive:", "singler:", "tuned:"))]
    meets = auto["miss_rate"] <= 0.05 or not any(r["miss_rate"] <= 0.05 for r in fixed)
    dom = [r["policy"] for r in fixed if p95(r) < 0.9 * p95(auto) and r["active_usd_per_req"] < 0.9 * auto["active_usd_per_req"]]
    gp = 1 - p95(auto) / p95(tuned) if p95(tuned) > 0 else 0.0
    gc = 1 - auto["active_usd_per_req"] / tuned["active_usd_per_req"] if tuned["active_usd_per_req"] > 0 else 0.0
    beats = (gp >= 0.15 and gc >= -0.05) or (gc >= 0.15 and gp >= -0.05)
    return auto, tuned, fixed, meets, dom, gp, gc, beats


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/debug/tailcut")
    ap.add_argument("--seeds", default="1,2,3,4,5")
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--auto", help="how auto learns (`tailcut scenario run --auto`: model, guarded, paired); default: the command's")
    a = ap.parse_args()
    seeds = [int(s) for s in a.seeds.split(",")]
    print("| scenario | seed | auto p95 s | auto active $ | auto miss | tuned: policy | tuned p95 s | tuned active $ | tuned miss | p95 gain | cost gain | meets | undominated | beats tuned |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    totals = {}
    for name in FAMILIES:
        for seed in seeds:
            res = run(a.bin, name, seed, a.requests, a.auto)
            auto, tuned, fixed, meets, dom, gp, gc, beats = checks(res)
            need = name in TUNED_FAMILIES
            t = totals.setdefault(name, [0, 0, 0, 0, []])
            t[0] += meets; t[1] += not dom; t[2] += beats; t[3] += 1; t[4].append((gp, gc))
            print(f"| {name} | {seed} | {p95(auto):.1f} | {auto['active_usd_per_req']:.5f} | {auto['miss_rate']*100:.1f}% | "
                  f"{tuned['policy'][6:]} | {p95(tuned):.1f} | {tuned['active_usd_per_req']:.5f} | {tuned['miss_rate']*100:.1f}% | "
                  f"{gp*100:+.0f}% | {gc*100:+.0f}% | {'yes' if meets else 'NO'} | "
                  f"{'yes' if not dom else 'NO: ' + ', '.join(dom[:2])} | {('yes' if beats else 'NO') if need else ('(yes)' if beats else '(no)')} |")
    print()
    print("| scenario | meets target | undominated (10 %) | beats tuned: (15 %/5 %) | mean p95 gain | mean cost gain |")
    print("|---|---|---|---|---|---|")
    for name, (m, u, b, n, g) in totals.items():
        need = "" if name in TUNED_FAMILIES else " (not required)"
        print(f"| {name} | {m}/{n} | {u}/{n} | {b}/{n}{need} | {statistics.mean(x for x, _ in g)*100:+.0f}% | {statistics.mean(y for _, y in g)*100:+.0f}% |")


if __name__ == "__main__":
    main()
