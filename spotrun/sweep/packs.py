"""Packs: one instance shared by several trials of a sweep, one GPU (or G GPUs) each.

A pack owns the instance: it is launched under the pack's id (its tags, key pair and security
group are the pack's), so no trial's teardown can terminate it. Each trial is still a run with
its own controller; its controller sees the pack through a PackedProvider, which presents the
trial's share of the instance as the run's own "instance" (id INSTANCE/RUN): launching joins
the pack (launching its instance if it has none live), terminating leaves it (the trial's tmux
session ends, the instance goes on). The job runs in the trial's own tmux session
with CUDA_VISIBLE_DEVICES naming its GPUs. The sweep supervisor terminates the instance once
no trial is left on it and none is to come.

Cost: every second of the instance (its compute and its volume) is split equally between the
trials on it in that second; spotrun.cost.pack_shares prices the shares.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from pathlib import Path

from spotrun.agent.session import session_name
from spotrun.cloud import get_provider
from spotrun.cloud.base import Instance, InstanceRequest, Offer, Provider
from spotrun.cloud.capabilities import (
    AttachesOverSsh,
    PacesPolls,
    PullsStoredFiles,
    UploadsCheckpoints,
)
from spotrun.core.config import Resources
from spotrun.core.errors import RemoteError, SpotrunError, StateError
from spotrun.cost.bills import bill_run
from spotrun.cost.prices import PriceBook, PriceSource
from spotrun.remote.runner import Runner
from spotrun.store.ledger import Ledger, RunRecord
from spotrun.store.sweeps import PackInstance, PackRecord, Share, SweepRecord, SweepStore
from spotrun.sweep.planner import SweepPlan

log = logging.getLogger(__name__)

_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()
_BOOTSTRAPPED: set[str] = set()  # pack instances this process has made ready


def pack_lock(pack_id: str) -> threading.Lock:
    """One lock per pack in this process: its trials' threads launch and bootstrap it once."""
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(pack_id, threading.Lock())


def gpu_list(share: Share, gpus_per_trial: int) -> str:
    first = share.gpu_index * gpus_per_trial
    return ",".join(str(first + k) for k in range(gpus_per_trial))


def run_provider(ledger: Ledger, run: RunRecord) -> Provider:
    """The provider a run's controller should use: its cloud's, or its share of a pack."""
    base = get_provider(run.cloud, ledger.settings)
    if run.sweep_id is None:
        return base
    return provider_for_trial(ledger, run, base)


def provider_for_trial(ledger: Ledger, run: RunRecord, base: Provider) -> Provider:
    store = SweepStore(ledger)
    trial = store.trial_of_run(run.id)
    if trial is None or trial.pack_id is None:
        return base
    sweep = store.get(trial.sweep_id)
    return PackedProvider(store, store.pack(trial.pack_id), base, sweep.spec.gpus_per_trial)


def record_instance(store: SweepStore, pack_id: str, inst: Instance) -> None:
    ended = None if inst.is_live else (inst.ended_at or time.time())
    store.record_pack_instance(
        PackInstance(
            id=inst.id,
            pack_id=pack_id,
            provider=inst.provider,
            instance_type=inst.instance_type,
            market=inst.market,
            region=inst.region,
            zone=inst.zone,
            launched_at=inst.launched_at,
            terminated_at=ended,
            end_reason=None if inst.is_live else (inst.state_reason or "terminated"),
        )
    )


