"""Starting the agent's watcher on an instance, with the run's caps it enforces alone.

The watcher (spotrun.agent.watcher, assembled with the instance's own cloud parts: the
module spotrun.cloud.by_name names for the run's cloud) runs beside the job: it reports spot
notices, and ends the instance itself at the run's deadline (max-hours, or the budget cap at
the offer's price) even when no controller is there. The deadline travels as seconds from now
(`--deadline-in`), which the watcher counts on the instance's monotonic clock: the two
machines' clocks may disagree by hours, a duration means the same on both.
"""

from __future__ import annotations

import shlex
import time
from fractions import Fraction

from spotrun.cloud.base import Instance, Provider
from spotrun.cloud.by_name import instance_watcher
from spotrun.core.rundir import WATCHER_LOG_FILE, WATCHER_PID_FILE
from spotrun.cost import budget
from spotrun.remote.detached import start_once
from spotrun.remote.runner import Runner
from spotrun.store.ledger import Ledger, RunRecord


def agent_deadline(
    ledger: Ledger, run: RunRecord, offer_usd_per_hour: float | None
) -> float | None:
    """When the instance must end itself even with no controller: max-hours or budget."""
    ends = []
    if run.spec.max_hours is not None:
        ends.append(run.created_at + run.spec.max_hours * 3600.0)
    cap = run.spec.max_cost_usd
    if cap is not None and offer_usd_per_hour:
        now = time.time()
        live = [
            budget.LiveInstance(int(now), Fraction(offer_usd_per_hour).limit_denominator(10**9))
        ] * run.spec.resources.nodes  # every node of a cluster bills at that price
        spent = ledger.run_cost_exact(run.id)
        verdict = budget.decide(now, spent, Fraction(cap), live, budget.StopMargin())
        if verdict.stop_at is not None:
            ends.append(float(verdict.stop_at))
    return min(ends) if ends else None


def start_watcher(
    ledger: Ledger,
    provider: Provider,
    run: RunRecord,
    head: Instance,
    runner: Runner,
    *,
    judge_progress: bool = True,
) -> None:
    """Start the agent's watcher on `head` unless it runs already (idempotent).

    judge_progress=False: this node's files are no sign of the job's progress (a cluster's
    other nodes; node 0 judges, and when it ends the job the others' jobs end too)."""
    watcher = instance_watcher(run.spec.cloud, ledger.settings)
    if watcher is None:  # the run's cloud has no watcher for its instances
        return
    settings = ledger.settings.run
    remote_dir = provider.run_dir(head, run.id)
    argv = [
        *provider.spotrun_command(head)[:1],
        "-m",
        watcher.module,
        "--run-dir",
        remote_dir,
        "--run-id",
        run.id,
        "--poll",
        str(settings.notice_poll_s),
        "--no-progress",
        str(settings.no_progress_s if judge_progress else 0.0),
        "--end-grace",
        str(settings.end_grace_s),
        "--region",
        head.region,
        *watcher.args,
    ]
    planned = run.plan.offer_of(head.instance_type, head.zone) if run.plan else None
    deadline = agent_deadline(ledger, run, planned.spot_usd_per_hour if planned else None)
    if deadline is not None:  # both on this machine's clock: their difference is a duration
        argv += ["--deadline-in", f"{max(0.0, deadline - time.time()):.0f}"]
    start_once(
        runner,
        remote_dir,
        shlex.join(argv),
        pid_file=WATCHER_PID_FILE,
        log_file=WATCHER_LOG_FILE,
        what="starting the agent's watcher",
    )
