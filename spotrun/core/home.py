"""Where spotrun keeps its state (SPOTRUN_HOME) and the ledger's file in it.

Apart from spotrun.core.config so that a caller that only needs the path (shell completion
reading run names) does not import the settings models.
"""

from __future__ import annotations

import os
from pathlib import Path

from spotrun.core.rundir import HOME_VAR

LEDGER_FILE = "ledger.db"
CONFIG_FILE = "config.toml"
RUNS_FOLDER = "runs"  # one folder per run in it, named by the run's id
REMOTE_RECORD_FILE = "remote.json"  # the controller's host, when not this machine
# On a controller instance: its idle stop (spotrun.remote_controller.idle_marks); one stat tells the
# CLI whether to load that module at all
IDLE_STOP_FILE = "idle-stop.json"
# Notification targets (their webhook keys and mail passwords), 0600: spotrun.notify
NOTIFY_TARGETS_FILE = "notify-targets.json"


def default_home() -> Path:
    env = os.environ.get(HOME_VAR)
    return Path(env).expanduser() if env else Path.home() / ".spotrun"
