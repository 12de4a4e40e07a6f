"""``tailcut.replay``, ``report``, ``scenario`` and ``demo`` return exactly what the
CLI's ``--json`` prints: compared with the wheel's own ``tailcut`` script and, when
``TAILCUT_CLI`` names it, the cargo-built binary."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any, List

import pytest

import tailcut


def clis(tailcut_cmd: str) -> List[str]:
    out = [tailcut_cmd]
    if os.environ.get("TAILCUT_CLI"):
        out.append(os.environ["TAILCUT_CLI"])
    return out


def cli_json(cmd: str, *args: str) -> Any:
    done = subprocess.run([cmd, *args, "--json"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_replay_equals_the_cli(tailcut_cmd: str, fixtures: Path) -> None:
    rounds = str(fixtures / "moss_rounds.jsonl")
    records = tailcut.replay([rounds], calibration_rounds=18)
    assert {"calibration", "evaluation"} <= set(records)
    assert all(isinstance(r, dict) and "policy" in r for r in records["evaluation"])
    for cmd in clis(tailcut_cmd):
        assert records == cli_json(cmd, "replay", rounds, "--calibration-rounds", "18")
    plain = tailcut.replay(rounds)
    for cmd in clis(tailcut_cmd):
        assert plain == cli_json(cmd, "replay", rounds)


def test_learned_replay_equals_the_cli(tailcut_cmd: str, fixtures: Path) -> None:
    rounds = str(fixtures / "moss_rounds.jsonl")
    records = tailcut.replay(rounds, calibration_rounds=18, learned=True)
    assert any(r["policy"].startswith("auto:") for r in records["evaluation"]), records["evaluation"][-1]
    assert records == cli_json(tailcut_cmd, "replay", rounds, "--calibration-rounds", "18", "--learned")


def test_report_equals_the_cli(tailcut_cmd: str, fixtures: Path) -> None:
    paths = [str(fixtures / "live_hedge.jsonl"), str(fixtures / "cancel_audit.jsonl")]
    records = tailcut.report(paths, deadline=30)
    assert records["arms"] and records["cancel_audit"]
    for cmd in clis(tailcut_cmd):
        assert records == cli_json(cmd, "report", *paths, "--deadline", "30")


def test_scenario_and_demo_equal_the_cli(tailcut_cmd: str) -> None:
    doc = tailcut.scenario("cadence", seed=3, requests=200)
    assert doc["rows"]
    assert doc == cli_json(tailcut_cmd, "scenario", "run", "cadence", "--seed", "3", "--requests", "200")
    rows = tailcut.demo(requests=50, seed=2)
    assert rows == cli_json(tailcut_cmd, "demo", "--requests", "50", "--seed", "2")


def test_bad_input_raises_config_error_with_the_cli_message(tailcut_cmd: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    with pytest.raises(tailcut.ConfigError) as e:
        tailcut.replay(bad)
    done = subprocess.run([tailcut_cmd, "replay", str(bad), "--json"], capture_output=True, text=True)
    assert done.returncode == e.value.exit_code == 2
    assert done.stderr.strip() == f"tailcut: {e.value}"
    with pytest.raises(tailcut.ConfigError, match="unknown scenario"):
        tailcut.scenario("no-such-scenario")
    with pytest.raises(tailcut.ConfigError, match="at least one trace file"):
        tailcut.report([])
