"""Which checkpoint of a run folder is whole: torch zip archives read back, newest first.

Apart from spotrun.core.rundir (the names) so that what reads only names (the CLI's help, its
SPOTRUN_HOME) never imports zipfile.
"""

from __future__ import annotations

import logging
import zipfile
from pathlib import Path

from spotrun.core.rundir import CHECKPOINT_NAME, CHECKPOINTS_DIR

log = logging.getLogger(__name__)


def checkpoint_is_complete(path: Path) -> bool:
    """A torch checkpoint (a zip archive) reads back whole: every member's CRC matches."""
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.testzip() is None
    except (OSError, zipfile.BadZipFile, EOFError, ValueError):
        return False


def newest_complete_checkpoint(run_dir: Path) -> tuple[Path, int] | None:
    """The newest checkpoint of the run folder that is complete, and its step."""
    folder = run_dir / CHECKPOINTS_DIR
    if not folder.is_dir():
        return None
    found = sorted(
        (p for p in folder.iterdir() if CHECKPOINT_NAME.fullmatch(p.name)),
        key=lambda p: p.name,
        reverse=True,
    )
    for path in found:
        if checkpoint_is_complete(path):
            match = CHECKPOINT_NAME.fullmatch(path.name)
            assert match is not None
            return path, int(match.group(1))
        log.warning("checkpoint %s is incomplete; looking at the one before it", path.name)
    return None
