"""A replacement instance starts where the run left off: its newest whole checkpoint put there.

The durable store comes first when it holds a checkpoint at least as new as this machine's (the
replacement downloads it in the region, FetchesCheckpoints); otherwise the newest checkpoint
here that reads back whole is pushed over the runner. Either way the run's recipe, metrics and
log go with it, so that the resumed trainer appends to them, and metrics.jsonl is cut back to
the checkpoint's step (the trainer writes the later lines again).

A replacement in another region than the store's reads the checkpoint across regions: the
bytes are an event and a transfer in the instance's record, which its bill charges
(spotrun.cloud.ranking, CROSS_REGION_USD_PER_GB).
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import time
from pathlib import Path

from spotrun.cloud.base import Instance, Provider
from spotrun.cloud.capabilities import FetchesCheckpoints
from spotrun.core.checkpoint_files import newest_complete_checkpoint
from spotrun.core.metrics_file import parse_line
from spotrun.core.money import show_usd
from spotrun.core.rundir import (
    CHECKPOINTS_DIR,
    EXIT_FILE,
    JOB_LOG_FILE,
    METRICS_FILE,
    RECIPE_FILE,
    SYNC_STATE_FILE,
)
from spotrun.cost.rules import TRANSFERS, Transfer, transfers_of
from spotrun.remote.listing import list_remote
from spotrun.remote.runner import Runner
from spotrun.store.ledger import Ledger, RunRecord


def truncate_metrics(path: Path, step: int) -> None:
    """Keep the metrics lines up to `step` (the resumed trainer writes the later ones again)."""
    if not path.exists():
        return
    kept = []
    for line in path.read_text().splitlines():
        record = parse_line(line)  # a line that is not one object goes, as it was unread
        at = record.get("step", 0) if record is not None else None
        if isinstance(at, int | float) and at <= step:
            kept.append(line)
    text = "".join(f"{line}\n" for line in kept)
    if text != path.read_text():
        path.write_text(text)


class CheckpointRestore:
    """Puts a run's newest complete checkpoint on its replacement instance."""

    def __init__(self, ledger: Ledger, provider: Provider) -> None:
        self.ledger = ledger
        self.provider = provider

    def restore(
        self, run: RunRecord, head: Instance, runner: Runner, remote_dir: str
    ) -> int | None:
        """Put the newest complete checkpoint on `head` (fetched there from the durable store
        when it holds one at least as new as this machine's; pushed from here otherwise) with
        the run's log and metrics; returns the step it resumes from, or None when there is
        nothing to resume."""
        (run.run_dir / EXIT_FILE).unlink(missing_ok=True)  # the last job's; a new one comes
        found = newest_complete_checkpoint(run.run_dir)
        fetched = self._fetch_on(run, head, runner, remote_dir, found[1] if found else 0)
        if fetched is not None:
            return fetched
        if found is None:
            if run.spec.job is None:  # your own command's checkpoint dir is restored whole
                self.ledger.add_event(
                    run.id, "resume", f"no complete spotrun checkpoint to restore onto {head.id}"
                )
            return None
        checkpoint, step = found
        truncate_metrics(run.run_dir / METRICS_FILE, step)
        runner.run(f"mkdir -p {shlex.quote(remote_dir)}/{CHECKPOINTS_DIR}", timeout_s=60).check(
            "making the run folder on the replacement"
        )
        runner.put(checkpoint, f"{remote_dir}/{CHECKPOINTS_DIR}/{checkpoint.name}")
        self._push_run_files(run, runner, remote_dir)
        self.ledger.add_event(
            run.id, "resume", f"restored {checkpoint.name} (step {step}) onto {head.id}"
        )
        return step

    def _fetch_on(
        self, run: RunRecord, head: Instance, runner: Runner, remote_dir: str, at_least: int
    ) -> int | None:
        """Have the replacement fetch the newest whole checkpoint of step `at_least` or later
        from the durable store itself; its step, or None (then it is pushed from here)."""
        if not isinstance(self.provider, FetchesCheckpoints) or run.spec.job is not None:
            return None  # your own command's checkpoint dir is restored whole
        fetched = self.provider.fetch_checkpoint(head, runner, remote_dir, at_least)
        if fetched is None:
            return None
        for name in fetched.incomplete:
            self.ledger.add_event(
                run.id, "resume", f"stored {name} is incomplete; looking at the one before it"
            )
        if fetched.name is None or fetched.step is None:
            return None
        self._record_transfer(run, head, fetched.size_bytes, fetched.store_region, fetched.name)
        truncate_metrics(run.run_dir / METRICS_FILE, fetched.step)
        self._push_run_files(run, runner, remote_dir)
        self.ledger.add_event(
            run.id,
            "resume",
            f"restored {fetched.name} (step {fetched.step}) onto {head.id} "
            "from the durable store (fetched there)",
        )
        return int(fetched.step)

    def _record_transfer(
        self, run: RunRecord, head: Instance, size: int, source: str | None, what: str
    ) -> None:
        """The bytes `head` read from the store in another region: an event, and a transfer
        in its ledger record (its bill charges it)."""
        if not size or source is None or source == head.region:
            return
        transfer = Transfer(size, source, head.region, int(time.time()), what)
        record = next((r for r in self.ledger.instances(run.id) if r.id == head.id), None)
        if record is not None:
            kept = [t.to_detail() for t in transfers_of(record.details)]
            details = {**record.details, TRANSFERS: [*kept, transfer.to_detail()]}
            self.ledger.upsert_instance(dataclasses.replace(record, details=details))
        self.ledger.add_event(
            run.id,
            "transfer",
            f"{head.id} read {what} across regions: {size} bytes from {source} to "
            f"{head.region}, {show_usd(transfer.usd)}",
        )

    def _push_run_files(self, run: RunRecord, runner: Runner, remote_dir: str) -> None:
        """The run's recipe, metrics and log, so the resumed trainer appends to them."""
        for name in (RECIPE_FILE, METRICS_FILE, JOB_LOG_FILE):
            path = run.run_dir / name
            if path.exists():
                runner.put(path, f"{remote_dir}/{name}")
        _mark_synced(run.run_dir, runner, remote_dir)


def _mark_synced(run_dir: Path, runner: Runner, remote_dir: str) -> None:
    """Tell the incremental sync that the pushed files are what we have (not new)."""
    listing = list_remote(runner, remote_dir) or []
    path = run_dir / SYNC_STATE_FILE
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        state = {}
    for item in listing:
        local = run_dir / item.path
        if local.exists() and local.stat().st_size == item.size:
            state[item.path] = [item.size, item.mtime]
    path.write_text(json.dumps(state, sort_keys=True))
