"""Billing rules: what an instance's life cost, from its times and its price history.

Pure functions only; the controller gathers the inputs (instance times from the cloud, price
history from the provider or the ledger's cache) and stores the lines this returns.
"""

from __future__ import annotations

from spotrun.ledger import CostLine, InstanceRecord

LOCAL_METHOD = "local cloud: this machine, no charge; instance-seconds recorded"


def instance_seconds(instance: InstanceRecord, now: float) -> float:
    if instance.launched_at is None:
        return 0.0
    end = instance.terminated_at if instance.terminated_at is not None else now
    return max(0.0, end - instance.launched_at)


def local_cost_lines(run_id: str, instances: list[InstanceRecord], now: float) -> list[CostLine]:
    return [
        CostLine(
            run_id=run_id,
            instance_id=inst.id,
            kind="compute",
            quantity=round(instance_seconds(inst, now), 3),
            unit="instance-s",
            usd=0.0,
            on_demand_usd=0.0,
            method=LOCAL_METHOD,
        )
        for inst in instances
    ]
