"""What the lab costs the test process while nothing happens (issue 37.7): its host watcher looks
at EC2 when something there changed or a boot came due, not twice a second whatever happened,
and waiting for a host does not make it look over and over."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from spotlab import Lab
from tests.helpers import wait_for


def test_the_watcher_looks_at_ec2_only_when_something_there_changed(
    make_lab: Callable[..., Lab],
) -> None:
    lab = make_lab(bucket=False, default_prices=False)
    assert lab.network is not None
    looks: list[float] = []
    describe = lab.hosts.instances

    def counted(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        looks.append(time.monotonic())
        return describe(*args, **kwargs)

    lab.hosts.instances = counted

    # Made straight in moto (no front to tell the watcher): its host still comes up, and
    # waiting for it asks for a look at most every half second (the boot has its own timer).
    (made,) = lab.ec2.run_instances(
        ImageId=lab.image_id,
        InstanceType="c6i.large",
        MinCount=1,
        MaxCount=1,
        SubnetId=lab.network.subnets["us-east-1a"],
    )["Instances"]
    instance_id = made["InstanceId"]
    started = time.monotonic()
    host = lab.hosts.wait_for(instance_id, 60)
    waited = time.monotonic() - started
    assert len(looks) <= waited / 0.5 + 4, (len(looks), waited)

    # Nothing changes in EC2 for a while: no look (one asked for before may still land). The
    # window is the point here, not a wait for an event: any load leaves the count at 0 or 1.
    before = len(looks)
    threading.Event().wait(2.0)
    assert len(looks) - before <= 1, looks[before:]

    # Ended straight in moto too: the watcher sees it and kills the host.
    lab.ec2.terminate_instances(InstanceIds=[instance_id])
    wait_for(lambda: not host.alive, timeout=30, what="the host of an instance ended in moto")
    assert instance_id not in lab.hosts
