"""What the spot scenarios read off a run: its job log's resumes and checkpoints, the steps a
resume lost, private keys' modes, and /proc's view of processes (children, command lines)."""

from __future__ import annotations

import os
import random
from pathlib import Path


def private_key_modes(home: Path) -> dict[str, int]:
    """Every private key file under SPOTRUN_HOME and its permission bits."""
    modes = {}
    for path in home.rglob("*"):
        try:
            if path.is_symlink() or not path.is_file() or path.stat().st_size > 64 * 1024:
                continue
            head = path.read_bytes()[:200]
        except OSError:
            continue
        if b"-----BEGIN" in head and b"PRIVATE KEY-----" in head:
            modes[str(path.relative_to(home))] = path.stat().st_mode & 0o777
    return modes


def resumed_steps(log: str) -> list[int]:
    """The step each resume in job.log started from ("resumed at epoch E step S")."""
    return [int(x.rsplit(" ", 1)[-1]) for x in log.splitlines() if x.startswith("resumed at epoch")]


def checkpointed_steps(log: str) -> list[int]:
    """The step of each checkpoint the trainer made on a stop ("...: checkpointing at step S")."""
    return [int(x.rsplit(" ", 1)[-1]) for x in log.splitlines() if "checkpointing at step" in x]


def lost_steps(log: str, steps_at_fault: list[int]) -> list[int]:
    """Per resume in job.log: steps trained before the stop that the resume did not keep.

    With a notice the trainer says where it checkpointed; without one, the newest step known
    here when the fault came (the last evaluation synced) is what was surely trained."""
    reached = 0
    lost: list[int] = []
    for line in log.splitlines():
        if "checkpointing at step" in line:
            reached = max(reached, int(line.rsplit(" ", 1)[-1]))
        elif line.startswith("resumed at epoch"):
            n = len(lost)
            if n < len(steps_at_fault):
                reached = max(reached, steps_at_fault[n])
            # A resume past the step known at the fault (the fault came late) lost nothing.
            lost.append(max(0, reached - int(line.rsplit(" ", 1)[-1])))
    return lost


def steps_per_epoch() -> int:
    return 22  # 1,438 training images / 64 per step, the last partial step dropped (digits-fast)


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def link_target(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def seeded_points(seed: int, count: int, low: float, high: float) -> list[float]:
    rng = random.Random(seed)
    return sorted(rng.uniform(low, high) for _ in range(count))
