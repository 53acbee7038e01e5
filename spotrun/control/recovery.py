"""Surviving spot: what the controller does when a run's capacity is taken away.

The run becomes interrupted when the instance's agent reports a spot notice (notice.json,
brought home by the sync), when EC2 reports the instance ended with a spot reason, or when a
running instance stops answering for `aws.unreachable_s` (in a cluster, the silent nodes alone
are terminated and replaced). A replacement is requested at once: with a notice, while the
noticed instance is still checkpointing, because the noticed instance is marked "doomed" in the
ledger and no longer counts as the run's capacity. Before the job starts on the replacement,
the checkpoints of the doomed instance are collected (its last sync, then the durable store),
the doomed instance is terminated, and the newest checkpoint that reads back whole is pushed to
the replacement, where the trainer resumes from it.
"""

from __future__ import annotations

import json
import logging
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from spotrun.cloud.base import Instance, Offer, Provider
from spotrun.control.cluster import node_dirs
from spotrun.control.instance_records import to_record
from spotrun.core.checkpoint_files import newest_complete_checkpoint
from spotrun.core.errors import CapacityError, RemoteError, SpotrunError
from spotrun.core.rundir import (
    CHECKPOINTS_DIR,
    EXIT_FILE,
    JOB_LOG_FILE,
    METRICS_FILE,
    NOTICE_FILE,
    REBALANCE_FILE,
    RECIPE_FILE,
    SYNC_STATE_FILE,
    WATCHER_LOG_FILE,
    WATCHER_PID_FILE,
)
from spotrun.core.runstates import RunState
from spotrun.cost import budget
from spotrun.remote.runner import Runner
from spotrun.store.ledger import InstanceRecord, Ledger, RunRecord

log = logging.getLogger(__name__)

DOOMED = "doomed"  # key in an instance record's details: why it no longer counts
NOTICED = "spot interruption notice"  # the DOOMED reason of a noticed instance
MAX_INTERRUPTIONS = 20  # a run replaced this often is failed rather than retried for ever
# How long the doomed instance's job may take to checkpoint and exit after a notice (EC2 gives
# 120 s from notice to termination; the replacement is being provisioned meanwhile).
CHECKPOINT_WAIT_S = 100.0


@dataclass(frozen=True)
class Reach:
    """How `Recovery.collect` reaches a doomed instance (the controller's own calls)."""

    job_ended: Callable[[Instance], bool]  # its job has written its exit record
    sync: Callable[[Instance], None]  # pull its run folder over SSH
    durable: Callable[[], None]  # fill in from the durable store


@dataclass(frozen=True)
class Notice:
    instance_id: str
    seen_at: float
    action: str | None
    stored: bool = False  # the agent has made its upload to the durable store (or tried)


