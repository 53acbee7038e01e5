"""Files made immutable (chattr +i) by a test: a real read-only ledger or folder, as a full
backup tool or an admin's mistake leaves it. Every path is made mutable again whatever the test
does, so a failure never leaves a file nobody can delete."""

from __future__ import annotations

import subprocess
from pathlib import Path


class ImmutableFiles:
    def __init__(self) -> None:
        self._paths: list[Path] = []

    def lock(self, path: Path) -> None:
        self._paths.append(path)
        subprocess.run(["chattr", "+i", str(path)], check=True)

    def unlock(self, path: Path) -> None:
        subprocess.run(["chattr", "-i", str(path)], check=True)

    def unlock_all(self) -> None:
        for path in self._paths:
            subprocess.run(["chattr", "-i", str(path)], check=False)
