"""The ``tailcut`` console script: the CLI itself, run by the native module."""

import signal
import sys

from tailcut import _tailcut


def main() -> int:
    """Runs ``tailcut`` with this process's arguments and returns its exit status."""
    # The process is the command, as the Rust binary is: Ctrl-C ends it
    # the way it ends the binary, not with a Python traceback.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    return _tailcut.cli(["tailcut", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
