"""The controller's steps for a multi-node run (spotrun.control.cluster says who the nodes are).

Bootstrapping a cluster provisions every node, brings a restarted cluster's checkpoint to its
node 0, starts the agent's watcher on every node and then torchrun on every node in one tmux
session of the run's name. While it runs, node 0 is the run's job (its exit is the run's) and
every other node is synced for what its watcher reports (a spot notice); node 0's watcher alone
judges the job's progress (the other nodes' files need not move).

When a node is lost (notice, reclaim, silence), the survivors' torchrun processes stop too (the
notice reaches every rank: the job agrees to stop at one step and rank 0 checkpoints). The run is
interrupted as a single-node run is; the replacement is asked for in the cluster's zone and
placement group, for `aws.cluster_replace_s`; after that the whole cluster moves: the survivors
are marked doomed like the lost node, and N instances are asked for wherever an offer fills.
The healthy nodes are never relaunched while the cluster stays.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from spotrun.cloud.base import Instance, Provider
from spotrun.control import cluster
from spotrun.control.recovery import CHECKPOINT_WAIT_S, Reach, Recovery
from spotrun.core.errors import RemoteError
from spotrun.core.runstates import RunState
from spotrun.core.waiting import poll_until
from spotrun.launch.plan import planned_gpus, planned_offer
from spotrun.remote.job import JobDriver
from spotrun.store.ledger import Ledger, RunRecord

NodeJob = tuple[list[str], dict[str, str], list[str]]  # argv, environment, wrapper options


@dataclass(frozen=True)
class RunSteps:
    """What the cluster steps use of the run's controller: its parts, and the single-node
    steps they repeat on every node (the controller hands them over; nothing imports it)."""

    ledger: Ledger
    provider: Provider
    recovery: Recovery
    session: str  # the tmux session every node's torchrun runs in
    move: Callable[[RunState, str], RunRecord]
    restore_checkpoints: Callable[[RunRecord, Instance], None]
    node_job: Callable[[RunRecord, Instance, cluster.ClusterSpec, int], NodeJob]
    driver: Callable[[Instance], JobDriver]
    sync: Callable[[RunRecord, Instance], None]  # a pull that is not the last
    reach: Callable[[RunRecord], Reach]


class ClusterSteps:
    def __init__(self, run_steps: RunSteps) -> None:
        self.steps = run_steps
        self._lost_since: float | None = None  # when the cluster's zone first had no room

    # --------------------------------------------------------------- bootstrap
    def bootstrap(self, run: RunRecord, live: list[Instance]) -> RunRecord:
        steps = self.steps
        wanted = run.spec.resources.nodes
        if len(live) < wanted:
            return steps.move(
                RunState.INTERRUPTED,
                f"{wanted - len(live)} of the cluster's {wanted} nodes went away while "
                "bootstrapping",
            )
        provider = steps.provider
        with ThreadPoolExecutor(max_workers=len(live)) as pool:  # independent SSH sessions
            list(pool.map(lambda inst: provider.bootstrap(inst, provider.runner(inst)), live))
        self._rejoin(run, live)
        steps.restore_checkpoints(run, live[0])  # your own command's checkpoint dir, on node 0
        for rank, inst in enumerate(live):
            runner = provider.runner(inst)
            steps.recovery.start_watcher(run, inst, runner, judge_progress=rank == 0)
        head = live[0]
        spec = cluster.ClusterSpec(
            run_id=run.id,
            nodes=live,
            procs_per_node=max(
                1, planned_gpus(run.plan, head.instance_type, run.spec.resources.gpus)
            ),
            port=steps.ledger.settings.aws.rendezvous_port,
            efa=bool((planned_offer(run.plan, head.instance_type) or {}).get("efa")),
        )
        cluster.write_layout(run.run_dir, spec)
        overrides = dict(steps.ledger.settings.aws.cluster_env)
        for rank, inst in enumerate(live):
            argv, env, wrap = steps.node_job(run, inst, spec, rank)
            env.update(spec.env(rank, overrides))
            started = steps.driver(inst).start(argv, env, wrap)
            steps.ledger.add_event(
                run.id,
                "job",
                f"node {rank} ({inst.id}, {cluster.node_address(inst)}): torchrun "
                f"{'started' if started else 'already running'} in tmux session {steps.session}",
            )
        self._lost_since = None
        return steps.move(
            RunState.RUNNING,
            f"job running on {len(live)} nodes (c10d rendezvous on "
            f"{cluster.node_address(head)}:{spec.port})",
        )

    def _rejoin(self, run: RunRecord, live: list[Instance]) -> None:
        """On a restart: let the survivors' jobs end, bring their files and the lost nodes'
        home, and put the newest checkpoint on the new node 0."""
        steps = self.steps
        previous = cluster.read_layout(run.run_dir)
        if not previous:
            return
        survivors = [inst for inst in live if inst.id in previous]
        for inst in survivors:
            self._wait_job_end(inst)
            steps.sync(run, inst)
        steps.recovery.collect(run, steps.reach(run))
        head = live[0]
        steps.recovery.restore(
            run, head, steps.provider.runner(head), steps.provider.run_dir(head, run.id)
        )

    def _wait_job_end(self, inst: Instance) -> None:
        driver = self.steps.driver(inst)

        def ended() -> bool:
            try:
                return not driver.status().alive
            except RemoteError:
                return True  # unreachable: recovery deals with it

        if not poll_until(ended, timeout_s=CHECKPOINT_WAIT_S, interval_s=0.3):
            driver.stop(grace_s=15.0)  # a survivor that never heard of the stop: end it now

    # ----------------------------------------------------------------- monitor
    def watch_others(self, run: RunRecord, live: list[Instance]) -> None:
        """Each poll: bring the other nodes' reports home (a notice, their logs)."""
        steps = self.steps
        for inst in live[1:]:
            steps.sync(run, inst)

    # ----------------------------------------------------------------- request
    def zone_bound_passed(self, run: RunRecord, survivors: list[Instance]) -> bool:
        """Whether the cluster's zone has had no room for a replacement for longer than
        aws.cluster_replace_s (then the whole cluster moves)."""
        now = time.monotonic()
        if self._lost_since is None:
            self._lost_since = now
        bound = self.steps.ledger.settings.aws.cluster_replace_s
        return bool(survivors) and now - self._lost_since >= bound

    def move_whole(self, run: RunRecord, survivors: list[Instance], tried: str) -> None:
        """Give up the cluster's zone: the survivors go as the lost node did (their
        checkpoints are collected before they are terminated), N nodes are asked anew."""
        bound = self.steps.ledger.settings.aws.cluster_replace_s
        zone = survivors[0].zone if survivors else "its zone"
        for inst in survivors:
            self.steps.recovery.mark_doomed(inst, "the cluster moves")
        self.steps.ledger.add_event(
            run.id,
            "capacity",
            f"no replacement node in {zone} within {bound:.0f} s ({tried}); the whole cluster "
            f"moves: {', '.join(i.id for i in survivors)} will be terminated and "
            f"{run.spec.resources.nodes} nodes requested wherever an offer fills",
        )
        self._lost_since = None