class PackedProvider:
    """The Provider protocol for one trial of a pack, over the cloud's own provider."""

    def __init__(
        self, store: SweepStore, pack: PackRecord, real: Provider, gpus_per_trial: int
    ) -> None:
        self.store = store
        self.pack = pack
        self.real = real
        self.gpus_per_trial = gpus_per_trial
        self.name = real.name
        self.shares_filesystem = real.shares_filesystem
        self.poll_s: float = real.poll_s if isinstance(real, PacesPolls) else 2.0
        self._reals: dict[str, Instance] = {}  # share id -> the pack's instance behind it

    # --------------------------------------------------------------- views
    def _pack_instances(self) -> dict[str, Instance]:
        found = {i.id: i for i in self.real.describe(self.pack.id)}
        for inst in found.values():
            if not inst.is_live:
                record_instance(self.store, self.pack.id, inst)
        return found

    def _as_instance(self, share: Share, inst: Instance | None) -> Instance:
        """The share as the instance the trial's run sees (`inst`: the pack's behind it)."""
        if inst is not None:
            self._reals[share.id] = inst
        state, reason, ended = "running", None, None
        if share.left_at is not None:
            state, reason, ended = "terminated", "left the pack", share.left_at
        elif inst is None or not inst.is_live:
            state = inst.state if inst is not None else "terminated"
            reason = inst.state_reason if inst is not None else "the pack's instance is gone"
            ended = (inst.ended_at if inst is not None else None) or time.time()
        elif inst is not None:
            state = inst.state
        offer = self.pack.offer
        return Instance(
            id=share.id,
            run_id=share.run_id,
            provider=self.real.name,
            instance_type=inst.instance_type if inst else offer.instance_type,
            region=inst.region if inst else offer.region,
            zone=inst.zone if inst else offer.zone,
            market=inst.market if inst else offer.market,
            state=state,
            address=inst.address if inst else None,
            launched_at=share.joined_at,
            state_reason=reason,
            ended_at=ended,
        )

    def _real_of(self, instance: Instance) -> Instance:
        """The pack's instance behind a share's."""
        if instance.id not in self._reals:
            share = self.store.share(instance.id)
            if share is None:
                raise StateError(f"{instance.id} is not a share of pack {self.pack.id}")
            inst = self._pack_instances().get(share.instance_id)
            if inst is None:
                raise RemoteError(f"pack {self.pack.id} has no instance {share.instance_id}")
            self._reals[instance.id] = inst
        return self._reals[instance.id]

    # ------------------------------------------------------------ protocol
    def offers(self, resources: Resources) -> list[Offer]:
        return self.real.offers(resources)

    def launch(self, request: InstanceRequest) -> list[Instance]:
        """Join the pack: its live instance, or one launched now (once, whoever comes first)."""
        with pack_lock(self.pack.id):
            live = [i for i in self.real.describe(self.pack.id) if i.is_live]
            if not live:
                live = self.real.launch(
                    InstanceRequest(
                        self.pack.id,
                        request.offer,
                        count=1,
                        disk_gb=request.disk_gb,
                        tags=request.tags,
                        max_hours=request.max_hours,
                    )
                )
            head = live[0]
            record_instance(self.store, self.pack.id, head)
            share = self.store.join(
                self.pack.id, head.id, request.run_id, self.pack.trials_per_instance
            )
        return [self._as_instance(share, head)]

    def describe(self, run_id: str) -> list[Instance]:
        shares = self.store.shares_of_run(run_id)
        if not shares:
            return []
        found = self._pack_instances()
        return [self._as_instance(share, found.get(share.instance_id)) for share in shares]

    def wait_ready(self, instances: list[Instance], timeout_s: float) -> list[Instance]:
        """The pack's instance ready and provisioned, once for all its trials."""
        for shown in instances:
            inst = self._real_of(shown)
            with pack_lock(self.pack.id):
                if inst.id in _BOOTSTRAPPED:
                    continue
                (ready,) = self.real.wait_ready([inst], timeout_s)
                self.real.bootstrap(ready, self.real.runner(ready))
                _BOOTSTRAPPED.add(inst.id)
                self._reals[shown.id] = ready
        return [s for s in self.describe(instances[0].run_id) if s.is_live] if instances else []

    def terminate(self, run_id: str) -> list[Instance]:
        """Leave the pack: end the trial's tmux session; the instance goes on for the others."""
        ended = []
        found = self._pack_instances()
        for share in self.store.shares_of_run(run_id):
            if share.left_at is not None:
                continue
            inst = found.get(share.instance_id)
            if inst is not None and inst.is_live:
                session = session_name(run_id)
                try:
                    self.real.runner(inst).run(
                        f"tmux kill-session -t ={session} 2>/dev/null; true", timeout_s=30
                    )
                except RemoteError as exc:  # the instance is going away anyway
                    log.info("pack %s: could not end %s: %s", self.pack.id, session, exc.message)
            self.store.leave(share.id)
            left = self.store.share(share.id)
            assert left is not None
            ended.append(self._as_instance(left, inst))
        return ended

    def terminate_instances(self, run_id: str, ids: list[str]) -> list[Instance]:
        """A replaced share: the trial leaves it (a trial holds one live share at a time); the
        pack's instance itself is the pack's to end, not one trial's."""
        return [inst for inst in self.terminate(run_id) if inst.id in ids]

    def runner(self, instance: Instance) -> Runner:
        return self.real.runner(self._real_of(instance))

    def run_dir(self, instance: Instance, run_id: str) -> str:
        return self.real.run_dir(self._real_of(instance), run_id)

    def forget(self, run_id: str) -> None:
        self.real.forget(run_id)  # the trial's own stored files; the pack's are its sweep's

    def spotrun_command(self, instance: Instance) -> list[str]:
        return self.real.spotrun_command(self._real_of(instance))

    def bootstrap(self, instance: Instance, runner: Runner) -> None:
        """The instance was provisioned when the pack got it; the trial only needs its own
        checkpoint uploader (when the cloud has a durable store)."""
        if isinstance(self.real, UploadsCheckpoints):
            self.real.start_uploader(
                replace(self._real_of(instance), run_id=instance.run_id), runner
            )

    def job_env(self, instance: Instance) -> dict[str, str]:
        """The trial's GPUs on the shared instance."""
        share = self.store.share(instance.id)
        if share is None or self.gpus_per_trial <= 0:
            return {}
        gpus = gpu_list(share, self.gpus_per_trial)
        self.store.ledger.add_event(
            instance.run_id,
            "pack",
            f"shares {share.instance_id} of pack {self.pack.id} (CUDA_VISIBLE_DEVICES={gpus})",
        )
        return {"CUDA_VISIBLE_DEVICES": gpus}

    def pull_durable(self, run_id: str, local_dir: Path) -> list[str]:
        if not isinstance(self.real, PullsStoredFiles):
            return []
        return list(self.real.pull_durable(run_id, local_dir))

    def attach_command(self, run_id: str, node: int | None = None) -> list[str]:
        if not isinstance(self.real, AttachesOverSsh):
            raise StateError("this cloud has no attach for packed trials")
        argv = list(self.real.attach_command(self.pack.id))  # a trial is on one instance
        argv[-1] = f"tmux attach-session -t ={session_name(run_id)}"
        return argv

    # A packed run is priced from the same price history as its cloud's instances.
    def spot_price_history(
        self, region: str, zone: str, instance_type: str, start: float, end: float
    ) -> list[tuple[float, float]]:
        history = self.real.spot_price_history  # type: ignore[attr-defined]
        return list(history(region, zone, instance_type, start, end))

    def on_demand_price(self, region: str, instance_type: str) -> float | None:
        price = self.real.on_demand_price  # type: ignore[attr-defined]
        value = price(region, instance_type)
        return None if value is None else float(value)


