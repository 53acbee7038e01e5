"""The idle watcher on `controller up --on aws`'s instance:
`python -m spotrun.remote_controller.idle_stop`.

Started detached by the first command on the instance (spotrun.remote_controller.idle_marks),
it holds SPOTRUN_HOME/idle-watch.lock for its life. It outlives the controller, which exits once
nothing is live: every poll it asks whether something is live (a run or sweep in the ledger,
or the controller process running), and once nothing has been live and no command has come
for the configured time it stops its own instance (ec2:StopInstances with the instance's role,
which may stop only itself, tagged spotrun:role=controller). The root volume keeps the home;
the laptop's next command starts the instance again (spotrun.remote_controller.wake).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time

from spotrun.cloud import controller_machines as machines
from spotrun.core.config import Settings, load_settings
from spotrun.core.errors import SpotrunError
from spotrun.core.locks import try_lock
from spotrun.drive.home import running_pid
from spotrun.remote_controller import idle_marks as marks
from spotrun.store.ledger import Ledger
from spotrun.store.sweeps import SweepStore

log = logging.getLogger(__name__)
CLOUD = "aws"  # the cloud whose instance this watcher stops (`controller up --on aws`)

MIN_POLL_S = 0.5
MAX_POLL_S = 30.0
RETRY_S = 60.0  # a StopInstances that failed is tried again after this
GOING_DOWN_S = 600.0  # after its stop, the machine goes down: this process waits for it


def poll_s(idle_stop_s: float) -> float:
    return min(MAX_POLL_S, max(MIN_POLL_S, idle_stop_s / 10))


def something_live(settings: Settings) -> bool:
    """A run or sweep is live under this home, or its controller runs (it may be picking a
    launch up that the ledger shows a moment later)."""
    if running_pid(settings) is not None:
        return True
    if not (settings.home / "ledger.db").exists():
        return False
    with Ledger(settings) as ledger:
        return bool(ledger.active_runs()) or bool(SweepStore(ledger).live())


def watch(settings: Settings, wake: threading.Event) -> int:
    home = settings.home
    held = try_lock(home / marks.IDLE_WATCH_LOCK_FILE)
    if held is None:
        return 0  # another watcher watches
    os.ftruncate(held.fileno(), 0)
    held.write(f"{os.getpid()}\n")
    held.flush()
    started = last_live = time.time()
    error: str | None = None  # the last StopInstances failure (shown by `controller status`)
    while True:
        config = marks.read_config(home)
        if config is None:
            log.info("the idle stop is off: the watcher ends")
            return 0
        try:
            live = something_live(settings)
        except SpotrunError as exc:  # a busy ledger: take it as live, ask again
            log.warning("cannot tell whether something is live (%s)", exc.user_message())
            live = True
        now = time.time()
        if live:
            last_live = now
        marks.write_state(home, started_at=started, last_live_at=last_live, live=live, error=error)
        seen = marks.last_command_at(home)
        left = marks.seconds_left(
            now, config.idle_stop_s, last_command_at=seen, last_live_at=last_live
        )
        if left > 0:
            wake.wait(min(left, poll_s(config.idle_stop_s)))
            continue
        if marks.last_command_at(home) != seen:
            continue  # a command came just now
        log.info(
            "nothing live and no command for %.0f s: stopping %s",
            config.idle_stop_s,
            config.instance_id,
        )
        try:
            machines.stop_self(CLOUD, settings, config.region, config.instance_id)
        except SpotrunError as exc:
            error = f"could not stop {config.instance_id}: {exc.user_message()}"
            log.error("%s", error)
            marks.write_state(
                home, started_at=started, last_live_at=last_live, live=live, error=error
            )
            wake.wait(RETRY_S)
            continue
        wake.wait(GOING_DOWN_S)  # the machine goes down with this process on it
        return 0


def main() -> int:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr
    )
    return watch(load_settings(), threading.Event())


if __name__ == "__main__":
    sys.exit(main())
