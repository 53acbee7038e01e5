"""A run's instances as the controller records them: doomed ones, and ends recorded once."""

from __future__ import annotations

from pathlib import Path

from spotrun.cloud.local import LocalProvider
from spotrun.control.instance_records import to_record
from spotrun.control.run_instances import DOOMED, RunInstances
from spotrun.core.config import LaunchSpec, load_settings
from spotrun.store.ledger import Ledger
from tests.unit.control.parts import instance


def test_a_doomed_mark_keeps_the_records_other_details(tmp_path: Path) -> None:
    settings = load_settings(tmp_path)
    with Ledger(settings) as ledger:
        run = ledger.create_run(LaunchSpec(recipe="digits-fast", cloud="aws"))
        a, b = instance("i-a", run.id), instance("i-b", run.id)
        volumes = [{"size_gb": 8, "type": "gp3"}]
        ledger.upsert_instance(to_record(a, details={"volumes": volumes}))
        ledger.upsert_instance(to_record(b))
        instances = RunInstances(ledger, LocalProvider(settings), run.id, multi_node=True)
        assert instances.doomed_ids() == set()
        instances.mark_doomed(a, "spot interruption notice")
        assert instances.doomed_ids() == {"i-a"}
        assert instances.doomed_reasons() == {"i-a": "spot interruption notice", "i-b": None}
        (record,) = [r for r in ledger.instances(run.id) if r.id == "i-a"]
        assert record.details["volumes"] == volumes and record.details[DOOMED]


def test_an_end_is_recorded_once_with_the_clouds_time_and_reason(tmp_path: Path) -> None:
    settings = load_settings(tmp_path)
    with Ledger(settings) as ledger:
        run = ledger.create_run(LaunchSpec(recipe="digits-fast", cloud="aws"))
        live = instance("i-live", run.id)
        gone = instance(
            "i-gone",
            run.id,
            "terminated",
            ended_at=1_000.0,
            state_reason="Server.SpotInstanceTermination",
        )
        for inst in (live, gone):
            ledger.upsert_instance(to_record(inst))
        instances = RunInstances(ledger, LocalProvider(settings), run.id, multi_node=False)
        assert instances.record_ended([live, gone]) == [gone]
        records = {r.id: r for r in ledger.instances(run.id)}
        assert records["i-gone"].terminated_at == 1_000.0
        assert records["i-gone"].end_reason == "Server.SpotInstanceTermination"
        assert records["i-live"].terminated_at is None
        later = instance("i-gone", run.id, "terminated", ended_at=2_000.0, state_reason="other")
        assert instances.record_ended([later]) == []  # recorded already: kept as it was
        assert {r.id: r for r in ledger.instances(run.id)}["i-gone"].terminated_at == 1_000.0
