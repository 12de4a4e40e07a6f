"""Shared fixtures: the repository's trace fixtures, the installed ``tailcut`` command,
and configurations of simulated providers that answer in real (short) time."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Callable

import pytest

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "fixtures" / "gpuhedge-2026-07"


def sim(name: str, run_s: float, *, failure_p: float = 0.0, rate: float = 0.001) -> str:
    """A simulated provider (in process) whose every job takes ``run_s`` seconds."""
    r = f"[{run_s}, {run_s}]"
    return (
        f"[providers.{name}]\nadapter = \"sim\"\nrate_usd_per_s = {rate}\nexpected_run_s = 30\n"
        f"sim = {{ profile = \"instant\", cold_fast_run_s = {r}, warm_run_s = {r}, failure_p = {failure_p} }}\n"
    )


@pytest.fixture
def write_config(tmp_path: Path) -> Callable[[str], Path]:
    """Writes a configuration file and returns its path."""

    def write(text: str, name: str = "tailcut.toml") -> Path:
        p = tmp_path / name
        p.write_text(text)
        return p

    return write


@pytest.fixture(scope="session")
def tailcut_cmd() -> str:
    """The ``tailcut`` console script the wheel installed beside this Python."""
    found = shutil.which("tailcut", path=os.path.dirname(sys.executable)) or shutil.which("tailcut")
    assert found, "the wheel's `tailcut` script is not on PATH"
    return found


@pytest.fixture(scope="session")
def fixtures() -> Path:
    assert FIXTURES.is_dir(), FIXTURES
    return FIXTURES
