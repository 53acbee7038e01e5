"""The targets themselves, secrets and all, in SPOTRUN_HOME's NOTIFY_TARGETS_FILE (0600): the
ledger and every display know a target by its id and masked label only."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from spotrun.core.errors import LedgerError
from spotrun.core.home import NOTIFY_TARGETS_FILE
from spotrun.notify.targets import Target, parse_target


def targets_path(home: Path) -> Path:
    return home / NOTIFY_TARGETS_FILE


def save_targets(home: Path, targets: list[Target]) -> None:
    """Add `targets` to the file (created 0600; kept 0600), under a lock: two launches at once
    both keep theirs."""
    if not targets:
        return
    path = targets_path(home)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise LedgerError(f"cannot write {path}: {exc.strerror}") from exc
    with os.fdopen(fd, "r+", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        os.fchmod(handle.fileno(), 0o600)  # one made by hand keeps no looser mode
        known = _parse(handle.read(), path)
        known.update({t.id: t.text for t in targets})
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(known, indent=1) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def load_target(home: Path, target_id: str) -> Target | None:
    """The target kept under `target_id`, or None when the file no longer has it."""
    path = targets_path(home)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LedgerError(f"cannot read {path}: {exc.strerror}") from exc
    stored = _parse(text, path).get(target_id)
    return parse_target(stored) if stored is not None else None


def _parse(text: str, path: Path) -> dict[str, str]:
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LedgerError(f"{path} is not JSON ({exc.msg})", hint="move it aside") from None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise LedgerError(f"{path} is not a map of target ids", hint="move it aside")
    return {str(k): v for k, v in data.items()}
