#!/usr/bin/env python3
"""A burst of jobs on the shipped example (issue 27 item 1's reproduction).

Starts two `tailcut sim-provider` servers (profiles runpod and cerebrium, --time-scale
0.01) and `tailcut serve` over `examples/serve-sim.toml`, with every port moved to a free
one on 127.0.0.1, then sends N concurrent `POST /v1/jobs?wait=30` on the `sim-jobs`
route (the cutover policy, under the default hedge-load cap) and prints how many jobs
ended `succeeded`, how many did not (by state, with their errors), how many found their
primary queued at the cutover poll, how many had it cancelled for a cutover, and the
gateway's `tailcut_hedges_denied_total`.

Usage:
  scripts/burst-jobs.py --tailcut target/debug/tailcut [--jobs 100] [--json]

Stops only the processes it started, by pid.
"""

import argparse
import collections
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=20.0):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listening on 127.0.0.1:{port} after {timeout} s")


def post_job(base, results, i):
    body = json.dumps({"route": "sim-jobs", "input": {"text": f"job {i}"}}).encode()
    req = urllib.request.Request(f"{base}/v1/jobs?wait=30", data=body, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            results[i] = json.loads(r.read())
    except urllib.error.HTTPError as e:
        results[i] = {"status": f"http {e.code}", "error": e.read().decode(errors="replace")[:200]}
    except OSError as e:
        results[i] = {"status": "client error", "error": str(e)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tailcut", default=os.path.join(ROOT, "target/debug/tailcut"), help="the tailcut binary")
    ap.add_argument("--jobs", type=int, default=100, help="concurrent jobs (default 100)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()

    a, b, gw = free_port(), free_port(), free_port()
    text = open(os.path.join(ROOT, "examples/serve-sim.toml")).read()
    text = text.replace("127.0.0.1:8001", f"127.0.0.1:{a}").replace("127.0.0.1:8002", f"127.0.0.1:{b}")
    text = text.replace('listen = "127.0.0.1:8080"', f'listen = "127.0.0.1:{gw}"')
    procs = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cfg = os.path.join(tmp, "serve-sim.toml")
            open(cfg, "w").write(text)
            quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for profile, port in (("runpod", a), ("cerebrium", b)):
                procs.append(subprocess.Popen([args.tailcut, "sim-provider", "--profile", profile, "--port", str(port),
                                               "--time-scale", "0.01"], **quiet))
            env = dict(os.environ, TAILCUT_LOG="off")
            procs.append(subprocess.Popen([args.tailcut, "serve", "--config", cfg], env=env, **quiet))
            for port in (a, b, gw):
                wait_port(port)
            base = f"http://127.0.0.1:{gw}"
            results = [None] * args.jobs
            threads = [threading.Thread(target=post_job, args=(base, results, i)) for i in range(args.jobs)]
            started = time.time()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            elapsed = time.time() - started
            metrics = urllib.request.urlopen(f"{base}/metrics", timeout=10).read().decode()
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()

    states = collections.Counter(str(r.get("state", r.get("status"))) for r in results)
    errors = collections.Counter(str(r.get("error")) for r in results if r.get("state") != "succeeded")

    def queued_at_poll(r):
        attempts = r.get("attempts") or []
        return bool(attempts) and any(p.get("state") == "IN_QUEUE" for p in attempts[0].get("polls") or [])

    def cut_over(r):
        return any("cutover" in (c.get("reason") or "") for c in r.get("receipts") or [])
    denied = sum(float(m) for m in re.findall(r'^tailcut_hedges_denied_total\{route="sim-jobs"\} (\S+)$', metrics, re.M))
    out = {
        "jobs": args.jobs,
        "succeeded": states.get("succeeded", 0),
        "states": dict(states),
        "errors": dict(errors),
        "queued_at_poll": sum(1 for r in results if queued_at_poll(r)),
        "primary_cancelled_at_cutover": sum(1 for r in results if cut_over(r)),
        "hedges_denied_total": denied,
        "seconds": round(elapsed, 2),
    }
    if args.json:
        print(json.dumps(out))
    else:
        print(f"{out['succeeded']} of {out['jobs']} succeeded in {out['seconds']} s; states {out['states']}")
        print(f"primary queued at the poll {out['queued_at_poll']}, cancelled for a cutover {out['primary_cancelled_at_cutover']}; "
              f"tailcut_hedges_denied_total{{route=\"sim-jobs\"}} {denied:g}")
        for e, n in errors.most_common(3):
            print(f"  {n} x error: {e}")
    return 0 if out["succeeded"] == out["jobs"] else 1


if __name__ == "__main__":
    sys.exit(main())
