"""``tailcut.Hedger``: hedged runs over simulated providers (real time, short jobs),
synchronously and with asyncio; Ctrl-C and task cancellation leave a receipt for every
loser; errors carry the CLI's message; one budget ledger shared across processes."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

import pytest

import tailcut
from conftest import sim

HEDGE = """
[race]
max_live = 2
[budget]
ledger = ":memory:"
[policies.hedge]
kind = "hedge"
primary = "slow"
hedge = "fast"
delay_ms = 50
[policies.race]
kind = "race"
providers = ["slow", "fast"]
[policies.stuck]
kind = "race"
providers = ["slow", "slower"]
"""


def hedge_config(write_config: Callable[[str], Path]) -> Path:
    return write_config(HEDGE + sim("slow", 3.0) + sim("fast", 0.2) + sim("slower", 5.0))


def test_a_hedged_run_returns_the_winner_and_every_receipt(write_config: Callable[[str], Path]) -> None:
    h = tailcut.Hedger.from_config(hedge_config(write_config))
    assert h.policies == ["hedge", "race", "stuck"]
    t = time.monotonic()
    out = h.run({"text": "hello"}, policy="hedge")
    assert time.monotonic() - t < 2.5, "the hedge won; the slow primary was not waited for"
    assert out.winner == "fast"
    assert out.latency_s is not None and 0.2 <= out.latency_s < 2.0
    assert out.cost_usd > 0
    assert isinstance(out.output, dict) and out.payload
    assert [a["provider"] for a in out.attempts] == ["slow", "fast"]
    assert [r["provider"] for r in out.receipts] == ["slow"], "the loser was cancelled with a receipt"
    assert out.leaked == 0
    assert out.record["winner"] == "fast"


def test_the_gil_is_released_while_a_race_runs(write_config: Callable[[str], Path]) -> None:
    h = tailcut.Hedger.from_config(hedge_config(write_config))
    ticks = []
    done = threading.Event()

    def count() -> None:
        while not done.is_set():
            ticks.append(1)
            time.sleep(0.01)

    th = threading.Thread(target=count)
    th.start()
    try:
        h.run({"n": 1}, policy="race")
    finally:
        done.set()
        th.join()
    # With the GIL held through the race the counter could not run at all.
    assert len(ticks) >= 5, "another Python thread ran during the race"


def test_async_runs_concurrently(write_config: Callable[[str], Path]) -> None:
    h = tailcut.Hedger.from_config(hedge_config(write_config))

    async def main() -> list:
        return await asyncio.gather(*(h.run_async({"n": i}, policy="race") for i in range(4)))

    t = time.monotonic()
    outs = asyncio.run(main())
    assert time.monotonic() - t < 2.5, "four races ran at once"
    assert [o.winner for o in outs] == ["fast"] * 4
    assert len({o.request_id for o in outs}) == 4
    assert all([r["provider"] for r in o.receipts] == ["slow"] for o in outs)


def test_cancelling_an_async_run_cancels_the_race_with_receipts(write_config: Callable[[str], Path]) -> None:
    h = tailcut.Hedger.from_config(hedge_config(write_config))

    async def main() -> asyncio.CancelledError:
        task = asyncio.ensure_future(h.run_async({"n": 1}, policy="stuck"))
        await asyncio.sleep(0.3)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError as e:
            return e
        raise AssertionError("not cancelled")

    t = time.monotonic()
    e = asyncio.run(main())
    assert time.monotonic() - t < 2.5, "stopped at once, not after the 3 s jobs"
    out = e.outcome  # type: ignore[attr-defined]
    assert out.winner is None
    assert sorted(r["provider"] for r in out.receipts) == ["slow", "slower"]
    assert not any(r["leaked"] for r in out.receipts)


def test_ctrl_c_cancels_the_race_and_every_loser_gets_its_receipt(write_config: Callable[[str], Path]) -> None:
    h = tailcut.Hedger.from_config(hedge_config(write_config))
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    t = time.monotonic()
    with pytest.raises(KeyboardInterrupt) as e:
        h.run({"n": 1}, policy="stuck")
    timer.join()
    assert time.monotonic() - t < 2.5, "Ctrl-C stopped the race at once"
    out = e.value.outcome  # type: ignore[attr-defined]
    assert out.winner is None and out.record["stopped_by_caller"]
    assert sorted(r["provider"] for r in out.receipts) == ["slow", "slower"]
    assert all(r["evidence"] != "no_evidence" for r in out.receipts), out.receipts


def test_ctrl_c_in_a_script(write_config: Callable[[str], Path]) -> None:
    """The same through a real SIGINT to a separate Python process."""
    cfg = hedge_config(write_config)
    code = (
        "import tailcut, sys\n"
        f"h = tailcut.Hedger.from_config({str(cfg)!r})\n"
        "print('ready', flush=True)\n"
        "try:\n    h.run({'n': 1}, policy='stuck')\n"
        "except KeyboardInterrupt as e:\n"
        "    print(len(e.outcome.receipts), e.outcome.winner, flush=True)\n"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    assert p.stdout.readline().strip() == "ready"
    time.sleep(0.4)
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=20)
    assert out.strip() == "2 None"


def test_errors_carry_the_cli_message(write_config: Callable[[str], Path], tailcut_cmd: str) -> None:
    bad = write_config("[providers.runpod]\nadapter = \"sim\"\nrate_usd_per_s = -1\n", "bad.toml")
    with pytest.raises(tailcut.ConfigError) as e:
        tailcut.Hedger.from_config(bad)
    assert f"{bad}: key `providers.runpod.rate_usd_per_s`" in str(e.value)
    cli = subprocess.run([tailcut_cmd, "config", "check", str(bad)], capture_output=True, text=True)
    assert cli.returncode == 2 and str(e.value) in cli.stderr

    h = tailcut.Hedger.from_config(hedge_config(write_config))
    with pytest.raises(tailcut.ConfigError, match="no policy `nope`"):
        h.run({}, policy="nope")
    with pytest.raises(tailcut.ConfigError, match="name a policy"):
        h.run({})

    failing = write_config(
        "[budget]\nledger = \":memory:\"\n[policies.p]\nkind = \"single\"\nprovider = \"broken\"\n" + sim("broken", 0.05, failure_p=1.0),
        "failing.toml",
    )
    with pytest.raises(tailcut.ProviderError) as pe:
        tailcut.Hedger.from_config(failing).run({"n": 1})
    assert "no valid result from 1 attempt(s)" in str(pe.value)
    assert "broken (primary)" in str(pe.value)
    assert pe.value.outcome is not None and pe.value.outcome.winner is None


def test_one_budget_ledger_across_processes(write_config: Callable[[str], Path], tmp_path: Path) -> None:
    # Each submission is projected at 30 s x $0.001/s = $0.03: one request fits under the
    # soft stop, a second does not, whoever sends it.
    ledger = tmp_path / "ledger.sqlite"
    cfg = write_config(
        f"[budget]\nsoft_stop_usd = 0.05\nhard_stop_usd = 1.0\nledger = \"{ledger}\"\n"
        "[policies.p]\nkind = \"single\"\nprovider = \"fast\"\n" + sim("fast", 0.05)
    )
    first = tailcut.Hedger.from_config(cfg)
    assert first.run({"n": 1}).winner == "fast"
    second = tailcut.Hedger.from_config(cfg)  # as another process would: the same file
    with pytest.raises(tailcut.BudgetExceeded, match="refused"):
        second.run({"n": 2})
    code = "import tailcut, sys\ntry:\n    tailcut.Hedger.from_config(sys.argv[1]).run({})\nexcept tailcut.BudgetExceeded as e:\n    print(e)\n"
    other = subprocess.run([sys.executable, "-c", code, str(cfg)], capture_output=True, text=True, timeout=60)
    assert "refused" in other.stdout, other.stderr


def test_paid_providers_need_go(write_config: Callable[[str], Path]) -> None:
    cfg = write_config(
        "[budget]\nledger = \":memory:\"\n[providers.remote]\nadapter = \"openai\"\nbase_url = \"https://example.invalid/v1\"\n"
        "rate_usd_per_s = 0.001\n[policies.p]\nkind = \"single\"\nprovider = \"remote\"\n"
    )
    with pytest.raises(tailcut.ConfigError, match="without --go"):
        tailcut.Hedger.from_config(cfg).run({"messages": []})
