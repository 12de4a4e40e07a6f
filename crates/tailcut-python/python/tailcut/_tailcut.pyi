"""Type stubs of the native module ``tailcut._tailcut`` (``crates/tailcut-python/src/lib.rs``).
Use the ``tailcut`` package's API instead; this is what it is built on."""

from typing import List, Optional, Tuple

__version__: str

RawOutcome = Tuple[str, Optional[bytes]]
"""A settled race: the outcome document (JSON text) and the winner's payload bytes."""

def cli(argv: List[str]) -> int:
    """Runs the ``tailcut`` command line ``argv`` (program name first), printing as the
    CLI does, and returns its exit status. The GIL is released while it runs."""

def json_of(argv: List[str]) -> str:
    """The ``--json`` document of the command ``argv`` (program name first), the exact
    text the CLI prints. Raises ``tailcut.errors.ConfigError`` on bad input."""

class Hedger:
    """``tailcut run``'s engine for one configuration."""

    @staticmethod
    def from_config(path: Optional[str] = None) -> "Hedger":
        """Loads the configuration at ``path`` (``None``: the built-in one)."""
    def policies(self) -> List[str]:
        """The configured policies' names."""
    def start(self, input: str, policy: Optional[str] = None, go: bool = False) -> "Race":
        """Starts a race of ``input`` (JSON text) and returns at once."""

class Race:
    """One running race."""

    def cancel(self) -> None:
        """Stops the race; every live attempt is cancelled with a receipt."""
    def done(self) -> bool:
        """Whether the race has settled (every receipt in)."""
    def wait(self, timeout: Optional[float] = None) -> Optional[RawOutcome]:
        """Waits at most ``timeout`` seconds with the GIL released; ``None`` if the race
        has not settled. Raises its failure (``tailcut.errors``)."""
