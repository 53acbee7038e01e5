"""The run controller: drives one run from whatever state it is in to its end.

Each state has one step function; each step is safe to run again after a crash, because the
provider reconciles by the run's tags and every state move is a compare-and-set in the ledger.
The supervisor process runs `drive`; `stop` runs it inline when no supervisor is alive.

The controller decides the run's states; its parts, one concern each, do the work: the run's
instances (run_instances), sync (run_sync), the job's start (job_start) and end (job_end,
agent_end), spot notices (notices) and recovery, restoring checkpoints (checkpoint_restore),
the job's reports (run_reports: metrics, staging, device), cost lines (cost_lines), the
budget (budget_watch), state moves (transitions) and a multi-node run's steps (cluster_steps).
Whoever builds the controller hands it the run's provider (a packed sweep trial's is its
share of the pack's instance: spotrun.sweep.packs.run_provider).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from spotrun.agent.watcher import DEADLINE, NO_PROGRESS
from spotrun.cloud.base import Instance, InstanceRequest, Provider
from spotrun.cloud.capabilities import PacesPolls
from spotrun.control.agent_end import AgentEnd, AgentEnds, adopt_files
from spotrun.control.budget_watch import BudgetWatch
from spotrun.control.cache_zone import prefer_cache_zone
from spotrun.control.capacity_wait import CapacityWait
from spotrun.control.checkpoint_restore import CheckpointRestore
from spotrun.control.cluster_steps import ClusterSteps
from spotrun.control.cost_lines import CostLines
from spotrun.control.data_volumes import mark_data_volumes_deleted
from spotrun.control.hours_cap import hours_cap_reason
from spotrun.control.instance_records import to_record
from spotrun.control.job_end import (
    exit_code,
    failure_message,
    interrupted_from_terminal,
    write_exit,
)
from spotrun.control.job_start import JobStart
from spotrun.control.notices import NoticeWatch
from spotrun.control.poll_pace import PROCESS_PACE, PollPace
from spotrun.control.quota_refusals import QuotaRefusals
from spotrun.control.recovery import Recovery
from spotrun.control.run_instances import RunInstances
from spotrun.control.run_reports import RunReports
from spotrun.control.run_sync import RunSync
from spotrun.control.transitions import RunTransitions
from spotrun.control.write_faults import WriteFaultWait, as_write_fault
from spotrun.core.errors import (
    CapacityError,
    LedgerBusyError,
    LedgerWriteError,
    SpotrunError,
    StateError,
    VcpuQuotaError,
)
from spotrun.core.exitcodes import CHECKPOINTED
from spotrun.core.rundir import EXIT_FILE, SUPERVISOR_LOG_FILE
from spotrun.core.runstates import RunState
from spotrun.core.waiting import SYSTEM_CLOCK, Backoff, Clock, pause, wait_until
from spotrun.remote.job import JobDriver, JobStatus
from spotrun.store.ledger import Ledger, RunRecord


class RunController:
    def __init__(
        self,
        ledger: Ledger,
        run_id: str,
        *,
        provider: Provider,
        poll_s: float | None = None,
        clock: Clock = SYSTEM_CLOCK,
        pace: PollPace = PROCESS_PACE,
    ) -> None:
        self.ledger = ledger
        self.run_id = run_id
        self.provider = provider
        self.clock = clock
        self.pace = pace  # shared by the runs of one process: polls widen as they grow many
        run = ledger.get_run(run_id)
        default_poll_s = 0.5 if provider.shares_filesystem else 2.0
        if poll_s is None:
            poll_s = provider.poll_s if isinstance(provider, PacesPolls) else default_poll_s
        self.poll_s = poll_s
        multi_node = run.spec.resources.nodes > 1  # --nodes N: torchrun across N instances
        self.instances = RunInstances(ledger, provider, run_id, multi_node=multi_node)
        self.transitions = RunTransitions(ledger, run_id)
        self.sync = RunSync(ledger, provider, multi_node=multi_node)
        self.recovery = Recovery(ledger, provider, run_id, self.instances, clock=clock)
        self.notices = NoticeWatch(self.instances)
        self.restore = CheckpointRestore(ledger, provider)
        self.jobs = JobStart(
            ledger, provider, run_id, recovery=self.recovery, restore=self.restore, sync=self.sync
        )
        self.agent_ends = AgentEnds(self.instances, self.sync)
        self.reports = RunReports(ledger, run)
        self.costs = CostLines(ledger, provider, clock=clock)
        self.budget = BudgetWatch(ledger, provider, clock=clock)
        self.write_faults = WriteFaultWait(ledger, run_id, clock=clock)
        self.capacity = CapacityWait(ledger, run_id, clock=clock)
        self.lost_exit_note: str | None = None  # why a lost job's exit code is unknown
        self.cluster = (
            ClusterSteps(
                ledger,
                provider,
                instances=self.instances,
                recovery=self.recovery,
                notices=self.notices,
                restore=self.restore,
                jobs=self.jobs,
                sync=self.sync,
                transitions=self.transitions,
                clock=clock,
            )
            if multi_node
            else None
        )

    # ------------------------------------------------------------------ drive
    def drive(self) -> RunRecord:
        run = self.ledger.get_run(self.run_id)
        steps: dict[RunState, Callable[[RunRecord], RunRecord]] = {
            RunState.PLANNED: self.request,
            RunState.REQUESTED: self.request,
            RunState.PROVISIONING: self._provision,
            RunState.BOOTSTRAPPING: self._bootstrap,
            RunState.RUNNING: self._monitor,
            RunState.SYNCING: self._finish,
            RunState.INTERRUPTED: self.request,
        }
        while not run.is_terminal:
            try:
                # the stop's reason: the user's, or the one a sweep gave (ASHA, its budget)
                why = run.message or "stopped by the user"
                with as_write_fault():
                    run = self._stop(run, why) if run.stop_requested else steps[run.state](run)
                self.write_faults.cleared()
            except LedgerWriteError as exc:
                # This machine cannot write now (read-only, full, I/O): the job goes on and no
                # instance ends for it; past the bound this raises and the controller gives way.
                self.write_faults.wait(exc)
                run = self.ledger.get_run(self.run_id)
                continue
            except StateError:
                run = self.ledger.get_run(self.run_id)  # another process moved it; look again
                continue
            except LedgerBusyError as exc:  # transient: the job goes on; try the step again
                print(f"ledger busy, trying again: {exc.user_message()}", flush=True)
                continue
            except SpotrunError as exc:
                end = self.agent_ends.after_error(self.ledger.get_run(self.run_id))
                if end is not None:  # its agent ended the instance: not a loss to replace
                    try:
                        run = self._end_as_agent_said(self.ledger.get_run(self.run_id), end)
                    except SpotrunError as again:
                        return self._fail(f"{end.reason}; then: {again.user_message()}")
                    continue
                recovered = self.recovery.lost(self.ledger.get_run(self.run_id), exc)
                if recovered is not None:  # interrupted (or retried): drive on from there
                    run = recovered
                    continue
                return self._fail(exc.user_message())
            except Exception as exc:
                # A bug must not leave capacity billing: tear down, record, then let it surface.
                self._fail(
                    f"internal error: {type(exc).__name__}: {exc} (see {SUPERVISOR_LOG_FILE})"
                )
                raise
        return run

    def _move(self, target: RunState, reason: str | None = None) -> RunRecord:
        return self.transitions.move(target, reason)

    # ------------------------------------------------------------------ steps
    def request(self, run: RunRecord) -> RunRecord:
        """Ask for the run's capacity, offer by offer, until one fills."""
        if run.state is not RunState.REQUESTED:
            run = self._move(RunState.REQUESTED, "requesting capacity")
        offers = list(run.plan.offers) if run.plan is not None else []
        if not offers:
            raise CapacityError("the run has no offers to request; launch it again")
        tried = []
        to_try = self.recovery.offers(run, offers)
        staying = False  # a cluster keeps its zone while run.cluster_replace_s lasts
        if self.cluster is None:  # a replacement goes where the cache volume is, if it can
            to_try = prefer_cache_zone(self.ledger, run, to_try)
        else:
            to_try, staying = self.cluster.offers(run, to_try)
        to_try = self.capacity.usable(run, to_try)  # auto: on-demand once spot was waited for
        replacing = frozenset(self.instances.doomed_ids())
        quotas = QuotaRefusals(self.provider)
        for offer in to_try:
            if quotas.covers(offer):  # refused by its quota already: only another quota helps
                continue
            request = InstanceRequest(
                run.id,
                offer,
                count=run.spec.resources.nodes,
                disk_gb=run.spec.resources.disk_gb,
                max_hours=run.spec.max_hours,
                replacing=replacing,
            )
            try:
                instances = self.provider.launch(request)
            except CapacityError as exc:
                tried.append(f"{offer.instance_type} in {offer.zone}: {exc.message}")
                self.capacity.refused(offer, exc.message)
                self.ledger.add_event(run.id, "capacity", tried[-1])
                if exc.message.startswith("partial fill"):  # it ran, briefly: in the ledger
                    self.instances.record_ended(self.provider.describe(run.id))
                continue
            except VcpuQuotaError as exc:
                quotas.add(exc)
                self.ledger.add_event(
                    run.id, "quota", f"{offer.instance_type} in {offer.zone}: {exc.message}"
                )
                continue
            for inst in instances:
                self.ledger.upsert_instance(to_record(inst))
            self.ledger.add_event(
                run.id,
                "capacity",
                f"got {len(instances)} x {offer.instance_type} in {offer.zone} ({offer.market})",
            )
            self.capacity.filled(run)
            return self._move(RunState.PROVISIONING, f"{offer.instance_type} in {offer.zone}")
        if staying:  # ask the cluster's zone again shortly, until the bound passes
            pause(self.poll_s, clock=self.clock)
            return self.ledger.get_run(self.run_id)
        refused = quotas.failure(tried)
        if refused is not None and not tried:  # only quotas refused: no weather to wait out
            raise refused
        try:  # no capacity now: ask again after a pause, until the run's bound passes
            return self.capacity.nothing_filled(run, to_try)
        except CapacityError:
            if refused is not None:
                raise refused from None
            raise

    def _provision(self, run: RunRecord) -> RunRecord:
        live = self.instances.live()
        if not live:
            return self._move(RunState.INTERRUPTED, "the instance went away while provisioning")
        ready = self.provider.wait_ready(live, self.ledger.settings.run.ssh_timeout_s)
        for inst in ready:
            self.ledger.upsert_instance(to_record(inst))
        return self._move(RunState.BOOTSTRAPPING, "instance ready")

    def _bootstrap(self, run: RunRecord) -> RunRecord:
        live = self.instances.live()
        if not live:
            return self._move(RunState.INTERRUPTED, "the instance went away while bootstrapping")
        if self.cluster is not None:
            return self.cluster.bootstrap(run, live)
        started = self.jobs.start(run, live[0])
        session = self.jobs.session
        self.ledger.add_event(
            run.id,
            "job",
            f"job {'started' if started else 'already running'} in tmux session {session}",
        )
        return self._move(RunState.RUNNING, f"job running in tmux session {session}")

    def _monitor(self, run: RunRecord) -> RunRecord:
        live = self.instances.live()
        if not live:
            end = self.agent_ends.find(run, stored=True)  # e.g. while no controller was there
            if end is not None:
                return self._end_as_agent_said(run, end)
            code = exit_code(run.run_dir) if self.provider.shares_filesystem else None
            if code is not None and code != CHECKPOINTED:  # it ended while nobody watched
                return self._move(RunState.SYNCING, f"job exited with code {code}")
            return self._move(
                RunState.INTERRUPTED, self.recovery.describe_loss() or "the instance is gone"
            )
        driver = self.jobs.driver(live[0])

        def one_round() -> RunRecord | None:
            """One look at the running job; the run to drive on with once it moves on."""
            # Its state and stop flag alone: the rest of `run` holds while it runs, and the
            # whole run (its spec parsed) every poll of every run cost the controller ~8%.
            state, stopping = self.ledger.state_of(self.run_id)
            if stopping or state is not RunState.RUNNING:
                return self.ledger.get_run(self.run_id)
            moved = self._watch(run, live, driver)
            self.write_faults.cleared()  # a whole heartbeat written: the fault, if any, passed
            return moved

        # Quick at first, so that a short job's end is seen at once: 0.1, 0.2, 0.4 s, ... up
        # to poll_s, or wider while this process polls many runs (spotrun.control.poll_pace)
        first = min(self.poll_s, 0.1)
        backoff = Backoff(
            first_s=first, factor=2.0, ceiling=lambda: self.pace.interval(self.poll_s)
        )
        with self.pace.watching():
            return wait_until(
                one_round,
                timeout_s=math.inf,  # the job runs as long as it runs; its caps end it
                what=f"the end of run {self.run_id}",
                backoff=backoff,
                clock=self.clock,
            )

    def _watch(self, run: RunRecord, live: list[Instance], driver: JobDriver) -> RunRecord | None:
        """One heartbeat of a running job: its status, its files, its notices, its reports,
        its cost and budget; the run to drive on with when the job's state moved, else None."""
        status = self.sync.poll(run, live[0], driver)  # one round trip, over SSH
        if self.cluster is not None:
            self.cluster.watch_others(run, live)
        self.recovery.answered()  # the instance answered: no longer counted unreachable
        notice = self.notices.check(run, live)
        if notice is not None:  # a replacement is requested now, not when it dies
            return self._move(RunState.INTERRUPTED, notice)
        self.reports.pull(run)
        self.costs.refresh(run)
        over_budget = self.budget.check(run)
        if over_budget is not None and not status.finished:
            return self._stop(run, reason=over_budget)
        margin_s = self.ledger.settings.budget_stop_margin_s
        over_time = hours_cap_reason(run, margin_s, time.time())
        if over_time is not None and not status.finished:
            return self._stop(run, reason=over_time)
        if status.finished:
            return self._job_ended(run, status)
        if status.lost:
            if self.instances.live():
                self.lost_exit_note = _empty_exit_record(run)
                if self.lost_exit_note is not None:
                    self.ledger.add_event(run.id, "job", self.lost_exit_note)
                write_exit(run.run_dir, 137)  # session killed with no exit code written
                return self._job_ended(run, JobStatus(False, 137))
            end = self.agent_ends.find(run, stored=True)
            if end is not None:
                return self._end_as_agent_said(run, end)
            return self._move(RunState.INTERRUPTED, "the instance is gone")
        return None

    # ----------------------------------------------------------------- endings
    def _end_as_agent_said(self, run: RunRecord, end: AgentEnd) -> RunRecord:
        """End the run the way its agent ended the instance (spotrun.control.agent_end)."""
        taken = adopt_files(run.run_dir, end)
        self.ledger.add_event(
            run.id,
            "agent",
            f"the agent of {end.instance_id} ended it: {end.reason}"
            + (f"; its last {', '.join(taken)} taken from the durable store" if taken else ""),
        )
        if end.why == DEADLINE:
            return self._stop(run, f"{end.reason}; the instance's agent stopped the job")
        if end.why == NO_PROGRESS:
            return self._fail(f"the instance's agent ended the job: {end.reason}")
        code = end.exit_code if end.exit_code is not None else exit_code(run.run_dir)
        if code == CHECKPOINTED and not run.stop_requested:  # stopped on a signal: go on
            for inst in self.provider.describe(run.id):
                if inst.id == end.instance_id:
                    self.instances.mark_doomed(inst, "its agent ended it")
            return self._move(RunState.INTERRUPTED, "the job checkpointed and stopped on a signal")
        return self._move(RunState.SYNCING, f"job exited with code {code} (its agent saw it)")

    def _job_ended(self, run: RunRecord, status: JobStatus) -> RunRecord:
        self.ledger.add_event(run.id, "job", f"job exited with code {status.exit_code}")
        end = self.agent_ends.find(run, stored=False)
        if end is not None:  # the agent stopped the job (the run's cap, no progress)
            return self._end_as_agent_said(run, end)
        if self.cluster is not None and status.exit_code != 0 and not run.stop_requested:
            lost = self.cluster.loss(run)  # a node's loss ends torchrun on the others too
            if lost is not None:
                return self._move(RunState.INTERRUPTED, lost)
        if status.exit_code == CHECKPOINTED and not run.stop_requested:
            return self._move(RunState.INTERRUPTED, "the job checkpointed and stopped on a signal")
        return self._move(RunState.SYNCING, f"job exited with code {status.exit_code}")

    def _finish(self, run: RunRecord) -> RunRecord:
        self.sync.final(run, self.instances.live())
        self.ledger.add_event(run.id, "sync", "results synced")
        self.reports.pull(run)
        self._teardown(run, "job finished")
        code = exit_code(run.run_dir)
        if code == 0:
            return self._move(RunState.SUCCEEDED, "job exited with code 0")
        by_hand = interrupted_from_terminal(run, code)
        if by_hand is not None:  # Ctrl-C in an attached terminal: a stop, not a crash
            return self._move(RunState.STOPPED, by_hand)
        message = failure_message(run.run_dir, code)
        if self.lost_exit_note is not None:
            message = f"{message}; {self.lost_exit_note}"
        return self._move(RunState.FAILED, message)

    def _stop(self, run: RunRecord, reason: str = "stopped by the user") -> RunRecord:
        live = self.instances.live()
        for inst in live:
            try:
                self.jobs.driver(inst).stop(grace_s=15.0)
            except SpotrunError as exc:
                self.ledger.add_event(
                    run.id, "stop", f"could not stop the job cleanly: {exc.message}"
                )
        self.sync.final(run, self.instances.live())
        self.reports.pull_metrics(run)
        self._teardown(run, reason)
        return self._move(RunState.STOPPED, reason)

    def _fail(self, message: str) -> RunRecord:
        run = self.ledger.get_run(self.run_id)
        if run.is_terminal:
            return run
        try:
            self._teardown(run, "run failed")
        except SpotrunError as exc:
            message += f"; teardown also failed: {exc.message} (run `spotrun gc`)"
        try:
            return self._move(RunState.FAILED, message)
        except StateError:
            return self.ledger.get_run(self.run_id)

    def _teardown(self, run: RunRecord, reason: str) -> None:
        """Terminate every instance of the run, record their ends and the run's cost."""
        ended = self.provider.terminate(run.id)
        mark_data_volumes_deleted(self.ledger, run)  # the provider deleted them with the run
        self.instances.record_teardown({i.id for i in ended}, reason)
        self.costs.record(run)


def _empty_exit_record(run: RunRecord) -> str | None:
    """Why a job that ended left an empty exit record: the wrapper began it but could not
    write it (a full or read-only disk), so the job's own exit code is lost."""
    record = run.run_dir / EXIT_FILE
    try:
        empty = record.stat().st_size == 0
    except OSError:
        return None
    if not empty:
        return None
    return (
        f"the job ended but its exit record ({record}) is empty: its disk could not be "
        "written when it ended (full or read-only?), so its exit code is unknown"
    )
