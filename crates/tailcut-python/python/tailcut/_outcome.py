"""``Outcome``: what one hedged request returned (winner, latency, cost, every receipt)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple


@dataclass(frozen=True)
class Outcome:
    """One settled race: the winner, its latency, the cost charged, and the receipts of
    every cancelled loser. ``record`` is the request's full trace record, the line
    ``tailcut run --json`` prints and ``tailcut report`` reads."""

    request_id: str
    policy: str
    winner: Optional[str]
    latency_s: Optional[float]
    cost_usd: float
    output: Any
    payload: Optional[bytes]
    content_type: Optional[str]
    receipts: List[Dict[str, Any]] = field(repr=False)
    attempts: List[Dict[str, Any]] = field(repr=False)
    record: Dict[str, Any] = field(repr=False)

    @classmethod
    def _from_raw(cls, raw: Tuple[str, Optional[bytes]]) -> "Outcome":
        document, payload = raw
        d = json.loads(document)
        record = d["record"]
        return cls(
            request_id=d["request_id"],
            policy=d["policy"],
            winner=d["winner"],
            latency_s=d["latency_s"],
            cost_usd=d["projected_cost_usd"],
            output=d["output"],
            payload=payload,
            content_type=d["content_type"],
            receipts=record.get("receipts", []),
            attempts=record.get("attempts", []),
            record=record,
        )

    @property
    def leaked(self) -> int:
        """Receipts without proof that the loser stopped."""
        return sum(1 for r in self.receipts if r.get("leaked"))
