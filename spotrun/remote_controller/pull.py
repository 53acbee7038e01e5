"""`spotrun pull RUN`: a run's folder from the controller host to this machine, incrementally.

The controller keeps each run's folder (metrics, logs, checkpoints, the job's outputs) in its
own SPOTRUN_HOME; this brings it here with the same incremental sync the controller uses with
an instance (only new or changed files move; growing files from where the copy ends).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from spotrun.core.config import Settings
from spotrun.core.errors import NotFoundError, RemoteError
from spotrun.remote.listing import list_remote
from spotrun.remote.sync import OnFile, pull_run_dir
from spotrun.remote_controller import record as records
from spotrun.remote_controller.ssh_binary import SshBinaryRunner
from spotrun.remote_controller.wake import awake
from spotrun.service.lookup import open_ledger


@dataclass(frozen=True)
class Pulled:
    run_id: str
    name: str
    state: str
    folder: Path
    already_here: bool  # no remote controller: the run folder is this machine's own
    files: int = 0
    bytes: int = 0
    unchanged: int = 0


@dataclass(frozen=True)
class PullPlan:
    files: int
    bytes: int


def pull_run(
    settings: Settings,
    ref: str,
    *,
    to: Path | None = None,
    on_plan: Callable[[PullPlan], None] | None = None,
    on_file: OnFile | None = None,
    log: Callable[[str], None] | None = None,
) -> Pulled:
    """Bring run `ref`'s folder from the controller host (a stopped controller instance is
    started first, saying so through `log`)."""
    record = records.load_record(settings.home)
    if record is None:
        ledger = open_ledger(settings)
        try:
            run = ledger.resolve(ref)
        finally:
            ledger.close()
        return Pulled(run.id, run.name, run.state.value, run.run_dir, True)
    record = awake(settings, record, log=log or (lambda _line: None))
    runner = SshBinaryRunner(settings.home, record)
    result = runner.run(record.spotrun_command(["status", ref, "--json"]), timeout_s=120)
    if not result.ok:
        said = [line for line in result.stderr.strip().splitlines() if line.strip()]
        message = said[-1].removeprefix("error: ") if said else f"exit {result.exit_code}"
        raise NotFoundError(f"the controller on {record.where}: {message}")
    try:
        status = json.loads(result.stdout)
        run_id, name, remote_dir = status["id"], status["name"], status["run_dir"]
    except (ValueError, KeyError) as exc:
        raise RemoteError(f"the controller on {record.where} answered no run status") from exc
    folder = (to or settings.home / "runs" / run_id).expanduser().absolute()
    listing = list_remote(runner, remote_dir, skip_folders=()) or []
    if on_plan is not None:
        on_plan(PullPlan(len(listing), sum(item.size for item in listing)))
    synced = pull_run_dir(runner, remote_dir, folder, final=False, on_file=on_file, skip_folders=())
    return Pulled(
        run_id,
        name,
        str(status.get("state")),
        folder,
        False,
        files=len(synced.fetched),
        bytes=synced.appended_bytes + synced.whole_bytes,
        unchanged=synced.unchanged,
    )
