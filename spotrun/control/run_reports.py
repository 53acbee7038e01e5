"""What a job reports in its run folder, turned into the ledger's record of the run.

Each poll (and once more at the end): the newest line of metrics.jsonl becomes the run's
metrics; staging.json's changes (spotrun.datasets.record) and each new device.json (what the
trainer chose for its device, and why) become the run's events.
"""

from __future__ import annotations

from spotrun.core.metrics_file import MetricsTail
from spotrun.core.rundir import METRICS_FILE
from spotrun.datasets.record import StagingWatch
from spotrun.store.ledger import Ledger, RunRecord
from spotrun.train.device_record import DeviceWatch


class RunReports:
    def __init__(self, ledger: Ledger, run: RunRecord) -> None:
        self.ledger = ledger
        self.metrics = MetricsTail(run.run_dir / METRICS_FILE)
        self.staging = StagingWatch(run.run_dir)
        self.devices = DeviceWatch(run.run_dir)

    def pull(self, run: RunRecord) -> None:
        """Metrics, staging and device reports, all that is new."""
        self.pull_metrics(run)
        for line in self.staging.poll():
            self.ledger.add_event(run.id, "staging", line)
        for line in self.devices.poll():
            self.ledger.add_event(run.id, "device", line)

    def pull_metrics(self, run: RunRecord) -> None:
        skipped = self.metrics.skipped
        new = self.metrics.read_new()
        if new:
            self.ledger.set_metrics(run.id, new[-1])
        if self.metrics.skipped > skipped:  # what a job writes is data: counted, never fatal
            count = self.metrics.skipped - skipped
            self.ledger.add_event(
                run.id,
                "metrics",
                f"skipped {count} line{'s' if count > 1 else ''} of {METRICS_FILE} that "
                f"{'are' if count > 1 else 'is'} not one JSON object",
            )
