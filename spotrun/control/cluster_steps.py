"""The controller's steps for a multi-node run (spotrun.control.cluster says who the nodes are).

Bootstrapping a cluster provisions every node, brings a restarted cluster's checkpoint to its
node 0, starts the agent's watcher on every node and then torchrun on every node in one tmux
session of the run's name. While it runs, node 0 is the run's job (its exit is the run's) and
every other node is synced for what its watcher reports (a spot notice); node 0's watcher alone
judges the job's progress (the other nodes' files need not move).

When a node is lost (notice, reclaim, silence), the survivors' torchrun processes stop too (the
notice reaches every rank: the job agrees to stop at one step and rank 0 checkpoints). The run is
interrupted as a single-node run is; the replacement is asked for in the cluster's zone and
placement group, for `run.cluster_replace_s`; after that the whole cluster moves: the survivors
are marked doomed like the lost node, and N instances are asked for wherever an offer fills.
The healthy nodes are never relaunched while the cluster stays.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from spotrun.cloud.base import Instance, Offer, Provider
from spotrun.cloud.plan import planned_gpus
from spotrun.control import cluster
from spotrun.control.checkpoint_restore import CheckpointRestore
from spotrun.control.job_start import JobStart
from spotrun.control.notices import NoticeWatch
from spotrun.control.recovery import CHECKPOINT_WAIT_S, Recovery
from spotrun.control.run_instances import RunInstances
from spotrun.control.run_sync import RunSync
from spotrun.control.transitions import RunTransitions
from spotrun.control.watcher_start import start_watcher
from spotrun.core.errors import RemoteError
from spotrun.core.node_order import node_address
from spotrun.core.runstates import RunState
from spotrun.core.waiting import SYSTEM_CLOCK, Clock, poll_until
from spotrun.store.ledger import Ledger, RunRecord


class ClusterSteps:
    """The multi-node half of the controller, over the same parts as its single-node steps."""

    def __init__(
        self,
        ledger: Ledger,
        provider: Provider,
        *,
        instances: RunInstances,
        recovery: Recovery,
        notices: NoticeWatch,
        restore: CheckpointRestore,
        jobs: JobStart,
        sync: RunSync,
        transitions: RunTransitions,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.ledger = ledger
        self.provider = provider
        self.instances = instances
        self.recovery = recovery
        self.notices = notices
        self.restore = restore
        self.jobs = jobs
        self.sync = sync
        self.transitions = transitions
        self.clock = clock
        self._lost_since: float | None = None  # when the cluster's zone first had no room

    # --------------------------------------------------------------- bootstrap
    def bootstrap(self, run: RunRecord, live: list[Instance]) -> RunRecord:
        wanted = run.spec.resources.nodes
        if len(live) < wanted:
            return self.transitions.move(
                RunState.INTERRUPTED,
                f"{wanted - len(live)} of the cluster's {wanted} nodes went away while "
                "bootstrapping",
            )
        provider = self.provider
        with ThreadPoolExecutor(max_workers=len(live)) as pool:  # independent SSH sessions
            list(pool.map(lambda inst: provider.bootstrap(inst, provider.runner(inst)), live))
        self._rejoin(run, live)
        self.jobs.restore_checkpoints(run, live[0])  # your own command's checkpoint dir, node 0
        for rank, inst in enumerate(live):
            runner = provider.runner(inst)
            start_watcher(self.ledger, provider, run, inst, runner, judge_progress=rank == 0)
        head = live[0]
        planned = run.plan.offer_of(head.instance_type) if run.plan else None
        spec = cluster.ClusterSpec(
            run_id=run.id,
            nodes=live,
            procs_per_node=max(
                1, planned_gpus(run.plan, head.instance_type, run.spec.resources.gpus)
            ),
            port=self.ledger.settings.run.rendezvous_port,
            efa=planned is not None and planned.efa,
        )
        cluster.write_layout(run.run_dir, spec)
        overrides = dict(self.ledger.settings.run.cluster_env)
        for rank, inst in enumerate(live):
            argv, env, wrap = self.jobs.node_job(run, inst, spec, rank)
            env.update(spec.env(rank, overrides))
            started = self.jobs.driver(inst).start(argv, env, wrap)
            self.ledger.add_event(
                run.id,
                "job",
                f"node {rank} ({inst.id}, {node_address(inst)}): torchrun "
                f"{'started' if started else 'already running'} in tmux session "
                f"{self.jobs.session}",
            )
        self._lost_since = None
        return self.transitions.move(
            RunState.RUNNING,
            f"job running on {len(live)} nodes (c10d rendezvous on "
            f"{node_address(head)}:{spec.port})",
        )

    def _rejoin(self, run: RunRecord, live: list[Instance]) -> None:
        """On a restart: let the survivors' jobs end, bring their files and the lost nodes'
        home, and put the newest checkpoint on the new node 0."""
        previous = cluster.read_layout(run.run_dir)
        if not previous:
            return
        survivors = [inst for inst in live if inst.id in previous]
        for inst in survivors:
            self._wait_job_end(inst)
            self.sync.pull(run, inst)
        self.recovery.collect(run, self.sync.access(run, self.jobs.job_ended))
        head = live[0]
        self.restore.restore(
            run, head, self.provider.runner(head), self.provider.run_dir(head, run.id)
        )

    def _wait_job_end(self, inst: Instance) -> None:
        driver = self.jobs.driver(inst)

        def ended() -> bool:
            try:
                return not driver.status().alive
            except RemoteError:
                return True  # unreachable: recovery deals with it

        if not poll_until(ended, timeout_s=CHECKPOINT_WAIT_S, interval_s=0.3, clock=self.clock):
            driver.stop(grace_s=15.0)  # a survivor that never heard of the stop: end it now

    # ----------------------------------------------------------------- monitor
    def watch_others(self, run: RunRecord, live: list[Instance]) -> None:
        """Each poll: bring the other nodes' reports home (a notice, their logs)."""
        for inst in live[1:]:
            self.sync.pull(run, inst)

    def loss(self, run: RunRecord) -> str | None:
        """Why a multi-node job ended early, if a node was lost: a notice, or fewer nodes."""
        live = self.instances.live()
        unreachable = []
        for inst in live[1:]:
            try:
                self.sync.pull(run, inst)
            except RemoteError:
                unreachable.append(inst)
        notice = self.notices.check(run, live)
        if notice is not None:
            return notice
        ended = self.instances.record_ended(self.provider.describe(run.id))
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

    # ----------------------------------------------------------------- request
    def offers(self, run: RunRecord, offers: list[Offer]) -> tuple[list[Offer], bool]:
        """A cluster that lost nodes asks for them in its own zone and type (its placement
        group) until run.cluster_replace_s has passed; then the whole cluster moves. The
        offers to try, and whether the cluster stays (then it asks again shortly)."""
        survivors = self.instances.live()
        if not survivors or len(survivors) >= run.spec.resources.nodes:
            return offers, False
        head = survivors[0]
        same = [o for o in offers if (o.instance_type, o.zone) == (head.instance_type, head.zone)]
        if same and not self.zone_bound_passed(run, survivors):
            return same, True
        self.move_whole(run, survivors, f"{head.instance_type} in {head.zone}")
        return offers, False

    def zone_bound_passed(self, run: RunRecord, survivors: list[Instance]) -> bool:
        """Whether the cluster's zone has had no room for a replacement for longer than
        run.cluster_replace_s (then the whole cluster moves)."""
        now = self.clock.monotonic()
        if self._lost_since is None:
            self._lost_since = now
        bound = self.ledger.settings.run.cluster_replace_s
        return bool(survivors) and now - self._lost_since >= bound

    def move_whole(self, run: RunRecord, survivors: list[Instance], tried: str) -> None:
        """Give up the cluster's zone: the survivors go as the lost node did (their
        checkpoints are collected before they are terminated), N nodes are asked anew."""
        bound = self.ledger.settings.run.cluster_replace_s
        zone = survivors[0].zone if survivors else "its zone"
        for inst in survivors:
            self.instances.mark_doomed(inst, "the cluster moves")
        self.ledger.add_event(
            run.id,
            "capacity",
            f"no replacement node in {zone} within {bound:.0f} s ({tried}); the whole cluster "
            f"moves: {', '.join(i.id for i in survivors)} will be terminated and "
            f"{run.spec.resources.nodes} nodes requested wherever an offer fills",
        )
        self._lost_since = None
