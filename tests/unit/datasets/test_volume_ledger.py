"""A snapshot's data volume in the ledger: listed beside the root volume, moved (never counted
twice) when a replacement instance takes it over, closed at teardown, priced as storage."""

from __future__ import annotations

import time
from pathlib import Path

from spotrun.cloud.base import Instance
from spotrun.control.data_volumes import _record_volume, mark_data_volumes_deleted
from spotrun.core.config import LaunchSpec, load_settings
from spotrun.store.ledger import InstanceRecord, Ledger


def _instance(run_id: str, instance_id: str, zone: str) -> Instance:
    return Instance(instance_id, run_id, "aws", "g5.xlarge", "us-east-1", zone, "spot", "running")


def _volumes(ledger: Ledger, run_id: str, instance_id: str) -> list[dict[str, object]]:
    (record,) = [r for r in ledger.instances(run_id) if r.id == instance_id]
    return list(record.details.get("volumes") or [])


def test_a_data_volume_is_listed_moved_and_closed(tmp_path: Path) -> None:
    ledger = Ledger(load_settings(tmp_path / "home"))
    run = ledger.create_run(LaunchSpec(recipe="digits-fast", cloud="aws"))
    start = time.time() - 600
    for instance_id in ("i-first", "i-second"):
        ledger.upsert_instance(
            InstanceRecord(instance_id, run.id, "aws", "g5.xlarge", "spot", "running",
                           "us-east-1", "us-east-1a", launched_at=start)
        )  # fmt: skip
    _record_volume(ledger, run, _instance(run.id, "i-first", "us-east-1a"), "vol-1", 3, start)
    first = _volumes(ledger, run.id, "i-first")
    assert [v.get("role") for v in first] == [None, "data"]  # the root volume kept beside it
    assert first[1]["size_gb"] == 3 and first[1]["created_at"] == start

    # An upsert without details (the controller's, every poll) keeps them.
    ledger.upsert_instance(
        InstanceRecord("i-first", run.id, "aws", "g5.xlarge", "spot", "terminated")
    )
    assert _volumes(ledger, run.id, "i-first") == first

    # The replacement takes the same volume over: the first instance's charge ends there.
    _record_volume(ledger, run, _instance(run.id, "i-second", "us-east-1a"), "vol-1", 3, start)
    (moved,) = [v for v in _volumes(ledger, run.id, "i-first") if v.get("role") == "data"]
    (taken,) = [v for v in _volumes(ledger, run.id, "i-second") if v.get("role") == "data"]
    assert moved["deleted_at"] == taken["created_at"] and taken.get("deleted_at") is None

    mark_data_volumes_deleted(ledger, run, at=taken["created_at"] + 60)  # type: ignore[operator]
    (closed,) = [v for v in _volumes(ledger, run.id, "i-second") if v.get("role") == "data"]
    assert closed["deleted_at"] == taken["created_at"] + 60  # type: ignore[operator]
    assert moved == [v for v in _volumes(ledger, run.id, "i-first") if v.get("role") == "data"][0]


def test_cache_volume_size_covers_the_set_and_the_reserve() -> None:
    from spotrun.control.data_volumes import cache_size_gb

    assert cache_size_gb(0) == 2
    assert cache_size_gb(1 << 30) == 4  # 1.1 GiB rounds up to 2, plus 2
    assert cache_size_gb(150 * 10**9) == 156
