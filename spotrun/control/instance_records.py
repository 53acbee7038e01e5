"""An instance as the cloud describes it, turned into the ledger's record of it."""

from __future__ import annotations

from typing import Any

from spotrun.cloud.base import Instance
from spotrun.store.ledger import InstanceRecord


def to_record(instance: Instance, **changes: Any) -> InstanceRecord:
    return InstanceRecord(
        id=instance.id,
        run_id=instance.run_id,
        provider=instance.provider,
        instance_type=instance.instance_type,
        market=instance.market,
        state=instance.state,
        region=instance.region,
        zone=instance.zone,
        node_index=instance.node_index,
        address=instance.address,
        launched_at=instance.launched_at,
        **changes,
    )
