"""Spot notices as the controller reads them: notice.json and rebalance.json, synced home.

The instance's agent (spotrun.agent.watcher) writes notice.json the moment EC2 announces an
interruption, and again once it has stored the checkpoint; rebalance.json when EC2 says the
capacity is at elevated risk. A multi-node run's other nodes report into their own folders
(spotrun.control.cluster.node_dirs). A noticed instance is marked doomed at once, so that its
replacement is requested while it still checkpoints.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from spotrun.agent.imds import notice_time
from spotrun.cloud.base import Instance
from spotrun.control.cluster import node_dirs
from spotrun.control.run_instances import NOTICED, RunInstances
from spotrun.core.rundir import NOTICE_FILE, REBALANCE_FILE
from spotrun.store.ledger import RunRecord

EC2_NOTICE_S = 120.0  # EC2 acts two minutes after its notice (the notice's own time says when)


@dataclass(frozen=True)
class Notice:
    instance_id: str
    seen_at: float
    action: str | None
    stored: bool = False  # the agent has made its upload to the durable store (or tried)
    checkpointed: bool = False  # the job ended (saving) before the upload
    acts_at: float | None = None  # when EC2 said it would act ("time"), unix seconds
    # Seconds from the agent's sight of the notice to "time", both on the instance's clock:
    # what the controller, whose clock may disagree, measures on its own.
    left_s: float | None = None

    def reclaim_after(self, seen_here: float) -> float:
        """When EC2 is to take the instance back, on the controller's own clock: `seen_here`,
        the controller's first sight of the notice (on its clock; no earlier than the agent's),
        plus the seconds the agent saw left (on the instance's clock; two minutes when the
        notice said no time). A time taken on the instance is never compared with one taken
        here: the late side is the safe one (a first hour judged shorter, EC2 waited for a
        little longer)."""
        left_s = EC2_NOTICE_S if self.left_s is None else max(0.0, self.left_s)
        return seen_here + left_s


def read_notice(run_dir: Path) -> Notice | None:
    try:
        data = json.loads((run_dir / NOTICE_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("instance_id"), str):
        return None
    left_s = data.get("left_s")
    return Notice(
        data["instance_id"],
        float(data.get("seen_at") or 0.0),
        data.get("action"),
        stored=data.get("stored_at") is not None,
        checkpointed=data.get("checkpointed") is True,
        acts_at=notice_time(data.get("time")),
        left_s=float(left_s) if isinstance(left_s, (int, float)) else None,
    )


def is_spot_reclaim(reason: str | None) -> bool:
    return bool(reason) and "Spot" in str(reason)


class NoticeWatch:
    """Each poll: a rebalance recommendation becomes an event (once), a spot notice of one of
    the live instances dooms it and interrupts the run."""

    def __init__(self, instances: RunInstances) -> None:
        self.instances = instances
        self.ledger = instances.ledger
        self._rebalance_seen = False

    def check(self, run: RunRecord, live: list[Instance]) -> str | None:
        """The interruption reason if one of `live` reported a spot notice."""
        if not self._rebalance_seen and (run.run_dir / REBALANCE_FILE).exists():
            self._rebalance_seen = True
            self.ledger.add_event(
                run.id, "spot", "EC2 recommends rebalancing: this capacity is at elevated risk"
            )
        self.instances.settle_left(time.time())  # those left for EC2 after an earlier notice
        notices = [n for n in (read_notice(d) for d in node_dirs(run.run_dir)) if n is not None]
        if not notices:  # the common case: no look at the ledger's instances
            return None
        doomed = self.instances.doomed_ids()
        for inst, notice in ((i, n) for n in notices for i in live):
            if inst.id == notice.instance_id and inst.id not in doomed:
                self.instances.mark_doomed(inst, NOTICED)
                lag = time.time() - notice.seen_at
                self.ledger.add_event(
                    run.id,
                    "spot",
                    f"interruption notice on {inst.id} (seen {lag:.1f} s ago); "
                    "requesting a replacement now",
                )
                return f"spot interruption notice on {inst.id}"
        return None
