"""What every command group shares: the help options and the one way errors are printed."""

from __future__ import annotations

import sys
from enum import Enum
from typing import Any

# `-h` as well as `--help`, on the root and (inherited through click's context) everywhere.
HELP_OPTIONS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}

# Every error line spotrun prints starts with this, whatever the command.
ERROR_PREFIX = "error: "


def print_error(message: str) -> None:
    """One error on stderr, with the one prefix (plain text: a message may hold brackets)."""
    sys.stderr.write(f"{ERROR_PREFIX}{message}\n")
    sys.stderr.flush()


class Cloud(str, Enum):
    """Where a run's instances come from (help lists the choices)."""

    local = "local"
    aws = "aws"
