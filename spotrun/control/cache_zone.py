"""Where a replacement is asked for when the run has a cache volume (`[aws] data_cache_volume`).

An EBS volume attaches only to an instance in its own availability zone. A replacement in the
zone of the run's cache volume gets that volume back, with every shard already staged on it;
one anywhere else starts on a fresh, blank volume and stages the whole set again (the old one
is deleted then). So the offers in the volume's zone are asked first, any instance type, and
the other zones only when that zone has no capacity; the run's events say which way it went.
"""

from __future__ import annotations

from spotrun.cloud.base import Offer
from spotrun.store.ledger import Ledger, RunRecord

CACHE_ROLE = "data-cache"  # the spotrun:role tag and ledger role of a cache volume


def cache_volume_zone(ledger: Ledger, run_id: str) -> tuple[str, str] | None:
    """(zone, volume id) of the run's cache volume that is still in use: the one on the
    latest instance that held one; None when the run has none."""
    records = sorted(ledger.instances(run_id), key=lambda r: r.launched_at or 0.0, reverse=True)
    for record in records:
        for volume in record.details.get("volumes") or []:
            in_use = volume.get("role") == CACHE_ROLE and volume.get("deleted_at") is None
            if in_use and record.zone:
                return record.zone, str(volume.get("id"))
    return None


def prefer_cache_zone(ledger: Ledger, run: RunRecord, offers: list[Offer]) -> list[Offer]:
    """`offers` with those in the cache volume's zone first (their order kept), then the
    rest; unchanged when the run has no cache volume. Says so in the run's events."""
    found = cache_volume_zone(ledger, run.id)
    if found is None:
        return offers
    zone, volume_id = found
    here = [o for o in offers if o.zone == zone]
    if not here:
        ledger.add_event(
            run.id,
            "data",
            f"no offer of the plan is in {zone}, where cache volume {volume_id} is: the "
            "replacement starts on a fresh volume and stages the data set again",
        )
        return offers
    elsewhere = [o for o in offers if o.zone != zone]
    ledger.add_event(
        run.id,
        "data",
        f"replacement: asking {len(here)} offer(s) in {zone} first, where cache volume "
        f"{volume_id} holds the staged data set"
        + (", then other zones (with a fresh volume)" if elsewhere else ""),
    )
    return here + elsewhere
