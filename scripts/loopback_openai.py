"""What the gateway experiments share: OpenAI-compatible upstreams on 127.0.0.1 whose
delay a script chooses per request, a `tailcut serve` started on a config of the
script's (and stopped by its pid only), an open-loop client that measures each request
(streams: time to the first content token), quantiles and the gateway's counters.

Used by `scripts/stalling-primary.py` and `scripts/regime-flip.py`; not run by itself.
"""

import asyncio
import contextlib
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time

REPLY = json.dumps({
    "id": "x", "object": "chat.completion", "created": 0, "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}).encode()


def _sse_body():
    events = [
        {"choices": [{"index": 0, "delta": {"role": "assistant"}}]},
        {"choices": [{"index": 0, "delta": {"content": "ok"}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    out = b"".join(b"data: " + json.dumps(dict(e, id="x", object="chat.completion.chunk", model="m")).encode() + b"\n\n" for e in events)
    return out + b"data: [DONE]\n\n"


SSE = _sse_body()

# A provider section of the gateway's config; `{name}` and `{port}` are filled in.
PROVIDER_TOML = """
[providers.{name}]
adapter = "openai"
base_url = "http://127.0.0.1:{port}/v1"
rate_usd_per_s = 0.001
expected_run_s = 1
"""


class Provider:
    """A keep-alive HTTP/1.1 server answering POST .../chat/completions, whole or
    streamed as the request asks, after `wait(rng)` seconds before the response
    headers. `stall_at_s` is the wait from which a request counts as stalled."""

    def __init__(self, name, wait, seed, stall_at_s=1.0):
        self.name = name
        self.wait = wait
        self.rng = random.Random(seed)
        self.stall_at_s = stall_at_s
        self.requests = 0
        self.stalled = 0
        self.port = None
        self._server = None

    async def start(self):
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0, backlog=4096)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def close(self):
        if self._server is not None:
            self._server.close()

    def toml(self):
        return PROVIDER_TOML.format(name=self.name, port=self.port)

    async def _handle(self, reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                m = re.search(rb"(?i)content-length:\s*(\d+)", head)
                body = await reader.readexactly(int(m.group(1))) if m else b""
                self.requests += 1
                wait = self.wait(self.rng)
                if wait >= self.stall_at_s:
                    self.stalled += 1
                if wait > 0:
                    await asyncio.sleep(wait)
                if b'"stream":true' in body.replace(b" ", b""):
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


# The gateway's config for one learned chat route over loopback providers: `{port}` is
# filled by `gateway`, the rest by `route_config`.
ROUTE_CONFIG = """
[gateway]
listen = "127.0.0.1:{port}"
auth = "none"
store = ":memory:"
GATEWAY_EXTRA
[budget]
ledger = ":memory:"
[trace]
path = "TRACE"
PROVIDERS
[policies.chat]
POLICY
[routes.chat]
kind = "openai"
models = ["m"]
policy = "chat"
ROUTE_EXTRA
"""


def route_config(providers, policy, trace, gateway_extra="", route_extra=""):
    """The config of a gateway with one OpenAI route `chat` (model `m`) under the policy
    `policy` (the body of `[policies.chat]`), over `providers` (their TOML sections),
    tracing to `trace`; `gateway_extra` and `route_extra` are added to `[gateway]` and
    `[routes.chat]`."""
    return (ROUTE_CONFIG.replace("GATEWAY_EXTRA", gateway_extra).replace("TRACE", trace)
            .replace("PROVIDERS", "".join(providers)).replace("POLICY", policy)
            .replace("ROUTE_EXTRA", route_extra))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.asynccontextmanager
async def gateway(tailcut, config_text, tmp):
    """A `tailcut serve` on `config_text` (written to `tmp`), whose `{port}` is filled
    with a free port; yields the port once it accepts connections. Stopped by SIGTERM to
    its own pid (killed after 10 s)."""
    port = free_port()
    path = os.path.join(tmp, "gateway.toml")
    with open(path, "w") as f:
        f.write(config_text.replace("{port}", str(port)))
    log = open(os.path.join(tmp, "gateway.log"), "w")
    gw = subprocess.Popen([tailcut, "serve", "--config", path], stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if gw.poll() is not None:
                    sys.exit(f"tailcut serve exited: see {log.name}")
                await asyncio.sleep(0.1)
        yield port
    finally:
        gw.send_signal(signal.SIGTERM)
        try:
            gw.wait(10)
        except subprocess.TimeoutExpired:
            gw.kill()
        log.close()


async def one_request(port, stream):
    """(seconds, winner) of one chat request on its own connection; (None, None) when it
    failed. Streams are timed to the first content token."""
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


async def open_loop(port, rate, count, stream, before_each=None):
    """Sends `count` requests at `rate` per second, each on its own task, so a slow reply
    never delays the next; `before_each(i)` runs just before request i is sent. Returns
    (seconds | None, winner) per request, in order."""
    tasks = []
    start = time.perf_counter()
    for i in range(count):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        if before_each is not None:
            before_each(i)
        tasks.append(asyncio.create_task(asyncio.wait_for(one_request(port, stream), 30)))
    out = []
    for t in tasks:
        try:
            out.append(await t)
        except (OSError, asyncio.TimeoutError):
            out.append((None, None))
    return out


def quantile(xs, q):
    """The nearest-rank quantile (NaN for no values)."""
    xs = sorted(xs)
    if not xs:
        return float("nan")
    return xs[min(len(xs) - 1, max(0, int(-(-q * len(xs) // 1)) - 1))]


def latency_summary(seconds):
    """p50/p95/p99 in milliseconds, rounded to 0.1."""
    return {f"p{q}_ms": round(quantile(seconds, q / 100) * 1000, 1) for q in (50, 95, 99)}


COUNTER_PREFIXES = ("tailcut_attempts_total", "tailcut_hedges_total", "tailcut_hedges_denied_total", "tailcut_wins_total",
                    "tailcut_learned_shifts")


def scrape(port):
    """The gateway's hedging counters from /metrics, by full series name."""
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    keep = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, _, value = line.rpartition(" ")
        if name.startswith(COUNTER_PREFIXES):
            keep[name] = float(value)
    return keep
