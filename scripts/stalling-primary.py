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


class Provider:
    """A keep-alive HTTP/1.1 server answering POST .../chat/completions."""

    def __init__(self, name, stall_s, stall_p, seed):
        self.name = name
        self.stall_s = stall_s
        self.stall_p = stall_p
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
                if self.stall_p > 0 and self.rng.random() < self.stall_p:
                    self.stalled += 1
                    await asyncio.sleep(self.stall_s)
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


CONFIG = """
[gateway]
auth = "none"
store = ":memory:"
[budget]
ledger = ":memory:"
[trace]
path = "{trace}"
[providers.stally]
adapter = "openai"
base_url = "http://127.0.0.1:{stally}/v1"
rate_usd_per_s = 0.001
expected_run_s = 1
[providers.fast]
adapter = "openai"
base_url = "http://127.0.0.1:{fast}/v1"
rate_usd_per_s = 0.001
expected_run_s = 1
[policies.chat]
{policy}
[routes.chat]
kind = "openai"
models = ["m"]
policy = "chat"
{route_extra}
"""


async def one_request(port, stream):
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
                    return None
                buf += chunk
            took = time.perf_counter() - t
            await reader.read()
            return took if buf.startswith(b"HTTP/1.1 200") else None
        data = await reader.read()
        took = time.perf_counter() - t
        return took if data.startswith(b"HTTP/1.1 200") else None
    finally:
        writer.close()


async def load(port, rate, duration, stream):
    tasks = []
    start = time.perf_counter()
    for i in range(int(rate * duration)):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(asyncio.wait_for(one_request(port, stream), 30)))
    out = []
    for t in tasks:
        try:
            out.append(await t)
        except (OSError, asyncio.TimeoutError):
            out.append(None)
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
    counters = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, _, value = line.rpartition(" ")
        counters[name] = float(value)
    return counters


def summarise(counters):
    keep = {}
    for k, v in counters.items():
        if k.startswith(("tailcut_attempts_total", "tailcut_hedges_total", "tailcut_hedges_denied_total", "tailcut_wins_total")):
            keep[k] = v
    return keep


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

    stally = Provider("stally", args.stall, args.stall_p, args.seed)
    fast = Provider("fast", 0, 0, args.seed)
    servers = []
    ports = {}
    for p in (stally, fast):
        srv = await asyncio.start_server(p.handle, "127.0.0.1", 0, backlog=4096)
        servers.append(srv)
        ports[p.name] = srv.sockets[0].getsockname()[1]

    tmp = tempfile.mkdtemp(prefix="tailcut-stall-")
    gw_port = free_port()
    cfg = CONFIG.format(trace=os.path.join(tmp, "trace.jsonl"), stally=ports["stally"], fast=ports["fast"],
                        policy=args.policy, route_extra=args.route_extra)
    cfg = cfg.replace('[gateway]\n', f'[gateway]\nlisten = "127.0.0.1:{gw_port}"\n{args.gateway_extra}\n', 1)
    path = os.path.join(tmp, "gateway.toml")
    with open(path, "w") as f:
        f.write(cfg)
    log = open(os.path.join(tmp, "gateway.log"), "w")
    gw = subprocess.Popen([args.tailcut, "serve", "--config", path], stdout=log, stderr=subprocess.STDOUT)
    results = {"policy": args.policy, "rate": args.rate, "duration_s": args.duration, "stall_s": args.stall,
               "stall_p": args.stall_p, "modes": {}}
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", gw_port), 0.2).close()
                break
            except OSError:
                if gw.poll() is not None:
                    sys.exit(f"tailcut serve exited: see {log.name}")
                await asyncio.sleep(0.1)
        for mode in args.modes.split(","):
            before = summarise(scrape(gw_port))
            stalled_before = stally.stalled
            lat = await load(gw_port, args.rate, args.duration, mode == "stream")
            await asyncio.sleep(args.stall + 0.5)
            after = summarise(scrape(gw_port))
            ok = [x for x in lat if x is not None]
            delta = {k: after[k] - before.get(k, 0) for k in after if after[k] - before.get(k, 0)}
            results["modes"][mode] = {
                "requests": len(lat), "errors": len(lat) - len(ok), "stalled_primary": stally.stalled - stalled_before,
                "p50_ms": round(quantile(ok, 0.5) * 1000, 1), "p95_ms": round(quantile(ok, 0.95) * 1000, 1),
                "p99_ms": round(quantile(ok, 0.99) * 1000, 1), "counters": delta,
            }
    finally:
        gw.send_signal(signal.SIGTERM)
        try:
            gw.wait(10)
        except subprocess.TimeoutExpired:
            gw.kill()
        for s in servers:
            s.close()
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
