#!/usr/bin/env python3
"""Slow and idle clients against a running gateway (issue 12 item 4).

Opens IDLE connections that never send a byte and DRIBBLE connections that send a
request head one byte every 2 s, then asks /healthz and /metrics on fresh connections
every second for DURATION seconds. Prints, per second: how many of the attacker's
sockets the gateway still holds open, and whether /healthz answered and how fast.

Usage: scripts/slow-clients.py http://127.0.0.1:8080 [--idle 20000] [--dribble 1000] [--duration 30]
Only talks to the URL given; stops nothing.
"""

import argparse
import asyncio
import resource
import time
import urllib.parse


async def open_conn(host, port):
    try:
        return await asyncio.wait_for(asyncio.open_connection(host, port), 5)
    except (OSError, asyncio.TimeoutError):
        return None


async def dribble(reader, writer, stop):
    head = b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-pad: " + b"a" * 200
    for b in head:
        if stop.is_set():
            return
        try:
            writer.write(bytes([b]))
            await writer.drain()
        except OSError:
            return
        await asyncio.sleep(2)


def is_open(reader):
    return not reader.at_eof() and reader.exception() is None


async def probe(host, port, path):
    t = time.perf_counter()
    try:
        r, w = await asyncio.wait_for(asyncio.open_connection(host, port), 2)
        w.write(f"GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n".encode())
        await w.drain()
        data = await asyncio.wait_for(r.read(), 2)
        w.close()
        ok = data.startswith(b"HTTP/1.1 200")
        return ok, (time.perf_counter() - t) * 1000, data
    except (OSError, asyncio.TimeoutError):
        return False, (time.perf_counter() - t) * 1000, b""


async def watch(reader):
    # Reading makes EOF visible on sockets that send nothing.
    try:
        await reader.read(1)
    except OSError:
        pass


async def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("url")
    ap.add_argument("--idle", type=int, default=20000)
    ap.add_argument("--dribble", type=int, default=1000)
    ap.add_argument("--duration", type=int, default=30)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    u = urllib.parse.urlparse(a.url)
    host, port = u.hostname, u.port or 80
    stop = asyncio.Event()
    conns = []
    t0 = time.perf_counter()
    for i in range(a.idle + a.dribble):
        c = await open_conn(host, port)
        if c is None:
            continue
        conns.append((i >= a.idle, c))
        if i % 2000 == 1999:
            await asyncio.sleep(0)
    tasks = []
    for is_dribble, (r, w) in conns:
        tasks.append(asyncio.ensure_future(dribble(r, w, stop) if is_dribble else watch(r)))
        if is_dribble:
            tasks.append(asyncio.ensure_future(watch(r)))
    print(f"opened {sum(1 for d, _ in conns if not d)} idle + {sum(1 for d, _ in conns if d)} dribbling connections in {time.perf_counter() - t0:.1f} s")
    print("second  idle_open  dribble_open  healthz  healthz_ms  metrics_connections")
    answered = 0
    for s in range(a.duration):
        ok, ms, _ = await probe(host, port, "/healthz")
        answered += ok
        _, _, metrics = await probe(host, port, "/metrics")
        open_conns = next((l.split()[1] for l in metrics.decode(errors="replace").splitlines() if l.startswith("tailcut_connections ")), "-")
        idle_open = sum(1 for d, (r, _) in conns if not d and is_open(r))
        drib_open = sum(1 for d, (r, _) in conns if d and is_open(r))
        print(f"{s:6d}  {idle_open:9d}  {drib_open:12d}  {'ok' if ok else 'FAIL':7s}  {ms:10.1f}  {open_conns}")
        await asyncio.sleep(1)
    print(f"/healthz answered {answered}/{a.duration}")
    stop.set()
    for _, (_, w) in conns:
        w.close()
    for t in tasks:
        t.cancel()


if __name__ == "__main__":
    asyncio.run(main())
