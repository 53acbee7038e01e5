"""What every command group shares: the help options and the one way errors are printed."""

from __future__ import annotations

import contextlib
import os
import sys
from enum import Enum
from typing import Any, NoReturn

# `-h` as well as `--help`, on the root and (inherited through click's context) everywhere.
HELP_OPTIONS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}

# Every error line spotrun prints starts with this, whatever the command.
ERROR_PREFIX = "error: "


def leave(code: int) -> NoReturn:
    """End the program with `code` once what it wrote is flushed, without the interpreter
    freeing every object of boto3 & co. one by one (seconds on a loaded machine, after the
    answer is already on screen)."""
    for stream in (sys.stdout, sys.stderr):
        # a closed pipe (`spotrun ls | head`): nothing more to say to it
        with contextlib.suppress(OSError):
            stream.flush()
    os._exit(code)


def print_error(message: str) -> None:
    """One error on stderr, with the one prefix (plain text: a message may hold brackets)."""
    sys.stderr.write(f"{ERROR_PREFIX}{message}\n")
    sys.stderr.flush()


class Cloud(str, Enum):
    """Where a run's instances come from (help lists the choices)."""

    local = "local"
    aws = "aws"


def interrupted_early(args: list[str]) -> int:
    """Ctrl-C before a command's own body began (interpreter start-up, imports, parsing):
    nothing it would make exists yet. A launch says so, as it does at every later moment."""
    if args[:1] == ["launch"]:
        sys.stderr.write("interrupted: nothing was launched\n")
        sys.stderr.flush()
    return 130
