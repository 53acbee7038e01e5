"""Surviving spot: what the controller does when a run's capacity is taken away.

The run becomes interrupted when the instance's agent reports a spot notice (notice.json,
brought home by the sync), when EC2 reports the instance ended with a spot reason, or when a
running instance stops answering for `run.unreachable_s` (in a cluster, the silent nodes alone
are terminated and replaced). A replacement is requested at once: with a notice, while the
noticed instance is still checkpointing, because the noticed instance is marked "doomed" in the
ledger and no longer counts as the run's capacity. Before the job starts on the replacement,
the checkpoints of the doomed instance are collected (its last sync, then the durable store),
the doomed instance is terminated, and the newest checkpoint that reads back whole is pushed to
the replacement, where the trainer resumes from it. A noticed instance in its first hour whose
checkpoint is stored is left for EC2 to terminate instead: AWS does not bill an instance it
interrupts in its first hour, and bills one the user ends (`_leave_to_ec2`); spotrun ends it
only if EC2 has not by the notice's time (reckoned on this controller's clock) plus
run.reclaim_margin_s (RunInstances.settle_left).
A GPU check that refused the instance (spotrun.control.gpu_check) interrupts the run too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import partial

from spotrun.cloud.base import Instance, Offer, Provider
from spotrun.cloud.capabilities import PacesPolls
from spotrun.control.cluster import node_dirs
from spotrun.control.gpu_check import GpuMismatchError
from spotrun.control.notices import is_spot_reclaim, read_notice
from spotrun.control.run_instances import NOTICED, RunInstances
from spotrun.core.errors import CapacityError, RemoteCommandError, RemoteError, SpotrunError
from spotrun.core.money import show_usd
from spotrun.core.runstates import RunState
from spotrun.core.waiting import SYSTEM_CLOCK, Clock, pause, poll_until
from spotrun.cost import budget
from spotrun.cost.rules import FREE_INTERRUPTION_S
from spotrun.notify.announce import announce_move
from spotrun.store.ledger import Ledger, RunRecord

log = logging.getLogger(__name__)

MAX_INTERRUPTIONS = 20  # a run replaced this often is failed rather than retried for ever
# How long the doomed instance's job may take to checkpoint and exit when its notice says no
# time left (EC2 gives 120 s from notice to termination; the replacement is being provisioned
# meanwhile). A notice that says is waited on for its seconds left, as its agent measured them.
CHECKPOINT_WAIT_S = 100.0


@dataclass(frozen=True)
class InstanceAccess:
    """How `Recovery.collect` reaches a doomed instance (the controller's sync and job parts)."""

    job_ended: Callable[[Instance], bool]  # its job has written its exit record
    sync: Callable[[Instance], None]  # pull its run folder over SSH
    durable: Callable[[], None]  # fill in from the durable store


class Recovery:
    """The controller's recovery half, for one run: noticing lost capacity, and collecting
    what the lost instances hold before they go."""

    def __init__(
        self,
        ledger: Ledger,
        provider: Provider,
        run_id: str,
        instances: RunInstances | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.ledger = ledger
        self.provider = provider
        self.run_id = run_id
        self.instances = instances or RunInstances(ledger, provider, run_id, multi_node=False)
        self.settings = ledger.settings
        self.clock = clock
        self._unreachable_since: float | None = None

    # ---------------------------------------------------------- detection
    def describe_loss(self) -> str | None:
        """Why the run has no live capacity, if EC2 says an instance of it was reclaimed
        (one whose end the ledger has not recorded yet; recording it now)."""
        instances = self.provider.describe(self.run_id)
        doomed = self.instances.doomed_ids()
        if any(i.is_live and i.id not in doomed for i in instances):
            return None
        ended = self.instances.record_ended(instances)
        for inst in ended:
            if inst.is_stopped:  # its job is gone with it; `collect` terminates it
                return f"instance {inst.id} was stopped: {inst.state_reason or inst.state}"
            if is_spot_reclaim(inst.state_reason) or inst.id in doomed:
                return f"instance {inst.id} was reclaimed: {inst.state_reason or 'spot notice'}"
        return None

    def lost(self, run: RunRecord, exc: SpotrunError) -> RunRecord | None:
        """What to do about an error while the run holds capacity: a RunRecord to go on from
        (interrupted, or the same state to retry the step), or None to fail the run."""
        if run.state not in (RunState.PROVISIONING, RunState.BOOTSTRAPPING, RunState.RUNNING):
            return None
        if self._interruptions(run) >= MAX_INTERRUPTIONS:
            return None
        if isinstance(exc, GpuMismatchError):  # ended already when it is to be replaced
            return self.interrupt(run, exc.message) if exc.replace else None
        try:
            reason = self.describe_loss()
            if reason is not None:
                return self.interrupt(run, reason)
            if isinstance(exc, RemoteError) and run.state is not RunState.PROVISIONING:
                return self.unanswered(run, exc)
        except SpotrunError as again:  # EC2 itself unreachable: the run fails with both
            log.warning("could not check the run's instances: %s", again)
        return None

    def unanswered(self, run: RunRecord, exc: RemoteError) -> RunRecord:
        """The instance did not answer, or answered but its command failed: retry until
        run.unreachable_s, then replace it, saying which of the two it was."""
        now = self.clock.monotonic()
        failing = isinstance(exc, RemoteCommandError)
        if self._unreachable_since is None:
            self._unreachable_since = now
            what = "a command on the instance failed" if failing else "instance not answering"
            self.ledger.add_event(run.id, "remote", f"{what}: {exc.message}")
        limit = self.settings.run.unreachable_s
        if now - self._unreachable_since < limit:
            pause(self._retry_s, clock=self.clock)  # then the controller tries the step again
            return self.ledger.get_run(self.run_id)
        doomed = self.instances.doomed_ids()
        gone = [i for i in self.provider.describe(self.run_id) if i.is_live and i.id not in doomed]
        if len(gone) > 1:  # a cluster: only the nodes that are silent go, as after a notice
            gone = [i for i in gone if not self.answers(i)]
            if not gone:  # every node answers again
                self.answered()
                return self.ledger.get_run(self.run_id)
        if failing and len(gone) == 1:  # it answers: not silent, its commands keep failing
            why = f"its commands kept failing for {limit:.0f} s (last: {exc.message})"
            return self.interrupt(run, self.drop_silent(gone, why))
        return self.interrupt(run, self.drop_silent(gone))

    @property
    def _retry_s(self) -> float:
        pace = self.provider.poll_s if isinstance(self.provider, PacesPolls) else 2.0
        return min(pace, 2.0)

    def answers(self, instance: Instance) -> bool:
        """Whether the instance runs a command over SSH now."""
        try:
            self.provider.runner(instance).run("true", timeout_s=15)
        except RemoteError:
            return False
        return True

    def silent_nodes(self, nodes: list[Instance]) -> list[Instance]:
        """Those of `nodes` that still do not answer after run.unreachable_s."""
        silent = list(nodes)

        def all_answer() -> bool:
            silent[:] = [i for i in silent if not self.answers(i)]
            return not silent

        poll_until(
            all_answer,
            timeout_s=self.settings.run.unreachable_s,
            interval_s=self._retry_s,
            clock=self.clock,
        )
        return silent

    def drop_silent(self, silent: list[Instance], why: str | None = None) -> str:
        """Terminate instances that stopped answering (marked doomed, so that a replacement is
        asked for them alone); returns the reason to interrupt the run with."""
        why = why or f"did not answer for {self.settings.run.unreachable_s:.0f} s"
        for inst in silent:
            self.instances.mark_doomed(inst, why)
        self.instances.terminate(silent, why)
        return f"{', '.join(i.id for i in silent) or 'the instance'} {why}"

    def answered(self) -> None:
        self._unreachable_since = None

    def _interruptions(self, run: RunRecord) -> int:
        return sum(1 for t in self.ledger.transitions(run.id) if t.to_state is RunState.INTERRUPTED)

    def interrupt(self, run: RunRecord, reason: str) -> RunRecord:
        self._unreachable_since = None
        run = self.ledger.transition(self.run_id, RunState.INTERRUPTED, reason)
        announce_move(self.ledger, run, reason)
        return run

    # --------------------------------------------------------- replacement
    def offers(self, run: RunRecord, offers: list[Offer]) -> list[Offer]:
        """The order to try offers in: the run's last offer first, then the plan's order,
        without those whose price the rest of the budget cannot pay for a margin's time."""
        previous = sorted(
            (r for r in self.ledger.instances(run.id)), key=lambda r: r.launched_at or 0.0
        )
        if previous:
            last = previous[-1]
            same = [
                o for o in offers if (o.instance_type, o.zone) == (last.instance_type, last.zone)
            ]
            offers = same + [o for o in offers if o not in same]
        cap = run.spec.max_cost_usd
        if cap is None or not previous:
            return offers
        spent = self.ledger.run_cost_exact(run.id)
        now = time.time()
        affordable = []
        for offer in offers:
            price = offer.usd_per_hour
            live = [budget.LiveInstance(int(now), Fraction(price).limit_denominator(10**9))]
            verdict = budget.decide(now, spent, Fraction(cap), live, budget.StopMargin())
            if verdict.action is budget.Action.CONTINUE:
                affordable.append(offer)
            else:
                self.ledger.add_event(
                    run.id,
                    "budget",
                    f"skipping {offer.instance_type} in {offer.zone}: {verdict.reason}",
                )
        if not affordable:
            raise CapacityError(
                f"no replacement fits the rest of the {show_usd(cap)} budget "
                f"({show_usd(spent)} spent)"
            )
        return affordable

    # ------------------------------------------------------------- collect
    def collect(self, run: RunRecord, access: InstanceAccess) -> None:
        """Bring home what the doomed instances hold: wait for their jobs to checkpoint, pull
        over SSH, then fill in from the durable store; then terminate them, except a noticed
        instance in its first hour whose results are stored: EC2 ends that one, for free."""
        self.instances.settle_left(time.time())
        left = self.instances.left_to_ec2()  # after an earlier notice: nothing more to collect
        why = self.instances.doomed_reasons()
        described = self.provider.describe(run.id)
        live = [i for i in described if i.is_live and why.get(i.id) and i.id not in left]
        synced: set[str] = set()
        for inst in live:
            poll_until(
                partial(self._checkpointed, run, inst, access, why[inst.id]),
                timeout_s=self._checkpoint_wait_s(run, inst, why[inst.id]),
                interval_s=0.5,
                clock=self.clock,
            )
            try:
                access.sync(inst)
                synced.add(inst.id)
            except RemoteError as exc:
                self.ledger.add_event(
                    run.id, "sync", f"last sync from {inst.id} failed: {exc.message}"
                )
        access.durable()
        reasons = {i: str(w) for i, w in self.instances.doomed_reasons().items()}
        leaving = [i for i in live if i.id in synced and self._leave_to_ec2(run, i)]
        ending = [i for i in live if i not in leaving]
        for reason in sorted({reasons.get(i.id) or NOTICED for i in ending}):
            self.instances.terminate(
                [i for i in ending if (reasons.get(i.id) or NOTICED) == reason], reason
            )
        self.instances.settle_left(time.time())  # its time passed while collecting: not free
        self.instances.record_ended([i for i in described if not i.is_live])
        # A stopped or hibernated instance holds no capacity the run can use, yet its volumes
        # bill (and a persistent request would start it again): it ends now, not with the run.
        stopped = [i for i in described if i.is_stopped]
        if stopped:
            self.instances.end_stopped(stopped)

    def _leave_to_ec2(self, run: RunRecord, inst: Instance) -> bool:
        """Leave the noticed instance for EC2 to terminate, when that is free and safe.

        AWS, "Billing for interrupted Spot Instances": "If you stop or terminate the Spot
        Instance: ... Linux ... Interrupted in the first hour: Charged for the seconds used";
        "If the Amazon EC2 interrupts the Spot Instance: ... Linux ... Interrupted in the first
        hour: No charge". So an instance EC2 is about to terminate within its first hour is left
        to it, once its job has checkpointed and the checkpoint is stored and synced here (the
        run never waits for it); spotrun.control.run_instances.settle_left ends it if EC2 has
        not by the notice's time plus run.reclaim_margin_s.
        """
        notices = (read_notice(d) for d in node_dirs(run.run_dir))
        notice = next((n for n in notices if n is not None and n.instance_id == inst.id), None)
        if notice is None or notice.action != "terminate":
            return False  # a stop or hibernation keeps billing volumes; no notice, no promise
        if not (notice.checkpointed and notice.stored) or inst.market != "spot":
            return False
        # On this controller's clock: when it first saw the notice, plus the seconds left that
        # the agent measured on the instance's (the notice's time is in another frame).
        reclaim_at = notice.reclaim_after(self.instances.doomed_at(inst.id) or time.time())
        until = reclaim_at + self.settings.run.reclaim_margin_s
        if inst.launched_at is None or until - inst.launched_at >= FREE_INTERRUPTION_S:
            return False  # past its first hour by then: EC2's end is billed too, ours is sooner
        self.instances.leave_to_ec2(inst, until)
        at = time.strftime("%H:%M:%S", time.localtime(reclaim_at))
        self.ledger.add_event(
            run.id,
            "spot",
            f"{inst.id}'s checkpoint is stored: left for EC2 to reclaim at {at} (an interruption "
            "in the first hour is not billed; terminated by spotrun if EC2 has not by "
            f"{self.settings.run.reclaim_margin_s:.0f} s later)",
        )
        return True

    def _checkpoint_wait_s(self, run: RunRecord, inst: Instance, why: str | None) -> float:
        """How long to wait for the doomed instance's checkpoint: after a notice, the seconds
        its agent saw left (a duration on the instance's clock; the two clocks are never
        compared), else CHECKPOINT_WAIT_S."""
        if why != NOTICED:
            return CHECKPOINT_WAIT_S
        notices = (read_notice(d) for d in node_dirs(run.run_dir))
        notice = next((n for n in notices if n is not None and n.instance_id == inst.id), None)
        if notice is None or notice.left_s is None:
            return CHECKPOINT_WAIT_S
        return max(0.0, notice.left_s)

    def _checkpointed(
        self, run: RunRecord, inst: Instance, access: InstanceAccess, why: str | None
    ) -> bool:
        """Whether to stop waiting for the doomed instance: its job has ended (and, after a
        notice, its agent has stored the checkpoint), or it cannot be reached any more."""
        try:
            # A noticed instance's agent uploads the checkpoint after the job's exit, then
            # says so in notice.json: the replacement fetches it from there.
            return access.job_ended(inst) and (why != NOTICED or self._stored(run, inst, access))
        except RemoteError:
            return True  # gone or unreachable: what it stored is in the durable store

    def _stored(self, run: RunRecord, inst: Instance, access: InstanceAccess) -> bool:
        """Whether the noticed instance's agent has finished its upload (pulls notice.json)."""
        access.sync(inst)
        notice = read_notice(run.run_dir)
        return notice is not None and notice.instance_id == inst.id and notice.stored
