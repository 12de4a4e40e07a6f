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
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

REPLY = json.dumps({
    "id": "x", "object": "chat.completion", "created": 0, "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}).encode()


def sse_body():
    events = [
        {"choices": [{"index": 0, "delta": {"role": "assistant"}}]},
        {"choices": [{"index": 0, "delta": {"content": "ok"}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    out = b"".join(b"data: " + json.dumps(dict(e, id="x", object="chat.completion.chunk", model="m")).encode() + b"\n\n" for e in events)
    return out + b"data: [DONE]\n\n"


SSE = sse_body()


class World:
    """Whether the world has flipped (shared by both providers)."""

    def __init__(self):
        self.flipped = False


class Provider:
    """A keep-alive HTTP/1.1 server answering POST .../chat/completions after a delay
    that depends on the world: `before(rng)` / `after(rng)` give the seconds to wait
    before the response headers."""

    def __init__(self, name, world, before, after, seed):
        self.name = name
        self.world = world
        self.before = before
        self.after = after
        self.rng = random.Random(seed)
        self.requests = 0
        self.stalled = 0

    async def handle(self, reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                m = re.search(rb"(?i)content-length:\s*(\d+)", head)
                body = await reader.readexactly(int(m.group(1))) if m else b""
                self.requests += 1
                wait = (self.after if self.world.flipped else self.before)(self.rng)
                if wait >= 1.0:
                    self.stalled += 1
                if wait > 0:
                    await asyncio.sleep(wait)
                stream = b'"stream":true' in body.replace(b" ", b"")
                if stream:
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n" % len(SSE) + SSE)
                else:
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(REPLY) + REPLY)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:
            # Shutting down with the gateway's kept-alive connections still open.
            pass
        finally:
            writer.close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


DEFAULT_POLICY = """kind = "auto"
providers = ["flaky", "steady"]
deadline_ms = 250
target_miss = 0.05"""

CONFIG = """
[gateway]
listen = "127.0.0.1:{port}"
auth = "none"
store = ":memory:"
{gateway_extra}
[budget]
ledger = ":memory:"
[trace]
path = "{trace}"
[providers.flaky]
adapter = "openai"
base_url = "http://127.0.0.1:{flaky}/v1"
rate_usd_per_s = 0.001
expected_run_s = 1
[providers.steady]
adapter = "openai"
base_url = "http://127.0.0.1:{steady}/v1"
rate_usd_per_s = 0.001
expected_run_s = 1
[policies.chat]
{policy}
[routes.chat]
kind = "openai"
models = ["m"]
policy = "chat"
"""


async def one_request(port, stream):
    """(seconds, winner) of one request; seconds is None when it failed."""
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": stream}).encode()
    t = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                     b"connection: close\r\ncontent-length: %d\r\n\r\n" % len(body) + body)
        await writer.drain()
        if stream:
            buf = b""
            while b'"content":"ok"' not in buf.replace(b" ", b""):
                chunk = await reader.read(65536)
                if not chunk:
                    return None, None
                buf += chunk
            took = time.perf_counter() - t
            await reader.read()
        else:
            buf = await reader.read()
            took = time.perf_counter() - t
        if not buf.startswith(b"HTTP/1.1 200"):
            return None, None
        w = re.search(rb"(?im)^x-tailcut-winner:\s*(\S+)", buf)
        return took, (w.group(1).decode() if w else "?")
    finally:
        writer.close()


async def load(port, rate, phase_s, phases, stream, world):
    """Sends every phase's requests on an open loop; flips `world` when half the phases
    are over. Returns one list of (seconds | None, winner) per phase."""
    tasks = [[] for _ in range(phases)]
    start = time.perf_counter()
    per_phase = int(rate * phase_s)
    for ph in range(phases):
        if ph == phases // 2:
            world.flipped = True
        for i in range(per_phase):
            delay = start + (ph * per_phase + i) / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks[ph].append(asyncio.create_task(asyncio.wait_for(one_request(port, stream), 30)))
    out = []
    for ts in tasks:
        got = []
        for t in ts:
            try:
                got.append(await t)
            except (OSError, asyncio.TimeoutError):
                got.append((None, None))
        out.append(got)
    return out


def quantile(xs, q):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    return xs[min(len(xs) - 1, max(0, int(-(-q * len(xs) // 1)) - 1))]


def scrape(port):
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    keep = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, _, value = line.rpartition(" ")
        if name.startswith(("tailcut_attempts_total", "tailcut_hedges_total", "tailcut_hedges_denied_total", "tailcut_wins_total",
                            "tailcut_learned_shifts")):
            keep[name] = float(value)
    return keep


async def run_mode(args, mode, policy):
    """One mode against a fresh gateway and a fresh (unflipped) world."""
    world = World()
    stall = args.stall_s
    flaky = Provider("flaky", world, lambda r: stall if r.random() < args.stall_p else 0.002, lambda r: 0.002, args.seed)
    steady = Provider("steady", world, lambda r: 0.120, lambda r: 0.400, args.seed + 1)
    servers, ports = [], {}
    for p in (flaky, steady):
        srv = await asyncio.start_server(p.handle, "127.0.0.1", 0, backlog=4096)
        servers.append(srv)
        ports[p.name] = srv.sockets[0].getsockname()[1]
    tmp = tempfile.mkdtemp(prefix="tailcut-flip-")
    gw_port = free_port()
    cfg = CONFIG.format(port=gw_port, trace=os.path.join(tmp, "trace.jsonl"), flaky=ports["flaky"], steady=ports["steady"],
                        policy=policy, gateway_extra=args.gateway_extra)
    path = os.path.join(tmp, "gateway.toml")
    with open(path, "w") as f:
        f.write(cfg)
    log = open(os.path.join(tmp, "gateway.log"), "w")
    gw = subprocess.Popen([args.tailcut, "serve", "--config", path], stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", gw_port), 0.2).close()
                break
            except OSError:
                if gw.poll() is not None:
                    sys.exit(f"tailcut serve exited: see {log.name}")
                await asyncio.sleep(0.1)
        lat = await load(gw_port, args.rate, args.phase_s, args.phases, mode == "stream", world)
        await asyncio.sleep(args.stall_s + 0.5)
        counters = scrape(gw_port)
    finally:
        gw.send_signal(signal.SIGTERM)
        try:
            gw.wait(10)
        except subprocess.TimeoutExpired:
            gw.kill()
        for s in servers:
            s.close()
    phases = []
    for ph, got in enumerate(lat):
        ok = [x for x, _ in got if x is not None]
        wins = {}
        for x, w in got:
            if x is not None:
                wins[w] = wins.get(w, 0) + 1
        phases.append({
            "phase": ph + 1, "world": "flipped" if ph >= args.phases // 2 else "before",
            "requests": len(got), "errors": len(got) - len(ok),
            "over_bar": sum(1 for x in ok if x * 1000 > args.bar_ms),
            "p50_ms": round(quantile(ok, 0.5) * 1000, 1), "p95_ms": round(quantile(ok, 0.95) * 1000, 1),
            "p99_ms": round(quantile(ok, 0.99) * 1000, 1), "wins": dict(sorted(wins.items())),
        })
    return {"phases": phases, "counters": counters, "trace": os.path.join(tmp, "trace.jsonl"),
            "stalled_flaky": flaky.stalled}


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
