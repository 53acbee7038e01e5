"""The run folder's contract: the checkpoint files in it, and how to tell one is whole.

A run folder (RUN_DIR) is the same on the instance and on this machine: the job writes it,
sync and the durable store copy it. Checkpoints are RUN_DIR/checkpoints/ckpt-<step 9 digits>.pt
(torch zip archives); the newest complete one is where a run resumes. Names of the run
folder's other files move here as their modules are cut apart (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import logging
import re
import zipfile
from pathlib import Path

log = logging.getLogger(__name__)

CHECKPOINTS_DIR = "checkpoints"
# Where training is inside its epoch (spotrun.train.progress writes it, followers read it).
PROGRESS_FILE = "progress.json"
CHECKPOINT_NAME = re.compile(r"^ckpt-(\d{9})\.pt$")
METRICS_FILE = "metrics.jsonl"  # one JSON line per evaluation, written by the trainer
# A char-level text run's vocabulary (its sorted characters), for `spotrun sample`.
VOCABULARY_FILE = "vocabulary.json"
# TensorBoard event files, written beside metrics.jsonl (spotrun.train.curves) so that
# `tensorboard --logdir SPOTRUN_HOME/runs` shows every run; TensorBoard finds them by this part
# of the name. They only grow, so sync appends to them like metrics.jsonl.
EVENT_FILE_MARK = ".tfevents."
# The training threads the placement chose for the job (the local cloud: one per free core);
# when set, the trainer uses it instead of the recipe's `threads` (spotrun.train.build).
THREADS_VAR = "SPOTRUN_THREADS"


def is_event_file(name: str) -> bool:
    """Whether `name` (a path in the run folder) is a TensorBoard event file of the run."""
    return "/" not in name and EVENT_FILE_MARK in name


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
        (p for p in folder.iterdir() if CHECKPOINT_NAME.match(p.name)),
        key=lambda p: p.name,
        reverse=True,
    )
    for path in found:
        if checkpoint_is_complete(path):
            match = CHECKPOINT_NAME.match(path.name)
            assert match is not None
            return path, int(match.group(1))
        log.warning("checkpoint %s is incomplete; looking at the one before it", path.name)
    return None
