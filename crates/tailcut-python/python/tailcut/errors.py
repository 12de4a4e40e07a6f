"""The exceptions ``tailcut`` raises. Each carries the CLI's message for the same failure
(what ``tailcut`` prints after ``tailcut:``) and the CLI's exit code."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from tailcut._outcome import Outcome


class TailcutError(Exception):
    """Any failure of tailcut (the CLI's exit 1 unless a subclass says otherwise)."""

    exit_code: int = 1
    _raw_outcome: Any = None

    @property
    def message(self) -> str:
        """The CLI's message."""
        return str(self.args[0]) if self.args else ""

    @property
    def outcome(self) -> Optional["Outcome"]:
        """For a race that ended without a valid result: its outcome, every receipt included."""
        if self._raw_outcome is None:
            return None
        from tailcut._outcome import Outcome

        return Outcome._from_raw(self._raw_outcome)


class ConfigError(TailcutError, ValueError):
    """Bad input: a configuration key, a flag value, a trace line (the CLI's exit 2)."""

    exit_code = 2


class BudgetExceeded(TailcutError):
    """The budget ledger refused the request's projected charge; nothing was submitted."""


class ProviderError(TailcutError):
    """No provider returned a valid result. ``.outcome`` has every attempt and receipt."""


class GatewayError(TailcutError):
    """The gateway (``tailcut serve``) refused a jobs API call: ``.status`` is the HTTP
    status, ``.code`` the error body's ``code``."""

    def __init__(self, message: str, status: int, code: Optional[str] = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
