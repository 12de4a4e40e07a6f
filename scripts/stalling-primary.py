#!/usr/bin/env python3
"""A stalling primary behind `tailcut serve` (issue 19's gateway experiment).

Starts two OpenAI-compatible providers on 127.0.0.1 in this process:

  stally  stalls STALL seconds before its response headers on a random STALL_P share of
          requests (seeded), otherwise answers at once;
  fast    always answers at once.

Then starts `tailcut serve` (the binary given by --tailcut) with one chat route whose
policy is the TOML given by --policy (providers `stally` then `fast`, so a fixed policy's
primary is the stalling one), sends RATE requests per second for DURATION seconds on an
open loop (each request on its own connection, so a slow one never delays the next),
whole replies and then streams, and prints per mode: requests, errors, p50/p95/p99 of
the client-measured latency (streams: time to the first content token), and the
gateway's own counters from /metrics (attempts per provider, hedges, hedges denied).

Usage:
  scripts/stalling-primary.py --tailcut target/release/tailcut \
      --policy 'kind = "hedge"
primary = "stally"
hedge = "fast"
delay_ms = 200' [--rate 20] [--duration 30] [--json]

Stops only the gateway it started, by pid.
"""

import argparse
import asyncio
import json
import os
import tempfile

from loopback_openai import Provider, gateway, latency_summary, open_loop, route_config, scrape



async def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tailcut", default="target/release/tailcut", help="the tailcut binary")
    ap.add_argument("--policy", required=True, help="the body of [policies.chat], TOML")
    ap.add_argument("--route-extra", default="", help="extra TOML lines for [routes.chat]")
    ap.add_argument("--gateway-extra", default="", help="extra TOML lines for [gateway]")
    ap.add_argument("--rate", type=float, default=20.0, help="requests per second (default 20)")
    ap.add_argument("--duration", type=float, default=30.0, help="seconds per mode (default 30)")
    ap.add_argument("--stall", type=float, default=2.0, help="stall before headers, seconds (default 2)")
    ap.add_argument("--stall-p", type=float, default=0.2, help="share of stalled requests (default 0.2)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--modes", default="whole,stream", help="whole, stream or both (default both)")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    args = ap.parse_args()

    stall, stall_p = args.stall, args.stall_p
    stally = await Provider("stally", lambda r: stall if stall_p > 0 and r.random() < stall_p else 0, args.seed,
                            stall_at_s=min(stall, 1.0) or 1.0).start()
    fast = await Provider("fast", lambda r: 0, args.seed).start()
    tmp = tempfile.mkdtemp(prefix="tailcut-stall-")
    cfg = route_config([stally.toml(), fast.toml()], args.policy, os.path.join(tmp, "trace.jsonl"),
                       gateway_extra=args.gateway_extra, route_extra=args.route_extra)
    results = {"policy": args.policy, "rate": args.rate, "duration_s": args.duration, "stall_s": args.stall,
               "stall_p": args.stall_p, "modes": {}}
    try:
        async with gateway(args.tailcut, cfg, tmp) as port:
            for mode in args.modes.split(","):
                before = scrape(port)
                stalled_before = stally.stalled
                got = await open_loop(port, args.rate, int(args.rate * args.duration), mode == "stream")
                await asyncio.sleep(args.stall + 0.5)
                after = scrape(port)
                ok = [x for x, _ in got if x is not None]
                delta = {k: after[k] - before.get(k, 0) for k in after if after[k] - before.get(k, 0)}
                results["modes"][mode] = {
                    "requests": len(got), "errors": len(got) - len(ok), "stalled_primary": stally.stalled - stalled_before,
                    **latency_summary(ok), "counters": delta,
                }
    finally:
        stally.close()
        fast.close()
    if args.json:
        print(json.dumps(results, indent=1))
        return
    print(f"policy: {' '.join(args.policy.split())}")
    print(f"{'mode':<7}{'requests':>9}{'errors':>7}{'stalled':>8}{'p50 ms':>8}{'p95 ms':>8}{'p99 ms':>8}")
    for mode, r in results["modes"].items():
        print(f"{mode:<7}{r['requests']:>9}{r['errors']:>7}{r['stalled_primary']:>8}{r['p50_ms']:>8}{r['p95_ms']:>8}{r['p99_ms']:>8}")
        for k, v in sorted(r["counters"].items()):
            print(f"    {k} {v:g}")


if __name__ == "__main__":
    asyncio.run(main())
