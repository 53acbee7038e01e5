"""What a job reports in its run folder becomes the ledger's: its latest metrics, staging and
device events (each told once)."""

from __future__ import annotations

import json
from pathlib import Path

from spotrun.control.run_reports import RunReports
from spotrun.core.config import LaunchSpec, load_settings
from spotrun.datasets.progress import StagingStatus, write_status
from spotrun.store.ledger import Ledger
from spotrun.train.device_record import write_record


def test_metrics_staging_and_device_reports_reach_the_ledger_once(tmp_path: Path) -> None:
    with Ledger(load_settings(tmp_path)) as ledger:
        run = ledger.create_run(LaunchSpec(recipe="digits-fast", cloud="local"))
        run.run_dir.mkdir(parents=True, exist_ok=True)
        reports = RunReports(ledger, run)
        reports.pull(run)
        assert ledger.get_run(run.id).last_metrics == {} and ledger.events(run.id) == []

        lines = [{"step": 10, "test_acc": 0.5}, {"step": 20, "test_acc": 0.75}]
        (run.run_dir / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in lines))
        status = StagingStatus("s3://sets/pets", "/nvme/pets", state="done", total_bytes=10**6)
        write_status(run.run_dir / "staging.json", status)
        write_record(run.run_dir, "cpu (AVX2)", {"cpu": True}, [])
        reports.pull(run)
        reports.pull(run)
        assert ledger.get_run(run.id).last_metrics == lines[-1]
        kinds = [e.kind for e in ledger.events(run.id)]
        assert kinds == ["staging", "device"], kinds
        assert ledger.events(run.id)[0].message.startswith("staged s3://sets/pets: ")
