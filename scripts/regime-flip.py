#!/usr/bin/env python3
"""A learned route whose world flips mid-run, behind `tailcut serve` (issue 28's gateway
experiment).

Starts two OpenAI-compatible providers on 127.0.0.1 in this process:

  flaky   answers in 2 ms, but stalls 3 s before its response headers on a seeded random
          20 % of requests; after the flip it is healed (always 2 ms);
  steady  answers in 120 ms; after the flip it is slowed to 400 ms.

Then, per mode (whole replies, then streams), starts a fresh `tailcut serve` (the binary
given by --tailcut) with one chat route whose policy is the TOML given by --policy
(default: `auto` over `flaky` then `steady`, a 250 ms deadline, a 5 % miss target and
the default extra load; the gateway's hedge-load cap at its default), sends RATE
requests per second on an open loop (each request on its own connection, so a slow one
never delays the next) for PHASES phases of PHASE_S seconds, and flips the world when
half of the phases are over. Per phase it prints requests, errors, p50/p95/p99 of the
client-measured latency (streams: time to the first content token), how many replies
each provider won (the `x-tailcut-winner` header), and how many requests were over the
deadline; then the gateway's counters from /metrics per mode (attempts, wins, hedges,
hedges denied, and the shifts each learned model's detector found).

Usage:
  scripts/regime-flip.py --tailcut target/release/tailcut [--rate 20] [--phase-s 20]
      [--phases 4] [--policy TOML] [--modes whole,stream] [--json]

Exit status 1 when a phase's p95 is over --bar-ms (default 250), so it can gate a run.
Stops only the gateways it started, by pid.
"""

import argparse
import asyncio
import json
import os
import sys
import tempfile

from loopback_openai import Provider, gateway, latency_summary, open_loop, route_config, scrape


class World:
    """Whether the world has flipped (shared by both providers)."""

    def __init__(self):
        self.flipped = False


DEFAULT_POLICY = """kind = "auto"
providers = ["flaky", "steady"]
deadline_ms = 250
target_miss = 0.05"""



async def run_mode(args, mode, policy):
    """One mode against a fresh gateway and a fresh (unflipped) world."""
    world = World()
    stall = args.stall_s
    flaky = Provider("flaky", lambda r: 0.002 if world.flipped else (stall if r.random() < args.stall_p else 0.002), args.seed)
    steady = Provider("steady", lambda r: 0.400 if world.flipped else 0.120, args.seed + 1)
    for p in (flaky, steady):
        await p.start()
    tmp = tempfile.mkdtemp(prefix="tailcut-flip-")
    trace = os.path.join(tmp, "trace.jsonl")
    cfg = route_config([flaky.toml(), steady.toml()], policy, trace, gateway_extra=args.gateway_extra)
    per_phase = int(args.rate * args.phase_s)
    flip_at = (args.phases // 2) * per_phase

    def flip(i):
        if i == flip_at:
            world.flipped = True

    try:
        async with gateway(args.tailcut, cfg, tmp) as port:
            got = await open_loop(port, args.rate, per_phase * args.phases, mode == "stream", flip)
            await asyncio.sleep(args.stall_s + 0.5)
            counters = scrape(port)
    finally:
        flaky.close()
        steady.close()
    phases = []
    for ph in range(args.phases):
        part = got[ph * per_phase:(ph + 1) * per_phase]
        ok = [x for x, _ in part if x is not None]
        wins = {}
        for x, w in part:
            if x is not None:
                wins[w] = wins.get(w, 0) + 1
        phases.append({
            "phase": ph + 1, "world": "flipped" if ph >= args.phases // 2 else "before",
            "requests": len(part), "errors": len(part) - len(ok),
            "over_bar": sum(1 for x in ok if x * 1000 > args.bar_ms),
            **latency_summary(ok), "wins": dict(sorted(wins.items())),
        })
    return {"phases": phases, "counters": counters, "trace": trace, "stalled_flaky": flaky.stalled}


async def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tailcut", default="target/release/tailcut", help="the tailcut binary")
    ap.add_argument("--policy", default=DEFAULT_POLICY, help="the body of [policies.chat], TOML (default: auto, 250 ms, 5 %%)")
    ap.add_argument("--gateway-extra", default="", help="extra TOML lines for [gateway] (e.g. the hedge-load cap)")
    ap.add_argument("--rate", type=float, default=20.0, help="requests per second (default 20)")
    ap.add_argument("--phase-s", type=float, default=20.0, help="seconds per phase (default 20)")
    ap.add_argument("--phases", type=int, default=4, help="phases per mode; the world flips after half of them (default 4)")
    ap.add_argument("--stall-s", type=float, default=3.0, help="flaky's stall before headers, seconds (default 3)")
    ap.add_argument("--stall-p", type=float, default=0.2, help="share of flaky's stalled requests before the flip (default 0.2)")
    ap.add_argument("--bar-ms", type=float, default=250.0, help="the p95 every phase must keep (default 250)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--modes", default="whole,stream", help="whole, stream or both (default both)")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    args = ap.parse_args()
    if args.phases < 2 or args.rate <= 0 or args.phase_s <= 0:
        sys.exit("--phases must be at least 2, --rate and --phase-s positive")

    results = {"policy": args.policy, "rate": args.rate, "phase_s": args.phase_s, "phases": args.phases,
               "flip_after_phase": args.phases // 2, "bar_ms": args.bar_ms, "modes": {}}
    for mode in args.modes.split(","):
        results["modes"][mode] = await run_mode(args, mode, args.policy)
    worst = max(p["p95_ms"] for r in results["modes"].values() for p in r["phases"])
    results["worst_p95_ms"] = worst
    results["met"] = worst <= args.bar_ms
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        print(f"policy: {' '.join(args.policy.split())}")
        print(f"{args.rate:g} req/s, {args.phases} phases of {args.phase_s:g} s, the world flips after phase {args.phases // 2}")
        print(f"{'mode':<7}{'phase':>6}{'world':>9}{'requests':>9}{'errors':>7}{'>bar':>6}{'p50 ms':>8}{'p95 ms':>8}{'p99 ms':>8}  wins")
        for mode, r in results["modes"].items():
            for p in r["phases"]:
                wins = " ".join(f"{k} {v}" for k, v in p["wins"].items())
                print(f"{mode:<7}{p['phase']:>6}{p['world']:>9}{p['requests']:>9}{p['errors']:>7}{p['over_bar']:>6}"
                      f"{p['p50_ms']:>8}{p['p95_ms']:>8}{p['p99_ms']:>8}  {wins}")
            for k, v in sorted(r["counters"].items()):
                if v:  # every counter is in --json; the table skips the zeros
                    print(f"    {k} {v:g}")
        print(f"worst phase p95 {worst} ms: {'met' if results['met'] else 'NOT met'} (bar {args.bar_ms:g} ms)")
    sys.exit(0 if results["met"] else 1)


if __name__ == "__main__":
    asyncio.run(main())
