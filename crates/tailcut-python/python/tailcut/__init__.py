"""tailcut: hedge GPU inference jobs across serverless providers, cancel the losers with
receipts, and replay traces offline — the ``tailcut`` CLI's engine, from Python.

- ``replay``, ``report``, ``scenario`` and ``demo`` return the CLI's ``--json`` documents
  (plain dicts and lists; each list of rows loads straight into ``pandas.DataFrame``).
- ``Hedger`` runs hedged requests over configured providers (``tailcut run``'s engine),
  synchronously or with ``asyncio``.
- ``Client`` talks to the gateway's jobs API (``tailcut serve``).
- Failures raise ``ConfigError``, ``BudgetExceeded`` or ``ProviderError`` with the CLI's
  message.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

from tailcut import _tailcut
from tailcut._outcome import Outcome
from tailcut.client import AsyncClient, Client, Job
from tailcut.errors import BudgetExceeded, ConfigError, GatewayError, ProviderError, TailcutError

__all__ = [
    "AsyncClient",
    "BudgetExceeded",
    "Client",
    "ConfigError",
    "GatewayError",
    "Hedger",
    "Job",
    "Outcome",
    "ProviderError",
    "TailcutError",
    "demo",
    "replay",
    "report",
    "scenario",
]

__version__: str = _tailcut.__version__

PathLike = Union[str, "os.PathLike[str]"]


def _paths(paths: Union[PathLike, Iterable[PathLike]]) -> List[str]:
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out = [os.fspath(p) for p in paths]
    if not out:
        raise ConfigError("expected at least one trace file")
    return out


def _run_json(argv: List[str], positional: Sequence[str] = ()) -> Any:
    """The command's ``--json`` document (flags before ``--``, so a path or name that
    starts with ``-`` is never read as a flag)."""
    return json.loads(_tailcut.json_of(["tailcut", *argv, "--json", "--", *positional]))


def replay(
    paths: Union[PathLike, Iterable[PathLike]],
    calibration_rounds: Optional[int] = None,
    learned: bool = False,
    *,
    config: Optional[PathLike] = None,
    estimator: str = "nearest",
    skip_bad_lines: bool = False,
) -> Dict[str, List[Dict[str, Any]]]:
    """The standard policy sweep over recorded paired rounds: ``tailcut replay PATHS
    --json``, the same document (split name -> one record per policy)."""
    argv = ["replay", "--estimator", estimator]
    if calibration_rounds is not None:
        argv += ["--calibration-rounds", str(int(calibration_rounds))]
    if learned:
        argv.append("--learned")
    if config is not None:
        argv += ["--config", os.fspath(config)]
    if skip_bad_lines:
        argv.append("--skip-bad-lines")
    return _run_json(argv, _paths(paths))


def report(
    paths: Union[PathLike, Iterable[PathLike]],
    deadline: float = 60,
    *,
    skip_bad_lines: bool = False,
) -> Dict[str, List[Dict[str, Any]]]:
    """Live request traces per policy arm: ``tailcut report PATHS --deadline D --json``,
    the same document (``arms`` and ``cancel_audit`` records)."""
    argv = ["report", "--deadline", repr(float(deadline))]
    if skip_bad_lines:
        argv.append("--skip-bad-lines")
    return _run_json(argv, _paths(paths))


def scenario(name: str, seed: int = 1, requests: int = 4000) -> Dict[str, Any]:
    """A simulated request stream, every policy evaluated: ``tailcut scenario run NAME
    --seed S --requests N --json``, the same document (its ``rows`` are the records)."""
    return _run_json(["scenario", "run", "--seed", str(int(seed)), "--requests", str(int(requests))], [name])


def demo(requests: int = 1000, seed: int = 0, *, config: Optional[PathLike] = None) -> List[Dict[str, Any]]:
    """Every configured policy over the simulated providers: ``tailcut demo --json``."""
    argv = ["demo", "--requests", str(int(requests)), "--seed", str(int(seed))]
    if config is not None:
        argv += ["--config", os.fspath(config)]
    return _run_json(argv)


class Hedger:
    """Hedged requests over the providers of one configuration, with ``tailcut run``'s
    engine: the same policies, validator, trace, and budget ledger (``[budget] ledger``,
    the SQLite file the gateway charges too). Build it with ``Hedger.from_config``."""

    def __init__(self, native: Any) -> None:
        self._native = native

    @classmethod
    def from_config(cls, path: Optional[PathLike] = None) -> "Hedger":
        """Loads and checks the configuration at ``path`` (``None``: the built-in one,
        three simulated providers). Raises ``ConfigError`` naming the file and key."""
        return cls(_tailcut.Hedger.from_config(None if path is None else os.fspath(path)))

    @property
    def policies(self) -> List[str]:
        """The configured policies' names."""
        return list(self._native.policies())

    def _start(self, input: Any, policy: Optional[str], go: bool) -> Any:
        return self._native.start(json.dumps(input), policy, go)

    def run(self, input: Any, policy: Optional[str] = None, *, go: bool = False) -> Outcome:
        """Races ``input`` (any JSON value) under ``policy`` (``None``: the only one
        configured) and returns once every loser has its cancel receipt. The race runs
        in Rust with the GIL released.

        Ctrl-C stops the race: every live attempt is cancelled with a receipt, then
        ``KeyboardInterrupt`` is raised with the outcome as its ``.outcome``. Paid
        providers (anything not simulated or on loopback) need ``go=True``, as the
        CLI's ``--go``. Raises ``ProviderError`` (with ``.outcome``) when no provider
        returned a valid result, ``BudgetExceeded`` when the ledger refused the charge."""
        race = self._start(input, policy, go)
        try:
            while True:
                # Short waits: Python runs its signal handlers (Ctrl-C) between them.
                raw = race.wait(0.05)
                if raw is not None:
                    return Outcome._from_raw(raw)
        except KeyboardInterrupt as interrupt:
            race.cancel()
            interrupt.outcome = _settle(race)  # type: ignore[attr-defined]
            raise

    async def run_async(self, input: Any, policy: Optional[str] = None, *, go: bool = False) -> Outcome:
        """``run`` for asyncio: the race runs on tailcut's own runtime and the event loop
        stays free. Cancelling the task stops the race; every live attempt is cancelled
        with a receipt before ``CancelledError`` propagates (with ``.outcome``)."""
        race = self._start(input, policy, go)
        loop = asyncio.get_running_loop()
        try:
            raw = await loop.run_in_executor(None, race.wait, None)
        except asyncio.CancelledError as cancelled:
            race.cancel()
            cancelled.outcome = await loop.run_in_executor(None, _settle, race)  # type: ignore[attr-defined]
            raise
        return Outcome._from_raw(raw)


def _settle(race: Any) -> Optional[Outcome]:
    """The outcome of a race that was stopped: it settles once every receipt is in."""
    try:
        return Outcome._from_raw(race.wait(None))
    except TailcutError as e:
        return e.outcome
