"""The idle stop of `controller up --on aws`'s instance, on that instance: what it is told and
what it measures, in files of its SPOTRUN_HOME.

- `idle-stop.json`: the instance to stop, its region, and after how long idle (written by the
  hidden `spotrun controller idle-stop`, which `controller up --on aws` runs there; gone when
  the idle stop is off);
- `last-command`: touched by every command the laptop sends (its mtime is the last use);
- `idle-watch.lock` / `idle-watch.json`: the watcher (spotrun.remote_controller.idle_stop), a small
  process of its own that outlives the controller (which exits once nothing is live), with
  the last time it saw something live.

Every command on the instance calls `note_command`, which touches the mark and starts the
watcher when none runs (after a start the machine runs none). Standard library only: every
`spotrun ls` on the instance reads this module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spotrun.core.home import IDLE_STOP_FILE
from spotrun.core.locks import lock_is_held
from spotrun.core.rundir import HOME_VAR

CONFIG_FILE = IDLE_STOP_FILE
MARK_FILE = "last-command"
IDLE_WATCH_LOCK_FILE = "idle-watch.lock"
IDLE_WATCH_STATE_FILE = "idle-watch.json"
IDLE_WATCH_LOG_FILE = "idle-watch.log"
MODULE = "spotrun.remote_controller.idle_stop"
# Commands that are no use of the controller: the laptop's `controller status` asking how long
# is left must not reset the countdown it shows; completion asks for run names on a Tab press.
NOT_USE = frozenset({"controller", "completion"})


@dataclass(frozen=True)
class IdleConfig:
    instance_id: str
    region: str
    idle_stop_s: float


def read_config(home: Path) -> IdleConfig | None:
    """The idle stop this home's instance is told, or None (off, or no controller instance)."""
    try:
        data = json.loads((home / CONFIG_FILE).read_text())
        return IdleConfig(str(data["instance_id"]), str(data["region"]), float(data["idle_stop_s"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        return None  # a damaged file: `controller up` writes it again; no stop meanwhile


def write_config(home: Path, config: IdleConfig | None) -> None:
    """Tell the instance its idle stop (None or 0 s: never, the file goes)."""
    path = home / CONFIG_FILE
    if config is None or config.idle_stop_s <= 0:
        path.unlink(missing_ok=True)
        return
    home.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(
        json.dumps(
            {
                "instance_id": config.instance_id,
                "region": config.region,
                "idle_stop_s": config.idle_stop_s,
            }
        )
        + "\n"
    )
    os.replace(tmp, path)


def note_command(home: Path, args: list[str]) -> None:
    """A command arrived: the mark touched (unless it is no use), the watcher running."""
    if not (home / CONFIG_FILE).exists():
        return  # one stat: no idle stop here (the laptop, an ssh host, or it is off)
    if not args or args[0] not in NOT_USE:
        touch_mark(home)
    ensure_watcher(home)


def touch_mark(home: Path, at: float | None = None) -> None:
    path = home / MARK_FILE
    path.touch()
    if at is not None:
        os.utime(path, (at, at))


def last_command_at(home: Path) -> float | None:
    try:
        return (home / MARK_FILE).stat().st_mtime
    except FileNotFoundError:
        return None


def watcher_pid(home: Path) -> int | None:
    path = home / IDLE_WATCH_LOCK_FILE
    try:
        pid = int(path.read_text().strip() or "0") or None
    except (OSError, ValueError):
        pid = None
    return pid if lock_is_held(path, pid) else None


def ensure_watcher(home: Path) -> int:
    """The watcher's pid, started (detached, its own session) when none runs."""
    pid = watcher_pid(home)
    if pid is not None:
        return pid
    with open(home / IDLE_WATCH_LOG_FILE, "ab") as log_fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", MODULE],
            stdin=subprocess.DEVNULL,
            stdout=log_fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # outlives the ssh session that started it
            env={**os.environ, HOME_VAR: str(home)},
            close_fds=True,
        )
    return proc.pid


# ------------------------------------------------------------------ the decision
def seconds_left(
    now: float, idle_stop_s: float, *, last_command_at: float | None, last_live_at: float
) -> float:
    """How long until the instance stops itself: idle_stop_s after the later of the last
    command and the last moment something was live (<= 0: stop now). 0 s: never (inf)."""
    if idle_stop_s <= 0:
        return float("inf")
    since = max(last_live_at, last_command_at or 0.0)
    return since + idle_stop_s - now


def write_state(
    home: Path, *, started_at: float, last_live_at: float, live: bool, error: str | None = None
) -> None:
    path = home / IDLE_WATCH_STATE_FILE
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    state = {"started_at": started_at, "last_live_at": last_live_at, "live": live}
    tmp.write_text(json.dumps({**state, "error": error}) + "\n")
    os.replace(tmp, path)


@dataclass(frozen=True)
class IdleView:
    """What `controller status` shows of the idle stop."""

    idle_stop_s: float
    watcher_pid: int | None
    last_command_at: float | None
    idle_since: float | None  # None: something is live
    stops_in_s: float | None
    error: str | None = None  # its last StopInstances failure (e.g. a role without it)

    def to_dict(self) -> dict[str, Any]:
        return {
            "idle_stop_s": self.idle_stop_s,
            "watcher_pid": self.watcher_pid,
            "last_command_at": self.last_command_at,
            "idle_since": self.idle_since,
            "stops_in_s": self.stops_in_s,
            "error": self.error,
        }


def view(home: Path, *, live: bool, now: float | None = None) -> IdleView | None:
    config = read_config(home)
    if config is None:
        return None
    now = time.time() if now is None else now
    try:
        state = json.loads((home / IDLE_WATCH_STATE_FILE).read_text())
        last_live = float(state.get("last_live_at") or 0.0)
        error = str(state["error"]) if state.get("error") else None
    except (OSError, ValueError, AttributeError, TypeError):
        last_live, error = 0.0, None
    if live:
        last_live = now
    command = last_command_at(home)
    left = seconds_left(now, config.idle_stop_s, last_command_at=command, last_live_at=last_live)
    since = None if live else max(last_live, command or 0.0) or None
    return IdleView(config.idle_stop_s, watcher_pid(home), command, since, max(0.0, left), error)
