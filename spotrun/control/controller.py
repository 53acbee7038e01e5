"""The run controller: drives one run from whatever state it is in to its end.

Each state has one step function; each step is safe to run again after a crash, because the
provider reconciles by the run's tags and every state move is a compare-and-set in the ledger.
The supervisor process runs `drive`; `stop` runs it inline when no supervisor is alive.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path

from spotrun.agent.session import session_name
from spotrun.agent.watcher import DEADLINE, JOB_ENDED, NO_PROGRESS
from spotrun.cloud.base import Instance, InstanceRequest, Offer, Provider
from spotrun.cloud.capabilities import PullsStoredFiles, SetsJobEnvironment
from spotrun.control import budget_guard, cluster, ssh_config
from spotrun.control.agent_end import AgentEnd, adopt_files, find_end
from spotrun.control.cache_zone import prefer_cache_zone
from spotrun.control.cluster_steps import ClusterSteps, RunSteps
from spotrun.control.data_volumes import (
    attach_data_cache,
    attach_snapshot_data,
    mark_data_volumes_deleted,
)
from spotrun.control.instance_records import to_record
from spotrun.control.recovery import DOOMED, Reach, Recovery
from spotrun.control.threads import threads_env
from spotrun.core.errors import (
    CapacityError,
    LedgerBusyError,
    RemoteError,
    SpotrunError,
    StateError,
)
from spotrun.core.exitcodes import CHECKPOINTED
from spotrun.core.metrics_file import MetricsTail
from spotrun.core.rundir import (
    EXIT_FILE,
    JOB_LOG_FILE,
    METRICS_FILE,
    RUN_DIR_VAR,
    RUN_ID_VAR,
    SUPERVISOR_LOG_FILE,
)
from spotrun.core.runstates import RunState
from spotrun.core.terminal_text import printable
from spotrun.cost.bills import bill_run
from spotrun.cost.budget import Action
from spotrun.cost.prices import PriceBook, PriceSource
from spotrun.datasets.record import StagingWatch
from spotrun.launch.plan import planned_gpus
from spotrun.remote.job import JobDriver, JobStatus
from spotrun.remote.jobprep import pull_outputs, setup_failure
from spotrun.remote.runner import Runner
from spotrun.store.ledger import Ledger, RunRecord
from spotrun.sweep.packs import run_provider
from spotrun.train.device_record import DeviceWatch

log = logging.getLogger(__name__)

# Training processes on CPU spend much of their time in glibc handing large buffers back to
# the OS and asking for them again; these settings keep them (measured: 29 s -> 16 s/epoch).
TRAINING_ENV = {
    "GLIBC_TUNABLES": "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184",
    "PYTHONUNBUFFERED": "1",
}
# How often a live run's cost lines are recomputed (and its price history fetched further).
COST_REFRESH_S = 300.0


def recipe_env(run: RunRecord, remote_run_dir: str) -> dict[str, str]:
    """The trainer's environment: spotrun's defaults, then the launch's own (--env, the
    trackers' variables); the SPOTRUN_* ones are spotrun's alone."""
    return {
        **TRAINING_ENV,
        **run.spec.env,
        RUN_ID_VAR: run.id,
        RUN_DIR_VAR: remote_run_dir,
    }


def job_argv(run: RunRecord, spotrun_argv: list[str], remote_run_dir: str) -> list[str]:
    argv = [*spotrun_argv, "train", run.spec.recipe, "--run-dir", remote_run_dir]
    for item in run.spec.overrides:
        argv += ["--set", item]
    return argv


class RunController:
    def __init__(
        self,
        ledger: Ledger,
        run_id: str,
        *,
        provider: Provider | None = None,
        poll_s: float | None = None,
    ) -> None:
        self.ledger = ledger
        self.run_id = run_id
        run = ledger.get_run(run_id)
        self.provider = provider or run_provider(ledger, run)
        default_poll_s = 0.5 if self.provider.shares_filesystem else 2.0
        self.poll_s = (
            poll_s if poll_s is not None else getattr(self.provider, "poll_s", default_poll_s)
        )
        self.metrics = MetricsTail(run.run_dir / METRICS_FILE)
        self.session = session_name(run_id)
        self._cost_recorded_at = 0.0
        self._cost_error: str | None = None
        self._budget_checked_at = 0.0
        self._budget_note: str | None = None
        self._budget_stop_at: int | None = None
        self._budget_said = False
        self.staging = StagingWatch(run.run_dir)  # remote data sets: staging.json -> events
        self.devices = DeviceWatch(run.run_dir)  # device.json -> events (_device_events)
        self.recovery = Recovery(ledger, self.provider, run_id)  # spot interruptions
        # --nodes N: torchrun across N instances (spotrun.control.cluster_steps)
        self.cluster = ClusterSteps(self._run_steps()) if run.spec.resources.nodes > 1 else None

    def _run_steps(self) -> RunSteps:
        """This controller's parts and steps, as the cluster steps use them per node."""
        return RunSteps(
            ledger=self.ledger,
            provider=self.provider,
            recovery=self.recovery,
            session=self.session,
            move=self._move,
            restore_checkpoints=self._restore_checkpoints,
            node_job=self._node_job,
            driver=self._driver,
            sync=lambda run, inst: self._sync(run, inst, final=False),
            reach=self._reach,
        )

    # ------------------------------------------------------------------ drive
    def drive(self) -> RunRecord:
        run = self.ledger.get_run(self.run_id)
        steps: dict[RunState, Callable[[RunRecord], RunRecord]] = {
            RunState.PLANNED: self._request,
            RunState.REQUESTED: self._request,
            RunState.PROVISIONING: self._provision,
            RunState.BOOTSTRAPPING: self._bootstrap,
            RunState.RUNNING: self._monitor,
            RunState.SYNCING: self._finish,
            RunState.INTERRUPTED: self._request,
        }
        while not run.is_terminal:
            try:
                # the stop's reason: the user's, or the one a sweep gave (ASHA, its budget)
                why = run.message or "stopped by the user"
                run = self._stop(run, why) if run.stop_requested else steps[run.state](run)
            except StateError:
                run = self.ledger.get_run(self.run_id)  # another process moved it; look again
                continue
            except LedgerBusyError as exc:  # transient: the job goes on; try the step again
                print(f"ledger busy, trying again: {exc.user_message()}", flush=True)
                continue
            except SpotrunError as exc:
                end = self._agent_end_after(self.ledger.get_run(self.run_id))
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
        run = self.ledger.transition(self.run_id, target, reason)
        self._refresh_ssh_config()  # the run's entries appear as it runs, go as it leaves
        return run

    def _refresh_ssh_config(self) -> None:
        try:
            ssh_config.refresh(self.ledger)
        except (OSError, SpotrunError) as exc:  # the run goes on; `spotrun ssh` rewrites it
            print(f"could not rewrite {ssh_config.FILE_NAME}: {exc}", flush=True)

    # ------------------------------------------------------------------ steps
    def _request(self, run: RunRecord) -> RunRecord:
        if run.state is not RunState.REQUESTED:
            run = self._move(RunState.REQUESTED, "requesting capacity")
        offers = list(run.plan.offers) if run.plan is not None else []
        if not offers:
            raise CapacityError("the run has no offers to request; launch it again")
        tried = []
        to_try = self.recovery.offers(run, offers)
        if self.cluster is None:  # a replacement goes where the cache volume is, if it can
            to_try = prefer_cache_zone(self.ledger, run, to_try)
        staying = False  # a cluster keeps its zone while aws.cluster_replace_s lasts
        if self.cluster is not None:
            to_try, staying = self._cluster_offers(run, to_try)
        replacing = frozenset(self.recovery.doomed_ids())
        for offer in to_try:
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
                self.ledger.add_event(run.id, "capacity", tried[-1])
                if exc.message.startswith("partial fill"):  # it ran, briefly: in the ledger
                    self.recovery.record_ended(self.provider.describe(run.id))
                continue
            for inst in instances:
                self.ledger.upsert_instance(to_record(inst))
            self.ledger.add_event(
                run.id, "capacity", f"got {len(instances)} x {offer.instance_type} in {offer.zone}"
            )
            return self._move(RunState.PROVISIONING, f"{offer.instance_type} in {offer.zone}")
        if staying:  # ask the cluster's zone again shortly, until the bound passes
            time.sleep(self.poll_s)
            return self.ledger.get_run(self.run_id)
        raise CapacityError("no offer could be filled; tried " + "; ".join(tried))

    def _cluster_offers(self, run: RunRecord, offers: list[Offer]) -> tuple[list[Offer], bool]:
        """A cluster that lost nodes asks for them in its own zone and type (its placement
        group) until aws.cluster_replace_s has passed; then the whole cluster moves."""
        assert self.cluster is not None
        survivors = self._live_instances()
        if not survivors or len(survivors) >= run.spec.resources.nodes:
            return offers, False
        head = survivors[0]
        same = [o for o in offers if (o.instance_type, o.zone) == (head.instance_type, head.zone)]
        if same and not self.cluster.zone_bound_passed(run, survivors):
            return same, True
        self.cluster.move_whole(run, survivors, f"{head.instance_type} in {head.zone}")
        return offers, False

    def _live_instances(self) -> list[Instance]:
        doomed = self.recovery.doomed_ids()  # noticed instances no longer count
        live = [i for i in self.provider.describe(self.run_id) if i.is_live and i.id not in doomed]
        return cluster.order(live) if self.cluster is not None else live

    def _provision(self, run: RunRecord) -> RunRecord:
        live = self._live_instances()
        if not live:
            return self._move(RunState.INTERRUPTED, "the instance went away while provisioning")
        ready = self.provider.wait_ready(live, self.ledger.settings.aws.ssh_timeout_s)
        for inst in ready:
            self.ledger.upsert_instance(to_record(inst))
        return self._move(RunState.BOOTSTRAPPING, "instance ready")

    def _driver(self, instance: Instance) -> JobDriver:
        return JobDriver(
            self.provider.runner(instance),
            self.provider.spotrun_command(instance),
            self.provider.run_dir(instance, self.run_id),
            self.session,
        )

    def _bootstrap(self, run: RunRecord) -> RunRecord:
        live = self._live_instances()
        if not live:
            return self._move(RunState.INTERRUPTED, "the instance went away while bootstrapping")
        if self.cluster is not None:
            return self.cluster.bootstrap(run, live)
        head = live[0]
        runner = self.provider.runner(head)
        self.provider.bootstrap(head, runner)
        remote_dir = self.provider.run_dir(head, run.id)
        self._prepare_replacement(run, head, runner, remote_dir)  # spot recovery
        self._restore_checkpoints(run, head)
        wrap: list[str] = []
        if run.spec.job is None:  # a recipe: spotrun's trainer, started as it always was
            env = recipe_env(run, remote_dir)
            env.update(threads_env(self.provider, self.ledger, run))  # a shared machine's cores
            argv = job_argv(run, self.provider.spotrun_command(head), remote_dir)
        else:  # your own command (spotrun.remote.jobprep)
            argv, env, wrap = self._prepare_own_job(run, head)
        if isinstance(self.provider, SetsJobEnvironment):  # a packed sweep trial: its GPUs
            env.update(self.provider.job_env(head))
        env.update(attach_snapshot_data(self.provider, self.ledger, run, head))  # snapshot: data
        env.update(attach_data_cache(self.provider, self.ledger, run, head))  # s3: cache volume
        started = self._driver(head).start(argv, env, wrap)
        self.ledger.add_event(
            run.id,
            "job",
            f"job {'started' if started else 'already running'} in tmux session {self.session}",
        )
        return self._move(RunState.RUNNING, f"job running in tmux session {self.session}")

    def _node_job(
        self, run: RunRecord, inst: Instance, spec: cluster.ClusterSpec, rank: int
    ) -> tuple[list[str], dict[str, str], list[str]]:
        """argv, environment and wrapper options of node `rank` of a multi-node run."""
        remote_dir = self.provider.run_dir(inst, run.id)
        spotrun = self.provider.spotrun_command(inst)
        if run.spec.job is None:  # a recipe: `spotrun train` in every torchrun process
            env = recipe_env(run, remote_dir)
            program = job_argv(run, ["-m", "spotrun"], remote_dir)
            return spec.torchrun_argv(spotrun[0], rank, program), env, []
        argv, env, wrap = self._prepare_own_job(run, inst)
        env.update(
            {
                "MASTER_ADDR": cluster.node_address(spec.head),
                "MASTER_PORT": str(spec.port),
                "NODE_RANK": str(rank),
                "NNODES": str(len(spec.nodes)),
            }
        )
        return argv, env, wrap

    # ------------------------------------------------- your own command (issue 9)
    def _prepare_own_job(
        self, run: RunRecord, head: Instance
    ) -> tuple[list[str], dict[str, str], list[str]]:
        from spotrun.remote.jobprep import prepare_job

        assert run.spec.job is not None
        prepared = prepare_job(
            self.provider.runner(head),
            run.spec.job,
            run.id,
            self.provider.run_dir(head, run.id),
            planned_gpus(run.plan, head.instance_type, run.spec.resources.gpus),
            self.provider.spotrun_command(head),
        )
        for note in prepared.notes:
            self.ledger.add_event(run.id, "workdir", note)
        return prepared.argv, prepared.env, prepared.wrap_options

    def _restore_checkpoints(self, run: RunRecord, head: Instance) -> None:
        """A replacement instance starts with the run's checkpoints (SPOTRUN_CHECKPOINT_DIR)."""
        if self.provider.shares_filesystem:
            return
        from spotrun.remote.jobprep import restore_checkpoints

        sent = restore_checkpoints(
            self.provider.runner(head), run.run_dir, self.provider.run_dir(head, run.id)
        )
        if sent:
            self.ledger.add_event(
                run.id, "sync", f"{sent} checkpoint file(s) restored on {head.id}"
            )

    def _monitor(self, run: RunRecord) -> RunRecord:
        live = self._live_instances()
        if not live:
            end = self._agent_end(run, stored=True)  # e.g. while no controller was there
            if end is not None:
                return self._end_as_agent_said(run, end)
            return self._move(
                RunState.INTERRUPTED, self.recovery.describe_loss() or "the instance is gone"
            )
        driver = self._driver(live[0])
        polls = 0
        while True:
            run = self.ledger.get_run(self.run_id)
            if run.is_terminal or run.stop_requested or run.state is not RunState.RUNNING:
                return run
            polls += 1
            status = driver.status()
            self._sync(run, live[0], final=False)
            if self.cluster is not None:
                self.cluster.watch_others(run, live)
            self.recovery.answered()
            notice = self.recovery.check_notice(run, live)
            if notice is not None:  # a replacement is requested now, not when it dies
                return self._move(RunState.INTERRUPTED, notice)
            self._pull_metrics(run)
            for line in self.staging.poll():
                self.ledger.add_event(run.id, "staging", line)
            self._device_events(run)
            if time.monotonic() - self._cost_recorded_at >= COST_REFRESH_S:
                self.record_cost(run)
            over_budget = self._check_budget(run)
            if over_budget is not None and not status.finished:
                return self._stop(run, reason=over_budget)
            if status.finished:
                return self._job_ended(run, status)
            if status.lost:
                if self._live_instances():
                    self._write_exit(run, 137)  # session killed with no exit code written
                    return self._job_ended(run, JobStatus(False, 137))
                end = self._agent_end(run, stored=True)
                if end is not None:
                    return self._end_as_agent_said(run, end)
                return self._move(RunState.INTERRUPTED, "the instance is gone")
            # Quick at first, so that a short job's end is seen at once: 0.1, 0.2, 0.4 s, ...
            time.sleep(min(self.poll_s, 0.05 * 2**polls))

    def _prepare_replacement(
        self, run: RunRecord, head: Instance, runner: Runner, remote_dir: str
    ) -> None:
        """Before the job starts: on a replacement, collect the replaced instances'
        checkpoints and restore the newest complete one here; start the agent's watcher."""
        if self.provider.shares_filesystem:
            return
        if not self._driver(head).status().alive:
            replaced = [r for r in self.ledger.instances(run.id) if r.id != head.id]
            if replaced:
                self.recovery.collect(run, self._reach(run))
                self.recovery.restore(run, head, runner, remote_dir)
        self.recovery.start_watcher(run, head, runner)

    def _agent_end(self, run: RunRecord, *, stored: bool) -> AgentEnd | None:
        """The self-termination record of the run's current instance, if its agent ended it:
        synced here, or (stored=True, for an instance that is gone) in the durable store."""
        if run.state not in (RunState.BOOTSTRAPPING, RunState.RUNNING):
            return None  # the agent is started while bootstrapping (before the job)
        current = {r.id for r in self.ledger.instances(run.id) if not r.details.get(DOOMED)}
        end = find_end(run.run_dir, current)
        if end is None and stored and not self.provider.shares_filesystem:
            self._pull_durable(run)
            end = find_end(run.run_dir, current)
        if end is not None and end.why == JOB_ENDED and run.state is not RunState.RUNNING:
            return None  # no job of this instance ran yet: an older record
        return end

    def _agent_end_after(self, run: RunRecord) -> AgentEnd | None:
        """After an error: the agent's record, if the instance's agent ended the instance."""
        if run.state not in (RunState.BOOTSTRAPPING, RunState.RUNNING):
            return None
        try:
            return self._agent_end(run, stored=not self._live_instances())
        except SpotrunError as exc:  # EC2 or S3 unreachable too: recovery decides
            log.warning("could not look for the agent's record: %s", exc)
            return None

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
        code = end.exit_code if end.exit_code is not None else self._exit_code(run)
        if code == CHECKPOINTED and not run.stop_requested:  # stopped on a signal: go on
            for inst in self.provider.describe(run.id):
                if inst.id == end.instance_id:
                    self.recovery.mark_doomed(inst, "its agent ended it")
            return self._move(RunState.INTERRUPTED, "the job checkpointed and stopped on a signal")
        return self._move(RunState.SYNCING, f"job exited with code {code} (its agent saw it)")

    def _job_ended(self, run: RunRecord, status: JobStatus) -> RunRecord:
        self.ledger.add_event(run.id, "job", f"job exited with code {status.exit_code}")
        end = self._agent_end(run, stored=False)
        if end is not None:  # the agent stopped the job (the run's cap, no progress)
            return self._end_as_agent_said(run, end)
        if self.cluster is not None and status.exit_code != 0 and not run.stop_requested:
            lost = self._cluster_loss(run)  # a node's loss ends torchrun on the others too
            if lost is not None:
                return self._move(RunState.INTERRUPTED, lost)
        if status.exit_code == CHECKPOINTED and not run.stop_requested:
            return self._move(RunState.INTERRUPTED, "the job checkpointed and stopped on a signal")
        return self._move(RunState.SYNCING, f"job exited with code {status.exit_code}")

    def _cluster_loss(self, run: RunRecord) -> str | None:
        """Why a multi-node job ended early, if a node was lost: a notice, or fewer nodes."""
        live = self._live_instances()
        unreachable = []
        for inst in live[1:]:
            try:
                self._sync(run, inst, final=False)
            except RemoteError:
                unreachable.append(inst)
        notice = self.recovery.check_notice(run, live)
        if notice is not None:
            return notice
        ended = self.recovery.record_ended(self.provider.describe(run.id))
        if len(live) < run.spec.resources.nodes:
            names = ", ".join(f"{i.id} ({i.state_reason or i.state})" for i in ended)
            return f"the cluster lost a node: {names or 'a node went away'}"
        if unreachable:  # running in EC2, silent over SSH: that node alone is replaced
            silent = self.recovery.silent_nodes(unreachable)
            if silent:
                return self.recovery.drop_silent(silent)
            names = ", ".join(i.id for i in unreachable)
            return f"the job ended while {names} did not answer (they answer again)"
        return None

    def _write_exit(self, run: RunRecord, code: int) -> None:
        (run.run_dir / EXIT_FILE).write_text(
            json.dumps({"exit_code": code, "ended_at": time.time()})
        )

    def _sync(self, run: RunRecord, instance: Instance, *, final: bool) -> None:
        """Bring the run's files from the instance (nothing to do when it shares our disk)."""
        if self.provider.shares_filesystem:
            return
        from spotrun.remote.sync import pull_run_dir

        # node 0's folder is the run folder; other nodes' go beside it (spotrun.control.cluster)
        local = cluster.local_dir(run.run_dir, instance.id) if self.cluster else run.run_dir
        pull_run_dir(
            self.provider.runner(instance),
            self.provider.run_dir(instance, run.id),
            local,
            final=final,
        )
        if run.spec.job is not None and local == run.run_dir:
            pull_outputs(
                self.provider.runner(instance),
                run.spec.job,
                self.provider.run_dir(instance, run.id),
                run.run_dir,
            )

    def _final_sync(self, run: RunRecord) -> None:
        """The last pull before teardown: over the runner, then from the durable store.

        When the instance cannot be reached any more, what its uploader stored (S3 on AWS)
        is what the run keeps; the store also fills in anything the last pull missed.
        """
        live = self._live_instances()
        for inst in live[:1]:
            try:
                self._sync(run, inst, final=True)
            except RemoteError as exc:
                self.ledger.add_event(run.id, "sync", f"final sync failed: {exc.message}")
        for inst in live[1:]:  # a multi-node run's other nodes: their logs, best effort
            try:
                self._sync(run, inst, final=False)
            except RemoteError as exc:
                self.ledger.add_event(run.id, "sync", f"last sync of {inst.id}: {exc.message}")
        self._pull_durable(run)

    def _reach(self, run: RunRecord) -> Reach:
        """How recovery reaches a replaced instance: its job's end, an SSH sync, the store."""
        return Reach(
            job_ended=lambda inst: self._driver(inst).status().finished,
            sync=lambda inst: self._sync(run, inst, final=False),
            durable=lambda: self._pull_durable(run),
        )

    def _pull_durable(self, run: RunRecord) -> None:
        if isinstance(self.provider, PullsStoredFiles):
            fetched = self.provider.pull_durable(run.id, run.run_dir)
            if fetched:
                self.ledger.add_event(
                    run.id, "sync", f"{len(fetched)} file(s) from the durable store"
                )

    def _device_events(self, run: RunRecord) -> None:
        """What the trainer chose for its device, and why (device.json): an event per start."""
        for line in self.devices.poll():
            self.ledger.add_event(run.id, "device", line)

    def _pull_metrics(self, run: RunRecord) -> None:
        new = self.metrics.read_new()
        if new:
            self.ledger.set_metrics(run.id, new[-1])

    def _exit_code(self, run: RunRecord) -> int | None:
        try:
            code = json.loads((run.run_dir / EXIT_FILE).read_text()).get("exit_code")
        except (OSError, ValueError):
            return None
        return code if isinstance(code, int) else None

    def _finish(self, run: RunRecord) -> RunRecord:
        self._final_sync(run)
        self.ledger.add_event(run.id, "sync", "results synced")
        self._pull_metrics(run)
        for line in self.staging.poll():
            self.ledger.add_event(run.id, "staging", line)
        self._device_events(run)
        self._teardown(run, "job finished")
        code = self._exit_code(run)
        if code == 0:
            return self._move(RunState.SUCCEEDED, "job exited with code 0")
        return self._move(RunState.FAILED, self._failure_message(run, code))

    def _failure_message(self, run: RunRecord, code: int | None) -> str:
        if code is not None and _exit_phase(run) == "setup":
            return setup_failure(run.run_dir, code)
        tail = _log_tail(run.run_dir / JOB_LOG_FILE, 3)
        what = (
            f"job exited with code {code}" if code is not None else "job ended without an exit code"
        )
        return f"{what}: {tail}" if tail else what

    def _check_budget(self, run: RunRecord) -> str | None:
        """The reason to stop now if the run's cap would otherwise be crossed, else None.

        Checked every `budget_check_s`; a projection that cannot be made (no price) is an
        event, once, and the run goes on: the instance-side cap still holds."""
        if run.spec.max_cost_usd is None:
            return None
        if time.monotonic() - self._budget_checked_at < self.ledger.settings.budget_check_s:
            return None
        self._budget_checked_at = time.monotonic()
        book = PriceBook(self.ledger, self._price_source)
        try:
            verdict = budget_guard.check(self.ledger, run, book)
        except SpotrunError as exc:
            note = f"budget not projected: {exc.user_message()}"
            if note != self._budget_note:
                self.ledger.add_event(run.id, "budget", note)
            self._budget_note = note
            return None
        if verdict is None:
            return None
        if verdict.action is Action.STOP_NOW:
            self.ledger.add_event(run.id, "budget", verdict.reason)
            return f"budget: ${run.spec.max_cost_usd:.2f} cap; {verdict.reason}"
        # Said when first known and whenever a price change moves the stop by over a minute.
        last, now_at = self._budget_stop_at, verdict.stop_at
        moved = (last is None) != (now_at is None) or (
            last is not None and now_at is not None and abs(now_at - last) > 60
        )
        if moved or not self._budget_said:
            self.ledger.add_event(run.id, "budget", verdict.reason)
            self._budget_stop_at, self._budget_said = now_at, True
        self._budget_note = None
        return None

    def _stop(self, run: RunRecord, reason: str = "stopped by the user") -> RunRecord:
        live = self._live_instances()
        for inst in live:
            try:
                self._driver(inst).stop(grace_s=15.0)
            except SpotrunError as exc:
                self.ledger.add_event(
                    run.id, "stop", f"could not stop the job cleanly: {exc.message}"
                )
        self._final_sync(run)
        self._pull_metrics(run)
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

    # --------------------------------------------------------------- teardown
    def _teardown(self, run: RunRecord, reason: str) -> None:
        """Terminate every instance of the run, record their ends and the run's cost."""
        ended = self.provider.terminate(run.id)
        mark_data_volumes_deleted(self.ledger, run)  # the provider deleted them with the run
        ended_ids = {i.id for i in ended}
        now = time.time()
        for inst in self.provider.describe(run.id):
            if inst.is_live:
                continue
            known = {r.id: r for r in self.ledger.instances(run.id)}
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
        self.record_cost(run)

    def record_cost(self, run: RunRecord) -> None:
        """Recompute the run's cost lines: live instances up to now, ended ones in full.

        A cost that cannot be computed (no price history, a refused price request) is an event,
        not a failed run: the instances are already gone, and `spotrun cost` computes it again
        when it can."""
        self._cost_recorded_at = time.monotonic()
        book = PriceBook(self.ledger, self._price_source)
        try:
            bill = bill_run(self.ledger, self.ledger.get_run(run.id), book, now=time.time())
        except SpotrunError as exc:  # no history, or the cloud refused the price request
            message = f"cost not computed: {exc.user_message()}"
            if message != self._cost_error:
                self.ledger.add_event(run.id, "cost", message)
            self._cost_error = message
            return
        self._cost_error = None
        self.ledger.replace_cost_lines(run.id, bill.cost_lines())

    def _price_source(self, provider: str) -> PriceSource | None:
        if provider == self.provider.name and isinstance(self.provider, PriceSource):
            return self.provider
        return None


def _exit_phase(run: RunRecord) -> str | None:
    """Which part of the job ended it: "setup" or "run" (the wrapper records it)."""
    try:
        phase = json.loads((run.run_dir / EXIT_FILE).read_text()).get("phase")
    except (OSError, ValueError):
        return None
    return phase if isinstance(phase, str) else None


def _log_tail(path: Path, lines: int) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    kept = [printable(line).strip() for line in text.splitlines() if printable(line).strip()]
    return " | ".join(kept[-lines:])
