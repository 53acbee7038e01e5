"""The pure parts of spot recovery: which checkpoint is complete, metrics cut to a step,
notices read back, the order replacements are asked for in."""

from __future__ import annotations

import json
import struct
import zipfile
from pathlib import Path

import pytest
import torch

from spotrun.cloud.base import Offer
from spotrun.control.checkpoint_restore import truncate_metrics
from spotrun.control.notices import read_notice
from spotrun.control.recovery import Recovery
from spotrun.core.checkpoint_files import checkpoint_is_complete, newest_complete_checkpoint
from spotrun.core.config import LaunchSpec, load_settings
from spotrun.core.errors import CapacityError
from spotrun.store.ledger import InstanceRecord, Ledger


def _save(folder: Path, step: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"ckpt-{step:09d}.pt"
    torch.save({"format": 2, "w": torch.arange(1000.0) * step}, path)
    return path


def test_newest_complete_checkpoint_skips_a_torn_one(tmp_path: Path) -> None:
    folder = tmp_path / "checkpoints"
    _save(folder, 23)
    newest = _save(folder, 46)
    assert newest_complete_checkpoint(tmp_path) == (newest, 46)
    data = newest.read_bytes()
    newest.write_bytes(data[: len(data) // 2])  # torn: no central directory
    assert not checkpoint_is_complete(newest)
    assert newest_complete_checkpoint(tmp_path) == (folder / "ckpt-000000023.pt", 23)
    # A whole archive whose member bytes were damaged fails its CRC check too.
    with zipfile.ZipFile(folder / "ckpt-000000023.pt") as archive:
        member = max(archive.infolist(), key=lambda m: m.file_size)  # the tensor's bytes
    raw = bytearray((folder / "ckpt-000000023.pt").read_bytes())
    start = member.header_offset
    name_len, extra_len = struct.unpack("<HH", raw[start + 26 : start + 30])
    raw[start + 30 + name_len + extra_len + member.compress_size // 2] ^= 0xFF
    (folder / "ckpt-000000023.pt").write_bytes(bytes(raw))
    assert newest_complete_checkpoint(tmp_path) is None
    assert newest_complete_checkpoint(tmp_path / "nothing") is None


def test_truncate_metrics_keeps_lines_up_to_the_step(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps({"step": s}) + "\n" for s in (23, 46, 69)) + '{"st')
    truncate_metrics(path, 46)
    assert [json.loads(x)["step"] for x in path.read_text().splitlines()] == [23, 46]


def test_read_notice(tmp_path: Path) -> None:
    assert read_notice(tmp_path) is None
    (tmp_path / "notice.json").write_text("{not json")
    assert read_notice(tmp_path) is None
    (tmp_path / "notice.json").write_text(
        json.dumps({"instance_id": "i-1", "seen_at": 5.0, "action": "terminate"})
    )
    notice = read_notice(tmp_path)
    assert notice is not None and (notice.instance_id, notice.seen_at) == ("i-1", 5.0)
    assert not notice.stored  # the agent has not made its upload yet
    (tmp_path / "notice.json").write_text(
        json.dumps({"instance_id": "i-1", "seen_at": 5.0, "uploaded": [], "stored_at": 7.5})
    )
    notice = read_notice(tmp_path)
    assert notice is not None and notice.stored


def _offer(instance_type: str, zone: str, price: float) -> Offer:
    return Offer("aws", instance_type, "us-east-1", zone, 0, None, None, 2, 4.0, price, 0.1)


def test_replacement_offers_same_offer_first_and_within_budget(tmp_path: Path) -> None:
    settings = load_settings(tmp_path)
    offers = [_offer("c6i.large", "us-east-1a", 0.03), _offer("m6i.large", "us-east-1b", 0.04)]
    with Ledger(settings) as ledger:
        run = ledger.create_run(LaunchSpec(recipe="digits-fast", cloud="aws", max_cost_usd=1.0))
        recovery = Recovery(ledger, provider=None, run_id=run.id)  # type: ignore[arg-type]
        assert recovery.offers(run, offers) == offers  # first launch: the plan's order
        ledger.upsert_instance(
            InstanceRecord(
                "i-1",
                run.id,
                "aws",
                "m6i.large",
                "spot",
                "terminated",
                "us-east-1",
                "us-east-1b",
                launched_at=100.0,
            )
        )
        assert recovery.offers(run, offers) == [offers[1], offers[0]]  # the same offer first
        pricey = [_offer("p4d.24xlarge", "us-east-1a", 500.0)]
        with pytest.raises(CapacityError, match="budget"):
            recovery.offers(run, pricey)


def test_a_replacement_asks_the_cache_volumes_zone_first(tmp_path: Path) -> None:
    from spotrun.control.cache_zone import prefer_cache_zone

    settings = load_settings(tmp_path)
    offers = [
        _offer("g4dn.xlarge", "us-east-1b", 0.21),
        _offer("g4dn.xlarge", "us-east-1a", 0.22),
        _offer("g6.xlarge", "us-east-1b", 0.37),
    ]
    with Ledger(settings) as ledger:
        run = ledger.create_run(LaunchSpec(recipe="digits-fast", cloud="aws"))
        assert prefer_cache_zone(ledger, run, offers) == offers  # no cache volume: as planned

        def held(instance_id: str, zone: str, at: float, deleted_at: float | None) -> None:
            volume = {"id": f"vol-{zone[-1]}", "role": "data-cache", "deleted_at": deleted_at}
            details = {"volumes": [{"size_gb": 8, "type": "gp3"}, volume]}
            ledger.upsert_instance(
                InstanceRecord(
                    instance_id,
                    run.id,
                    "aws",
                    "g4dn.xlarge",
                    "spot",
                    "terminated",
                    "us-east-1",
                    zone,
                    launched_at=at,
                    details=details,
                )
            )

        held("i-1", "us-east-1b", 100.0, deleted_at=150.0)  # moved on: no longer in use
        held("i-2", "us-east-1a", 150.0, deleted_at=None)
        # The volume in use is in 1a: the offer there first, the rest in their order; an event
        # says why.
        assert prefer_cache_zone(ledger, run, offers[::-1]) == [offers[1], offers[2], offers[0]]
        events = [e.message for e in ledger.events(run.id)]
        assert any("in us-east-1a first, where cache volume vol-a" in e for e in events), events
        assert prefer_cache_zone(ledger, run, [offers[0]]) == [offers[0]]
        assert "stages the data set again" in ledger.events(run.id)[-1].message
