"""A run's instances as the controller keeps them: which are live, which are doomed, their ends.

An instance is "doomed" once it no longer counts as the run's capacity (a spot notice, a node
that stopped answering, a cluster that moves): the ledger's record of it says so in its details,
so a replacement is asked for while the doomed one still checkpoints, and a controller that
starts again knows it too. Every end the cloud reports is recorded once, with its time and why.
"""

from __future__ import annotations

import time

from spotrun.cloud.base import Instance, Provider
from spotrun.control.instance_records import to_record
from spotrun.core.node_order import order
from spotrun.store.ledger import InstanceRecord, Ledger

DOOMED = "doomed"  # key in an instance record's details: why it no longer counts
NOTICED = "spot interruption notice"  # the DOOMED reason of a noticed instance
DOOMED_AT = "at"  # key in a doomed instance's details: when it was doomed, on our clock
# Key in a doomed instance's details: spotrun leaves it for EC2 to reclaim (an interruption in
# its first hour is not billed) and terminates it itself only after this time (unix seconds).
LEFT_TO_EC2 = "left_to_ec2_until"


class RunInstances:
    """The instances of one run: the cloud's view of them, and the ledger's record."""

    def __init__(self, ledger: Ledger, provider: Provider, run_id: str, *, multi_node: bool):
        self.ledger = ledger
        self.provider = provider
        self.run_id = run_id
        self.multi_node = multi_node  # a cluster's nodes are kept in c10d's order
        self._left: dict[str, float] | None = None  # LEFT_TO_EC2, read from the ledger once

    def live(self) -> list[Instance]:
        """The run's live capacity: live in the cloud and not doomed (node 0 first)."""
        doomed = self.doomed_ids()
        live = [i for i in self.provider.describe(self.run_id) if i.is_live and i.id not in doomed]
        return order(live) if self.multi_node else live

    # ------------------------------------------------------------- doomed
    def doomed_ids(self) -> set[str]:
        return {r.id for r in self.ledger.instances(self.run_id) if r.details.get(DOOMED)}

    def doomed_reasons(self) -> dict[str, str | None]:
        """Every recorded instance of the run: why it is doomed (None: it is not)."""
        return {r.id: r.details.get(DOOMED) for r in self.ledger.instances(self.run_id)}

    def mark_doomed(self, instance: Instance, why: str) -> None:
        details = {DOOMED: why, DOOMED_AT: time.time()}
        self.ledger.upsert_instance(self.record(instance, details=details))

    def doomed_at(self, instance_id: str) -> float | None:
        """When this controller marked the instance doomed, on its own clock."""
        for record in self.ledger.instances(self.run_id):
            at = record.details.get(DOOMED_AT)
            if record.id == instance_id and isinstance(at, int | float):
                return float(at)
        return None

    # --------------------------------------------------- left for EC2 to end
    def left_to_ec2(self) -> dict[str, float]:
        """The noticed instances left for EC2 to reclaim, not ended yet: until when."""
        if self._left is None:
            self._left = {
                r.id: float(r.details[LEFT_TO_EC2])
                for r in self.ledger.instances(self.run_id)
                if r.terminated_at is None and isinstance(r.details.get(LEFT_TO_EC2), int | float)
            }
        return dict(self._left)

    def leave_to_ec2(self, instance: Instance, until: float) -> None:
        self.ledger.upsert_instance(self.record(instance, details={LEFT_TO_EC2: until}))
        self.left_to_ec2()
        assert self._left is not None
        self._left[instance.id] = until

    def settle_left(self, now: float) -> None:
        """Those left for EC2: their ends recorded once EC2 has reclaimed them (its spot reason:
        the free first hour); those EC2 has not reclaimed by their time are terminated, so
        that a notice without a reclaim leaves nothing running."""
        left = self.left_to_ec2()
        if not left:
            return
        described = {i.id: i for i in self.provider.describe(self.run_id) if i.id in left}
        for inst in self.record_ended([i for i in described.values() if not i.is_live]):
            self.ledger.add_event(
                self.run_id,
                "spot",
                f"EC2 reclaimed {inst.id} ({inst.state_reason or inst.state}), as left to it",
            )
        stopped = [i for i in described.values() if i.is_stopped]
        if stopped:
            self.end_stopped(stopped)
        overdue = [i for i in described.values() if i.is_live and now >= left[i.id]]
        if overdue:
            why = "EC2 did not reclaim it after its notice"
            self.terminate(overdue, why)
            self.ledger.add_event(
                self.run_id, "spot", f"terminated {', '.join(i.id for i in overdue)}: {why}"
            )
        gone = {i.id for i in described.values() if not i.is_live} | {i.id for i in overdue}
        assert self._left is not None
        for instance_id in gone:
            self._left.pop(instance_id, None)

    def record(self, instance: Instance, **changes: object) -> InstanceRecord:
        """The ledger's record of `instance` with `changes`; details merge with those kept."""
        known = {r.id: r for r in self.ledger.instances(self.run_id)}
        prior = known.get(instance.id)
        details = dict(prior.details) if prior else {}
        details.update(changes.pop("details", {}))  # type: ignore[call-overload]
        changes["details"] = details
        return to_record(instance, **changes)

    # --------------------------------------------------------------- ends
    def record_ended(self, instances: list[Instance]) -> list[Instance]:
        """Record the ends of those of `instances` that ended unrecorded; returns them."""
        known = {r.id: r for r in self.ledger.instances(self.run_id)}
        ended = []
        for inst in instances:
            prior = known.get(inst.id)
            if inst.is_live or (prior is not None and prior.terminated_at is not None):
                continue
            self.ledger.upsert_instance(
                self.record(
                    inst,
                    terminated_at=inst.ended_at or time.time(),
                    end_reason=inst.state_reason or "ended",
                )
            )
            ended.append(inst)
        return ended

    def record_teardown(self, ended_ids: set[str], reason: str) -> None:
        """After the whole run was terminated: every end not yet recorded, with `reason` for
        those the teardown ended and the cloud's own reason for those that ended before."""
        now = time.time()
        for inst in self.provider.describe(self.run_id):
            if inst.is_live:
                continue
            known = {r.id: r for r in self.ledger.instances(self.run_id)}
            prior = known.get(inst.id)
            if prior is not None and prior.terminated_at is not None:
                continue
            self.ledger.upsert_instance(
                to_record(
                    inst,
                    terminated_at=inst.ended_at or now,
                    end_reason=reason if inst.id in ended_ids else (inst.state_reason or reason),
                )
            )

    def terminate(self, instances: list[Instance], reason: str) -> None:
        """End these instances (not the whole run) and record their ends."""
        if not instances:
            return
        ended = self.provider.terminate_instances(self.run_id, [i.id for i in instances])
        now = time.time()
        for inst in ended:
            self.ledger.upsert_instance(
                self.record(inst, terminated_at=inst.ended_at or now, end_reason=reason)
            )

    def end_stopped(self, stopped: list[Instance]) -> None:
        """Terminate stopped instances of the run; their compute billing ended at the stop
        (recorded then), their volumes' ends now."""
        known = {r.id: r for r in self.ledger.instances(self.run_id)}
        for inst in self.provider.terminate_instances(self.run_id, [i.id for i in stopped]):
            prior = known.get(inst.id)
            at = (prior.terminated_at if prior else None) or inst.ended_at or time.time()
            why = f"{prior.end_reason if prior and prior.end_reason else 'stopped'}; terminated"
            self.ledger.upsert_instance(self.record(inst, terminated_at=at, end_reason=why))
        self.ledger.add_event(
            self.run_id,
            "spot",
            f"terminated {', '.join(i.id for i in stopped)}: stopped, and a stopped "
            "instance's volumes bill until it is terminated",
        )
