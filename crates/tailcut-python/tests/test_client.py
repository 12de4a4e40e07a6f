"""``tailcut.Client`` and ``AsyncClient`` against a real ``tailcut serve`` (the wheel's
own command) on 127.0.0.1, started here and stopped by its pid."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import signal
import subprocess
from pathlib import Path
from typing import Callable, Iterator, Tuple

import pytest

import tailcut
from conftest import sim

KEY = "py-test-key-0123456789"


@contextlib.contextmanager
def serving(tailcut_cmd: str, cfg: Path) -> Iterator[str]:
    """``tailcut serve --config cfg`` on a free loopback port; yields its URL and stops
    it by its pid."""
    env = dict(os.environ, TAILCUT_LOG="off")
    p = subprocess.Popen(
        [tailcut_cmd, "serve", "--config", str(cfg), "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert p.stdout is not None
        line = p.stdout.readline()
        assert "listening on http://" in line, line
        yield line.rsplit(" ", 1)[1].strip()
    finally:
        os.kill(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()


def keys() -> str:
    sha = hashlib.sha256(KEY.encode()).hexdigest()
    return f"[gateway]\nstore = \":memory:\"\nkeys = [{{ name = \"py\", sha256 = \"{sha}\" }}]\n"


@pytest.fixture
def gateway(write_config: Callable[[str], Path], tailcut_cmd: str, tmp_path: Path) -> Iterator[Tuple[str, Path]]:
    """A gateway with jobs routes over simulated providers; yields its URL and its
    configuration."""
    cfg = write_config(
        keys()
        + f"[budget]\nledger = \"{tmp_path / 'ledger.sqlite'}\"\n"
        "[race]\nmax_live = 2\n"
        "[policies.race]\nkind = \"race\"\nproviders = [\"slow\", \"fast\"]\n"
        "[policies.stuck]\nkind = \"race\"\nproviders = [\"slow\", \"slower\"]\n"
        "[routes.jobs]\nkind = \"jobs\"\npolicy = \"race\"\n"
        "[routes.stuck]\nkind = \"jobs\"\npolicy = \"stuck\"\n"
        + sim("slow", 3.0)
        + sim("fast", 0.2)
        + sim("slower", 5.0),
        "serve.toml",
    )
    with serving(tailcut_cmd, cfg) as url:
        yield url, cfg


def test_submit_wait_get(gateway: Tuple[str, Path]) -> None:
    url, _ = gateway
    c = tailcut.Client(url, KEY)
    job = c.submit({"text": "hi"}, route="jobs")
    assert job.state == "running" and job.id
    done = c.wait(job.id, timeout=20)
    assert done.state == "succeeded" and done.winner == "fast"
    assert [r["provider"] for r in done.receipts] == ["slow"]
    again = c.get(job.id)
    assert again.state == "succeeded" and again.result == done.result
    ran = c.run({"text": "again"}, route="jobs", timeout=20)
    assert ran.done and ran.winner == "fast"


def test_cancel_stops_the_race_with_receipts(gateway: Tuple[str, Path]) -> None:
    url, _ = gateway
    c = tailcut.Client(url, KEY)
    job = c.submit({"text": "hi"}, route="stuck")
    c.cancel(job.id)
    done = c.wait(job.id, timeout=20)
    assert done.state == "cancelled"
    assert sorted(r["provider"] for r in done.receipts) == ["slow", "slower"]


def test_async_client(gateway: Tuple[str, Path]) -> None:
    url, _ = gateway

    async def main() -> list:
        c = tailcut.AsyncClient(url, KEY)
        jobs = await asyncio.gather(*(c.submit({"n": i}, route="jobs") for i in range(3)))
        return await asyncio.gather(*(c.wait(j.id, timeout=20) for j in jobs))

    done = asyncio.run(main())
    assert [j.winner for j in done] == ["fast"] * 3


def test_gateway_errors(gateway: Tuple[str, Path]) -> None:
    url, _ = gateway
    with pytest.raises(tailcut.GatewayError) as e:
        tailcut.Client(url, "wrong-key").submit({"text": "hi"}, route="jobs")
    assert e.value.status == 401 and e.value.code == "invalid_api_key"
    assert "wrong-key" not in repr(tailcut.Client(url, "wrong-key"))
    with pytest.raises(tailcut.GatewayError) as e:
        tailcut.Client(url, KEY).get("no-such-job")
    assert e.value.status == 404
    with pytest.raises(tailcut.GatewayError) as e:
        tailcut.Client(url, KEY).submit({"text": "hi"}, route="nope")
    assert e.value.status == 404 and "nope" in str(e.value)


def test_python_and_the_gateway_share_one_budget(write_config: Callable[[str], Path], tailcut_cmd: str, tmp_path: Path) -> None:
    # Each submission is projected at 30 s x $0.001/s = $0.03; the soft stop lets one
    # request start, not two, whether Python or the gateway sends the second.
    cfg = write_config(
        keys()
        + f"[budget]\nsoft_stop_usd = 0.05\nhard_stop_usd = 1.0\nledger = \"{tmp_path / 'shared.sqlite'}\"\n"
        "[policies.p]\nkind = \"single\"\nprovider = \"fast\"\n[routes.jobs]\nkind = \"jobs\"\npolicy = \"p\"\n"
        + sim("fast", 0.05),
        "shared.toml",
    )
    assert tailcut.Hedger.from_config(cfg).run({"n": 1}).winner == "fast"
    with serving(tailcut_cmd, cfg) as url:
        job = tailcut.Client(url, KEY).run({"n": 2}, route="jobs", timeout=20)
    assert job.state == "failed" and "budget exceeded" in (job.error or ""), job
