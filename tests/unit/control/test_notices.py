"""Spot notices and rebalance recommendations, as the controller reads them from the run
folder (node 0's) and the other nodes' folders."""

from __future__ import annotations

import json
import time
from pathlib import Path

from spotrun.cloud.local import LocalProvider
from spotrun.control.instance_records import to_record
from spotrun.control.notices import NoticeWatch
from spotrun.control.run_instances import RunInstances
from spotrun.core.config import LaunchSpec, load_settings
from spotrun.store.ledger import Ledger
from tests.unit.control.parts import instance


def _notice(folder: Path, instance_id: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    notice = {"instance_id": instance_id, "seen_at": time.time(), "action": "terminate"}
    (folder / "notice.json").write_text(json.dumps(notice))


def test_a_notice_dooms_its_node_once_and_a_rebalance_is_told_once(tmp_path: Path) -> None:
    settings = load_settings(tmp_path)
    with Ledger(settings) as ledger:
        run = ledger.create_run(LaunchSpec(recipe="digits-fast", cloud="aws"))
        run.run_dir.mkdir(parents=True, exist_ok=True)
        live = [instance("i-a", run.id), instance("i-b", run.id)]
        for inst in live:
            ledger.upsert_instance(to_record(inst))
        instances = RunInstances(ledger, LocalProvider(settings), run.id, multi_node=True)
        watch = NoticeWatch(instances)
        assert watch.check(run, live) is None
        (run.run_dir / "rebalance.json").write_text("{}")
        _notice(run.run_dir, "i-other")  # an instance that is not the run's capacity now
        assert watch.check(run, live) is None
        assert watch.check(run, live) is None
        spot = [e.message for e in ledger.events(run.id) if e.kind == "spot"]
        assert spot == ["EC2 recommends rebalancing: this capacity is at elevated risk"]

        _notice(run.run_dir / "nodes" / "i-b", "i-b")  # node 1 reports into its own folder
        assert watch.check(run, live) == "spot interruption notice on i-b"
        assert instances.doomed_reasons() == {"i-a": None, "i-b": "spot interruption notice"}
        assert watch.check(run, live) is None  # doomed already: one replacement, not two
        spot = [e.message for e in ledger.events(run.id) if e.kind == "spot"]
        assert len(spot) == 2 and spot[1].startswith("interruption notice on i-b (seen ")