def read_notice(run_dir: Path) -> Notice | None:
    try:
        data = json.loads((run_dir / NOTICE_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("instance_id"), str):
        return None
    return Notice(
        data["instance_id"],
        float(data.get("seen_at") or 0.0),
        data.get("action"),
        stored=data.get("stored_at") is not None,
    )


def is_spot_reclaim(reason: str | None) -> bool:
    return bool(reason) and "Spot" in str(reason)


def truncate_metrics(path: Path, step: int) -> None:
    """Keep the metrics lines up to `step` (the resumed trainer writes the later ones again)."""
    if not path.exists():
        return
    kept = []
    for line in path.read_text().splitlines():
        try:
            if json.loads(line).get("step", 0) <= step:
                kept.append(line)
        except ValueError:
            continue
    text = "".join(f"{line}\n" for line in kept)
    if text != path.read_text():
        path.write_text(text)


class Recovery:
    """The controller's recovery half, for one run."""

    def __init__(self, ledger: Ledger, provider: Provider, run_id: str) -> None:
        self.ledger = ledger
        self.provider = provider
        self.run_id = run_id
        self.settings = ledger.settings
        self._unreachable_since: float | None = None
        self._rebalance_seen = False

    # ------------------------------------------------------------- doomed
    def doomed_ids(self) -> set[str]:
        return {r.id for r in self.ledger.instances(self.run_id) if r.details.get(DOOMED)}

    def _record(self, instance: Instance, **changes: object) -> InstanceRecord:
        known = {r.id: r for r in self.ledger.instances(self.run_id)}
        prior = known.get(instance.id)
        details = dict(prior.details) if prior else {}
        details.update(changes.pop("details", {}))  # type: ignore[call-overload]
        changes["details"] = details
        return to_record(instance, **changes)

    def mark_doomed(self, instance: Instance, why: str) -> None:
        self.ledger.upsert_instance(
            self._record(instance, details={DOOMED: why, "at": time.time()})
        )

    # ---------------------------------------------------------- detection
    def check_notice(self, run: RunRecord, live: list[Instance]) -> str | None:
        """The interruption reason if one of `live` reported a spot notice."""
        if not self._rebalance_seen and (run.run_dir / REBALANCE_FILE).exists():
            self._rebalance_seen = True
            self.ledger.add_event(
                run.id, "spot", "EC2 recommends rebalancing: this capacity is at elevated risk"
            )
        # a multi-node run's other nodes report into their own folders
        notices = [n for n in (read_notice(d) for d in node_dirs(run.run_dir)) if n is not None]
        doomed = self.doomed_ids()
        for inst, notice in ((i, n) for n in notices for i in live):
            if inst.id == notice.instance_id and inst.id not in doomed:
                self.mark_doomed(inst, NOTICED)
                lag = time.time() - notice.seen_at
                self.ledger.add_event(
                    run.id,
                    "spot",
                    f"interruption notice on {inst.id} (seen {lag:.1f} s ago); "
                    "requesting a replacement now",
                )
                return f"spot interruption notice on {inst.id}"
        return None

    def describe_loss(self) -> str | None:
        """Why the run has no live capacity, if EC2 says an instance of it was reclaimed
        (one whose end the ledger has not recorded yet; recording it now)."""
        instances = self.provider.describe(self.run_id)
        doomed = self.doomed_ids()
        if any(i.is_live and i.id not in doomed for i in instances):
            return None
        ended = self.record_ended(instances)
        for inst in ended:
            if inst.is_stopped:  # its job is gone with it; `collect` terminates it
                return f"instance {inst.id} was stopped: {inst.state_reason or inst.state}"
            if is_spot_reclaim(inst.state_reason) or inst.id in doomed:
                return f"instance {inst.id} was reclaimed: {inst.state_reason or 'spot notice'}"
        return None

    def record_ended(self, instances: list[Instance]) -> list[Instance]:
        """Record the ends of those of `instances` that ended unrecorded; returns them."""
        known = {r.id: r for r in self.ledger.instances(self.run_id)}
        ended = []
        for inst in instances:
            prior = known.get(inst.id)
            if inst.is_live or (prior is not None and prior.terminated_at is not None):
                continue
            self.ledger.upsert_instance(
                self._record(
                    inst,
                    terminated_at=inst.ended_at or time.time(),
                    end_reason=inst.state_reason or "ended",
                )
            )
            ended.append(inst)
        return ended

    def lost(self, run: RunRecord, exc: SpotrunError) -> RunRecord | None:
        """What to do about an error while the run holds capacity: a RunRecord to go on from
        (interrupted, or the same state to retry the step), or None to fail the run."""
        if run.state not in (RunState.PROVISIONING, RunState.BOOTSTRAPPING, RunState.RUNNING):
            return None
        if self._interruptions(run) >= MAX_INTERRUPTIONS:
            return None
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
        """The instance did not answer: retry until aws.unreachable_s, then replace it."""
        now = time.monotonic()
        if self._unreachable_since is None:
            self._unreachable_since = now
            self.ledger.add_event(run.id, "remote", f"instance not answering: {exc.message}")
        limit = self.settings.aws.unreachable_s
        if now - self._unreachable_since < limit:
            time.sleep(min(self.settings.aws.poll_s, 2.0))
            return self.ledger.get_run(self.run_id)
        doomed = self.doomed_ids()
        gone = [i for i in self.provider.describe(self.run_id) if i.is_live and i.id not in doomed]
        if len(gone) > 1:  # a cluster: only the nodes that are silent go, as after a notice
            gone = [i for i in gone if not self.answers(i)]
            if not gone:  # every node answers again
                self.answered()
                return self.ledger.get_run(self.run_id)
        return self.interrupt(run, self.drop_silent(gone))

    def answers(self, instance: Instance) -> bool:
        """Whether the instance runs a command over SSH now."""
        try:
            self.provider.runner(instance).run("true", timeout_s=15)
        except RemoteError:
            return False
        return True

    def silent_nodes(self, nodes: list[Instance]) -> list[Instance]:
        """Those of `nodes` that still do not answer after aws.unreachable_s."""
        deadline = time.monotonic() + self.settings.aws.unreachable_s
        silent = [i for i in nodes if not self.answers(i)]
        while silent and time.monotonic() < deadline:
            time.sleep(min(self.settings.aws.poll_s, 2.0))
            silent = [i for i in silent if not self.answers(i)]
        return silent

    def drop_silent(self, silent: list[Instance]) -> str:
        """Terminate instances that stopped answering (marked doomed, so that a replacement is
        asked for them alone); returns the reason to interrupt the run with."""
        why = f"did not answer for {self.settings.aws.unreachable_s:.0f} s"
        for inst in silent:
            self.mark_doomed(inst, why)
        self.terminate(silent, why)
        return f"{', '.join(i.id for i in silent) or 'the instance'} {why}"

    def answered(self) -> None:
        self._unreachable_since = None

    def _interruptions(self, run: RunRecord) -> int:
        return sum(1 for t in self.ledger.transitions(run.id) if t.to_state is RunState.INTERRUPTED)

    def interrupt(self, run: RunRecord, reason: str) -> RunRecord:
        self._unreachable_since = None
        return self.ledger.transition(self.run_id, RunState.INTERRUPTED, reason)

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
                f"no replacement fits the rest of the ${cap:.2f} budget (${float(spent):.4f} spent)"
            )
        return affordable

    # ------------------------------------------------------------- restore
    def terminate(self, instances: list[Instance], reason: str) -> None:
        """End these instances (not the whole run) and record their ends."""
        if not instances:
            return
        ended = self.provider.terminate_instances(self.run_id, [i.id for i in instances])
        now = time.time()
        for inst in ended:
            self.ledger.upsert_instance(
                self._record(inst, terminated_at=inst.ended_at or now, end_reason=reason)
            )

    def collect(self, run: RunRecord, pull: Reach) -> None:
        """Bring home what the doomed instances hold: wait for their jobs to checkpoint, pull
        over SSH, then fill in from the durable store; then terminate them."""
        why = {r.id: r.details.get(DOOMED) for r in self.ledger.instances(run.id)}
        described = self.provider.describe(run.id)
        live = [i for i in described if i.is_live and why.get(i.id)]
        for inst in live:
            deadline = time.monotonic() + CHECKPOINT_WAIT_S
            while time.monotonic() < deadline:
                try:
                    # A noticed instance's agent uploads the checkpoint after the job's exit,
                    # then says so in notice.json: the replacement fetches it from there.
                    if pull.job_ended(inst) and (
                        why[inst.id] != NOTICED or self._stored(run, inst, pull)
                    ):
                        break
                except RemoteError:
                    break  # gone or unreachable: what it stored is in the durable store
                time.sleep(0.5)
            try:
                pull.sync(inst)
            except RemoteError as exc:
                self.ledger.add_event(
                    run.id, "sync", f"last sync from {inst.id} failed: {exc.message}"
                )
        pull.durable()
        why = {r.id: str(r.details.get(DOOMED)) for r in self.ledger.instances(run.id)}
        for reason in sorted({why.get(i.id) or "spot interruption notice" for i in live}):
            self.terminate(
                [i for i in live if (why.get(i.id) or "spot interruption notice") == reason], reason
            )
        self.record_ended([i for i in described if not i.is_live])
        # A stopped or hibernated instance holds no capacity the run can use, yet its volumes
        # bill (and a persistent request would start it again): it ends now, not with the run.
        stopped = [i for i in described if i.is_stopped]
        if stopped:
            self._end_stopped(run, stopped)

    def _end_stopped(self, run: RunRecord, stopped: list[Instance]) -> None:
        """Terminate stopped instances of the run; their compute billing ended at the stop
        (recorded then), their volumes' ends now."""
        known = {r.id: r for r in self.ledger.instances(run.id)}
        for inst in self.provider.terminate_instances(self.run_id, [i.id for i in stopped]):
            prior = known.get(inst.id)
            at = (prior.terminated_at if prior else None) or inst.ended_at or time.time()
            why = f"{prior.end_reason if prior and prior.end_reason else 'stopped'}; terminated"
            self.ledger.upsert_instance(self._record(inst, terminated_at=at, end_reason=why))
        self.ledger.add_event(
            run.id,
            "spot",
            f"terminated {', '.join(i.id for i in stopped)}: stopped, and a stopped "
            "instance's volumes bill until it is terminated",
        )

    def _stored(self, run: RunRecord, inst: Instance, pull: Reach) -> bool:
        """Whether the noticed instance's agent has finished its upload (pulls notice.json)."""
        pull.sync(inst)
        notice = read_notice(run.run_dir)
        return notice is not None and notice.instance_id == inst.id and notice.stored

    def restore(
        self, run: RunRecord, head: Instance, runner: Runner, remote_dir: str
    ) -> int | None:
        """Put the newest complete checkpoint on `head` (fetched there from the durable store
        when it holds one at least as new as this machine's; pushed from here otherwise) with
        the run's log and metrics; returns the step it resumes from, or None when there is
        nothing to resume."""
        (run.run_dir / EXIT_FILE).unlink(missing_ok=True)  # the last job's; a new one comes
        found = newest_complete_checkpoint(run.run_dir)
        # The durable store first, when it holds one at least as new as ours: the replacement
        # downloads it in the region instead of this machine uploading it.
        fetched = self._fetch_on(run, head, runner, remote_dir, found[1] if found else 0)
        if fetched is not None:
            return fetched
        if found is None:
            if run.spec.job is None:  # your own command's checkpoint dir is restored whole
                self.ledger.add_event(
                    run.id, "resume", f"no complete spotrun checkpoint to restore onto {head.id}"
                )
            return None
        checkpoint, step = found
        truncate_metrics(run.run_dir / METRICS_FILE, step)
        runner.run(f"mkdir -p {shlex.quote(remote_dir)}/{CHECKPOINTS_DIR}", timeout_s=60).check(
            "making the run folder on the replacement"
        )
        runner.put(checkpoint, f"{remote_dir}/{CHECKPOINTS_DIR}/{checkpoint.name}")
        self._push_run_files(run, runner, remote_dir)
        self.ledger.add_event(
            run.id, "resume", f"restored {checkpoint.name} (step {step}) onto {head.id}"
        )
        return step

    def _fetch_on(
        self, run: RunRecord, head: Instance, runner: Runner, remote_dir: str, at_least: int
    ) -> int | None:
        """Have the replacement fetch the newest whole checkpoint of step `at_least` or later
        from the durable store itself; its step, or None (then it is pushed from here)."""
        fetch = getattr(self.provider, "fetch_checkpoint", None)
        if fetch is None or run.spec.job is not None:  # your own command: restored whole
            return None
        fetched = fetch(head, runner, remote_dir, at_least)
        if fetched is None:
            return None
        for name in fetched.incomplete:
            self.ledger.add_event(
                run.id, "resume", f"stored {name} is incomplete; looking at the one before it"
            )
        if fetched.name is None or fetched.step is None:
            return None
        truncate_metrics(run.run_dir / METRICS_FILE, fetched.step)
        self._push_run_files(run, runner, remote_dir)
        self.ledger.add_event(
            run.id,
            "resume",
            f"restored {fetched.name} (step {fetched.step}) onto {head.id} "
            "from the durable store (fetched there)",
        )
        return int(fetched.step)

    def _push_run_files(self, run: RunRecord, runner: Runner, remote_dir: str) -> None:
        """The run's recipe, metrics and log, so the resumed trainer appends to them."""
        for name in (RECIPE_FILE, METRICS_FILE, JOB_LOG_FILE):
            path = run.run_dir / name
            if path.exists():
                runner.put(path, f"{remote_dir}/{name}")
        self._mark_synced(run, runner, remote_dir)

    def _mark_synced(self, run: RunRecord, runner: Runner, remote_dir: str) -> None:
        """Tell the incremental sync that the pushed files are what we have (not new)."""
        from spotrun.remote.sync import list_remote

        listing = list_remote(runner, remote_dir) or []
        path = run.run_dir / SYNC_STATE_FILE
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            state = {}
        for item in listing:
            local = run.run_dir / item.path
            if local.exists() and local.stat().st_size == item.size:
                state[item.path] = [item.size, item.mtime]
        path.write_text(json.dumps(state, sort_keys=True))

    # ------------------------------------------------------------- watcher
    def deadline(self, run: RunRecord, offer_usd_per_hour: float | None) -> float | None:
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
            spent = self.ledger.run_cost_exact(run.id)
            verdict = budget.decide(now, spent, Fraction(cap), live, budget.StopMargin())
            if verdict.stop_at is not None:
                ends.append(float(verdict.stop_at))
        return min(ends) if ends else None

    def start_watcher(
        self, run: RunRecord, head: Instance, runner: Runner, *, judge_progress: bool = True
    ) -> None:
        """Start the agent's watcher on `head` unless it runs already (idempotent).

        judge_progress=False: this node's files are no sign of the job's progress (a cluster's
        other nodes; node 0 judges, and when it ends the job the others' jobs end too)."""
        aws = self.settings.aws
        remote_dir = self.provider.run_dir(head, run.id)
        argv = [
            *self.provider.spotrun_command(head)[:1],
            "-m",
            "spotrun.agent.watcher",
            "--run-dir",
            remote_dir,
            "--run-id",
            run.id,
            "--poll",
            str(aws.notice_poll_s),
            "--no-progress",
            str(aws.no_progress_s if judge_progress else 0.0),
            "--end-grace",
            str(aws.end_grace_s),
            "--region",
            head.region,
        ]
        if aws.bucket:
            argv += ["--bucket", aws.bucket]
        planned = run.plan.offer_of(head.instance_type, head.zone) if run.plan else None
        deadline = self.deadline(run, planned.spot_usd_per_hour if planned else None)
        if deadline is not None:
            argv += ["--deadline", f"{deadline:.0f}"]
        folder = shlex.quote(remote_dir)
        command = (
            f"mkdir -p {folder} && cd {folder} && "
            f"{{ test -f {WATCHER_PID_FILE} && kill -0 $(cat {WATCHER_PID_FILE}) 2>/dev/null || "
            f"{{ setsid nohup {shlex.join(argv)} >> {WATCHER_LOG_FILE} 2>&1 < /dev/null & "
            f"echo $! > {WATCHER_PID_FILE}; }}; }}"
        )
        runner.run(command, timeout_s=60).check("starting the agent's watcher")
