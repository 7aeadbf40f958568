"""The failures a command reports to its user, and the exit codes they map to.

Below the CLI so the demo and the shell can raise them without importing the command
line (imports run one way: docs/ARCHITECTURE.md).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130
EXIT_PIPE = 128 + 13


class CommandError(Exception):
    """A user-facing failure: printed as ``goosectl: <message>`` and exit code 2."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code
