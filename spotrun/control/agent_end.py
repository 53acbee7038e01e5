"""What the controller learns when an instance's agent ended it while no controller was there.

The agent (spotrun.agent.watcher) ends its own instance only when the job ended and nobody
collected it, at the run's cap, or when the job stopped making progress; it writes
self-terminated.json first and uploads it, with the job's exit record, log and metrics, to the
durable store under runs/RUN/instances/ID/. A controller that comes back (or whose sync missed
the instance's last seconds) finds the record in the run folder (synced) or among the stored
files (`pull_durable` brings them to RUN_DIR/instances/ID/), takes the instance's last files
as the run's, and ends the run the way the agent's reason says, instead of replacing capacity
that nobody took away.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from spotrun.agent.watcher import DEADLINE, JOB_ENDED, NO_PROGRESS
from spotrun.control.run_instances import RunInstances
from spotrun.control.run_sync import RunSync
from spotrun.core.errors import SpotrunError
from spotrun.core.rundir import EXIT_FILE, JOB_LOG_FILE, METRICS_FILE, SELF_TERMINATED_FILE
from spotrun.core.runstates import RunState
from spotrun.store.ledger import RunRecord

log = logging.getLogger(__name__)

STORED_DIR = "instances"  # RUN_DIR/instances/ID/: an instance's own stored files
KNOWN = (JOB_ENDED, DEADLINE, NO_PROGRESS)


@dataclass(frozen=True)
class AgentEnd:
    """One instance's self-termination record."""

    instance_id: str
    why: str  # JOB_ENDED, DEADLINE or NO_PROGRESS
    reason: str
    exit_code: int | None
    folder: Path  # where its record lies: the run folder, or its stored files' folder


def _read(folder: Path) -> AgentEnd | None:
    try:
        data = json.loads((folder / SELF_TERMINATED_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("instance_id"), str):
        return None
    why = data.get("why")
    code = data.get("exit_code")
    return AgentEnd(
        instance_id=data["instance_id"],
        why=why if why in KNOWN else JOB_ENDED,  # a record without one: the job had ended
        reason=str(data.get("reason") or "the instance's agent ended it"),
        exit_code=code if isinstance(code, int) else None,
        folder=folder,
    )


def find_end(run_dir: Path, instance_ids: set[str]) -> AgentEnd | None:
    """The self-termination record of one of `instance_ids` (the run's current capacity)."""
    for folder in (run_dir, *(run_dir / STORED_DIR / i for i in sorted(instance_ids))):
        found = _read(folder)
        if found is not None and found.instance_id in instance_ids:
            return found
    return None


def adopt_files(run_dir: Path, end: AgentEnd) -> list[str]:
    """Make the ended instance's last files the run's: its exit record, and its log and metrics
    where they hold more than this machine's copy (they grew while no controller synced)."""
    if end.folder == run_dir:
        return []
    taken = []
    for name in (EXIT_FILE, JOB_LOG_FILE, METRICS_FILE):
        source, target = end.folder / name, run_dir / name
        if not source.is_file():
            continue
        if name != EXIT_FILE and target.exists() and target.stat().st_size >= source.stat().st_size:
            continue
        tmp = target.with_name(target.name + ".part")
        shutil.copyfile(source, tmp)
        os.replace(tmp, target)
        taken.append(name)
    return taken


class AgentEnds:
    """The controller's look for its run's agent end (the run's current instances only)."""

    def __init__(self, instances: RunInstances, sync: RunSync) -> None:
        self.instances = instances
        self.sync = sync

    def find(self, run: RunRecord, *, stored: bool) -> AgentEnd | None:
        """The self-termination record of the run's current instance, if its agent ended it:
        synced here, or (stored=True, for an instance that is gone) in the durable store."""
        if run.state not in (RunState.BOOTSTRAPPING, RunState.RUNNING):
            return None  # the agent is started while bootstrapping (before the job)
        current = {i for i, doomed in self.instances.doomed_reasons().items() if not doomed}
        end = find_end(run.run_dir, current)
        if end is None and stored and not self.instances.provider.shares_filesystem:
            self.sync.durable(run)
            end = find_end(run.run_dir, current)
        if end is not None and end.why == JOB_ENDED and run.state is not RunState.RUNNING:
            return None  # no job of this instance ran yet: an older record
        return end

    def after_error(self, run: RunRecord) -> AgentEnd | None:
        """After an error: the agent's record, if the instance's agent ended the instance."""
        if run.state not in (RunState.BOOTSTRAPPING, RunState.RUNNING):
            return None
        try:
            return self.find(run, stored=not self.instances.live())
        except SpotrunError as exc:  # EC2 or S3 unreachable too: recovery decides
            log.warning("could not look for the agent's record: %s", exc)
            return None