class PackKeeper:
    """The sweep supervisor's side of packing: which pack a new trial joins, and ending packs
    whose trials are all done."""

    def __init__(
        self, store: SweepStore, provider: Provider, sweep: SweepRecord, plan: SweepPlan
    ) -> None:
        self.store = store
        self.provider = provider
        self.sweep = sweep
        self.plan = plan

    def _active(self, pack: PackRecord) -> int:
        count = 0
        for trial in self.store.trials(self.sweep.id):
            if trial.pack_id != pack.id:
                continue
            if trial.run_id is None or not self.store.ledger.get_run(trial.run_id).is_terminal:
                count += 1
        return count

    def place(self) -> str:
        """The open pack with a free GPU, else a new pack."""
        for pack in self.store.packs(self.sweep.id):
            if pack.state == "open" and self._active(pack) < pack.trials_per_instance:
                return pack.id
        pack = self.store.create_pack(
            self.sweep.id, self.plan.offers[0], self.plan.trials_per_instance
        )
        log.info("sweep %s: new pack %s (%s)", self.sweep.id, pack.id, self.plan.reason)
        return pack.id

    def close_idle(self, *, more_to_come: bool) -> None:
        """Terminate each pack with no trial left on it, when no trial is to come."""
        if more_to_come:
            return
        for pack in self.store.packs(self.sweep.id):
            if pack.state == "open" and self._active(pack) == 0:
                self.close(pack)

    def close(self, pack: PackRecord) -> None:
        ended = self.provider.terminate(pack.id)
        for inst in self.provider.describe(pack.id):
            record_instance(self.store, pack.id, inst)
        self.store.close_pack(pack.id)
        log.info(
            "sweep %s: pack %s ended (%s)",
            self.sweep.id,
            pack.id,
            ", ".join(i.id for i in ended) or "nothing was running",
        )
        self._reprice(pack)

    def _reprice(self, pack: PackRecord) -> None:
        """Its trials' cost lines again, now that the instance's end is known."""
        ledger = self.store.ledger

        def source(name: str) -> PriceSource | None:
            return self.provider if isinstance(self.provider, PriceSource) else None

        book = PriceBook(ledger, source)
        for run_id in sorted({s.run_id for s in self.store.shares_in(pack.id)}):
            run = ledger.get_run(run_id)
            try:
                bill = bill_run(ledger, run, book, now=time.time())
            except SpotrunError as exc:  # a price that cannot be had is an event, as for runs
                ledger.add_event(run_id, "cost", f"cost not computed: {exc.user_message()}")
                continue
            ledger.replace_cost_lines(run_id, bill.cost_lines())
