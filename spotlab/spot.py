"""Spot fault scenarios in the lab, shared by tests/e2e/test_spot_recovery.py (which asserts
on them) and bench/interruption_recovery.py (which prints their matrix and timings).

A scenario launches digits-fast on the lab's EC2 with the real CLI, injects its faults while the
run goes on (spot notices through the host's IMDS, reclaims, damaged checkpoints, EC2 errors,
dropped SSH connections, supervisors killed), waits for the end and measures the outcome.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from spotlab import Lab
from spotlab.harness import REPO, Env, wait_for
from spotrun.core.config import load_settings
from spotrun.core.locks import process_running
from spotrun.drive.supervisor import is_supervised
from spotrun.store.ledger import Ledger

EPOCHS = 8
# A wider net than the recipe's (0.7 s an epoch here, not 0.3 s): a fault meant for the middle
# of training must still find it going after the lag of a sync or a notice poll.
OVERRIDES = [f"epochs={EPOCHS}", "threads=1", "model_options.width=64"]
COMPARED = ("step", "epoch", "train_loss", "test_loss", "test_acc", "lr")
# [aws] settings for the scenarios: the agent asks IMDS every 0.5 s (EC2: at most 5 s),
# a silent instance is replaced after 4 s (default 60 s).
FAST = {"notice_poll_s": 0.5, "unreachable_s": 4.0, "end_grace_s": 600.0}
NOTICE_S = 8.0  # notice to reclaim in the lab (EC2 gives 120 s)
END_GRACE_S = 3.0  # job's end to the agent ending its instance, when no controller collects it
# An SSH wait longer than any of a scenario's own waits (240 s): a run that waited it out
# instead of asking EC2 meanwhile fails the scenario whatever the machine's load.
LONG_SSH_TIMEOUT = {"ssh_timeout_s": 600.0}


def reference_metrics(work: Path) -> dict[str, Any]:
    """The uninterrupted run's final metrics (same recipe and overrides, this machine)."""
    args = [sys.executable, "-m", "spotrun", "train", "digits-fast", "--run-dir", str(work)]
    for item in OVERRIDES:
        args += ["--set", item]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run(args, check=True, capture_output=True, env=env, cwd=REPO, timeout=600)
    return final_metrics(work / "metrics.jsonl")


def final_metrics(path: Path) -> dict[str, Any]:
    last = json.loads(path.read_text().splitlines()[-1])
    return {k: last[k] for k in COMPARED}


@dataclass
class Outcome:
    scenario: str
    state: str = "?"
    message: str = ""
    metrics_equal: bool = False
    evaluations_once: bool = False
    instances: int = 0
    left_running: int = -1
    in_ledger_and_cost: bool = False
    lost_steps: list[int] = field(default_factory=list)
    to_request_s: list[float] = field(default_factory=list)  # fault -> replacement requested
    to_resumed_s: list[float] = field(default_factory=list)  # fault -> job running again
    events: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    restored_from: list[str] = field(default_factory=list)  # per resume: "s3" or "sftp"
    log: str = ""  # the run's job.log, every instance's part

    def __str__(self) -> str:
        head = {k: v for k, v in self.__dict__.items() if k not in ("events", "log")}
        log = [x for x in self.log.splitlines() if not x.startswith("epoch ")]
        return (
            f"{head}\nevents:\n  "
            + "\n  ".join(self.events)
            + "\njob.log (evaluation lines left out):\n  "
            + "\n  ".join(log[-20:])
        )

    @property
    def ok(self) -> bool:
        return (
            self.state == "succeeded"
            and self.metrics_equal
            and self.evaluations_once
            and self.left_running == 0
            and self.in_ledger_and_cost
        )


class Scenario:
    """One run in the lab, driven through the real CLI, with faults injected by `steps`."""

    def __init__(self, name: str, env: Env, lab: Lab) -> None:
        self.name = name
        self.env = env
        self.lab = lab
        self.run_id = ""
        self.fault_times: list[float] = []
        self.steps_at_fault: list[int] = []  # the newest step synced here when each came
        # the newest checkpoint's step kept anywhere but the instance (here, or the durable
        # store) when each fault came: a resume must start there or later
        self.stored_at_fault: list[int] = []
        self.states_at_fault: list[str] = []  # the run's state in the ledger when each came
        # instance id -> the environments of the processes on its host (taken mid-training)
        self.host_environments: dict[str, list[dict[str, str]]] = {}
        self.started = time.monotonic()
        self.acts: list[str] = []  # what the scenario did, when: shown when a wait times out
        self.ended_mid_run: list[str] = []  # stopped instances spotrun terminated mid-run
        self.drops = 0  # times every SSH connection to the instance was cut

    # ---------------------------------------------------------------- look
    def ledger(self) -> Ledger:
        return Ledger(load_settings(self.env.home))

    def state(self) -> str:
        with self.ledger() as ledger:
            return ledger.get_run(self.run_id).state.value

    @property
    def run_dir(self) -> Path:
        return self.env.home / "runs" / self.run_id

    def epoch(self) -> int:
        return int(self._last_metrics().get("epoch", 0))

    def _last_metrics(self, run_dir: Path | None = None) -> dict[str, Any]:
        try:
            lines = ((run_dir or self.run_dir) / "metrics.jsonl").read_text().splitlines()
            return dict(json.loads(lines[-1])) if lines else {}
        except (FileNotFoundError, ValueError, IndexError):
            return {}

    def host_run_dir(self, instance_id: str) -> Path:
        """The run folder on the instance itself (what has not been synced here yet too)."""
        host = self.lab.wait_for_host(instance_id, 60)  # EC2 says running before its host is up
        return host.path(f"/root/.spotrun/runs/{self.run_id}")

    def host_job_log(self, instance_id: str) -> str:
        """job.log as the instance itself wrote it (kept after its host ended): what it did
        after the last sync too."""
        path = self.lab.host(instance_id).path(f"/root/.spotrun/runs/{self.run_id}/job.log")
        return path.read_text() if path.exists() else ""

    def wait_host_epoch(self, instance_id: str, epoch: int) -> None:
        """Epoch `epoch` evaluated on the instance: no sync lag, so a fault lands right there."""
        run_dir = self.host_run_dir(instance_id)
        self._wait(
            lambda: int(self._last_metrics(run_dir).get("epoch", 0)) >= epoch,
            240,
            f"epoch {epoch} on {instance_id}",
        )
        self.record_host_environments(instance_id)  # the job is running there now

    def wait_host_resumed(self, instance_id: str) -> int:
        """The trainer on the instance has resumed from a checkpoint; the first epoch it will
        evaluate there (the log names the epochs already complete)."""
        log = self.host_run_dir(instance_id) / "job.log"

        def resumed() -> int | None:
            try:
                lines = log.read_text().splitlines()
            except FileNotFoundError:
                return None
            found = [x for x in lines if x.startswith("resumed at epoch")]
            return int(found[-1].split()[3]) + 1 if found else None

        return int(self._wait(resumed, 240, f"the trainer on {instance_id} to resume"))

    def _act(self, what: str) -> None:
        self.acts.append(f"{time.monotonic() - self.started:7.2f}s {what}")

    def _fault(self) -> None:
        step = int(self._last_metrics().get("step", 0))
        state = self.state()
        stored = self.newest_stored_step()
        self._act(f"fault at synced step {step} (stored {stored}), run {state}")
        self.fault_times.append(time.time())
        self.steps_at_fault.append(step)
        self.states_at_fault.append(state)
        self.stored_at_fault.append(stored)

    def newest_stored_step(self) -> int:
        """The step of the newest checkpoint here or in the durable store (0: none)."""
        names = [p.name for p in (self.run_dir / "checkpoints").glob("ckpt-*.pt")]
        if self.lab.bucket and self.run_id:
            prefix = f"runs/{self.run_id}/checkpoints/"
            listed = self.lab.s3.list_objects_v2(Bucket=self.lab.bucket, Prefix=prefix)
            names += [o["Key"][len(prefix) :] for o in listed.get("Contents", [])]
        steps = [int(n[5:14]) for n in names if n.startswith("ckpt-") and n.endswith(".pt")]
        return max(steps, default=0)

    def record_host_environments(self, instance_id: str) -> None:
        """What every process on the instance has in its environment (the job's included)."""
        host = self.lab.host(instance_id)
        proc = getattr(host, "_proc", None)
        if proc is None:
            return
        found = []
        todo = [proc.pid]
        while todo:
            pid = todo.pop()
            todo += _children(pid)
            try:
                raw = Path(f"/proc/{pid}/environ").read_bytes()
            except OSError:
                continue
            pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
            found.append({k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs})
        self.host_environments[instance_id] = found

    def live_instance(self, other_than: str | None = None) -> str:
        def one() -> str | None:
            live = self.lab.instances(self.run_id, states=("running",))
            ids = [i["InstanceId"] for i in live if i["InstanceId"] != other_than]
            return ids[0] if len(ids) == 1 else None

        return str(wait_for(one, 120, "one running instance"))

    def events(self) -> list[str]:
        with self.ledger() as ledger:
            return [f"{e.kind}: {e.message}" for e in ledger.events(self.run_id)]

    # ----------------------------------------------------------------- act
    def launch(self) -> str:
        args = ["launch", "digits-fast", "--cloud", "aws", "-d"]
        for item in OVERRIDES:
            args += ["--set", item]
        self.run_id = self.env.cli(*args, check=True).stdout.strip()
        return self.run_id

    def wait_epoch(self, epoch: int) -> None:
        wait_for(
            lambda: self.epoch() >= epoch or self.state() in ("succeeded", "failed"),
            240,
            f"epoch {epoch} synced",
            interval=0.05,
        )
        if self.state() != "running":
            raise AssertionError(f"{self.name}: run {self.state()}: {self.events()}")

    def wait_running_on_new(self, old: str) -> str:
        """The job is running again, on an instance other than `old`."""
        self._wait(
            lambda: self.state() == "running" and self._running_on() not in (None, old),
            240,
            "the job to run on the replacement",
        )
        return str(self._running_on())

    def _wait(self, predicate: Callable[[], Any], timeout: float, what: str) -> Any:
        """wait_for, and on a timeout say where the run stood (its state and events)."""
        try:
            return wait_for(predicate, timeout, what)
        except AssertionError as exc:
            shown = "\n  ".join(self.events())
            raise AssertionError(
                f"{exc}; run {self.state()}; events:\n  {shown}\n{self._supervisor_stacks()}"
                + "\nscenario:\n  "
                + "\n  ".join(self.acts)
            ) from None

    def _supervisor_stacks(self) -> str:
        """Where the run's supervisor is, if it lives (it dumps its stacks on SIGUSR2)."""
        pid = self.supervisor_pid()
        if pid is None or not process_running(pid):
            lock = str(self.run_dir / "supervisor.lock")
            holders = [
                f"{fd.parts[2]} {_cmdline(int(fd.parts[2]))}"
                for fd in Path("/proc").glob("[0-9]*/fd/*")
                if _readlink(fd) == lock
            ]
            return f"supervisor {pid} is not running; supervisor.lock open in: {holders}"
        log = self.run_dir / "supervisor.log"
        if (self.env.home / "controller.log").exists():  # controller = "one": the home's log
            log = self.env.home / "controller.log"
        before = log.stat().st_size if log.exists() else 0
        os.kill(pid, signal.SIGUSR2)
        try:  # the dump's lines reaching the log, not a guess at how long they take
            wait_for(lambda: log.exists() and log.stat().st_size > before, 10, "its stacks")
        except AssertionError:
            return f"supervisor {pid} is alive; it wrote no stacks to {log.name}"
        with log.open() as fh:
            fh.seek(before)
            return f"supervisor {pid} is alive; its stacks:\n{fh.read()}"

    def _running_on(self) -> str | None:
        live = self.lab.instances(self.run_id, states=("running",))
        return live[-1]["InstanceId"] if live else None

    def notice(
        self, instance_id: str, notice_s: float = NOTICE_S, action: str | None = None
    ) -> None:
        self._fault()
        if action == "hibernate":  # EC2 gives hibernation the notice but no time before it
            notice_s = 0.0
        self.lab.interrupt(instance_id, notice_s=notice_s, action=action)

    def ec2_state(self, instance_id: str) -> str:
        (item,) = [i for i in self.lab.instances(self.run_id) if i["InstanceId"] == instance_id]
        return str(item["State"]["Name"])

    def stop_before_replacing(self, instance_id: str, action: str) -> None:
        """A notice that stops or hibernates the instance; the replacement's RunInstances
        waits until EC2 has done so, so that spotrun meets the instance stopped, not running."""
        held = self.lab.hold("RunInstances")
        self.notice(instance_id, action=action)
        self._wait(lambda: self.ec2_state(instance_id) == "stopped", 60, f"{instance_id} stopped")
        self._act(f"{instance_id} stopped by EC2 ({action})")
        held.release()

    def wait_terminated_mid_run(self, instance_id: str) -> None:
        """The stopped instance is terminated by spotrun while the run goes on (its volumes
        bill while stopped), not by the run's final teardown."""
        self._wait(
            lambda: self.ec2_state(instance_id) == "terminated", 120, f"{instance_id} terminated"
        )
        mid_run = ("requested", "provisioning", "bootstrapping", "running", "interrupted")
        if self.state() not in mid_run:
            raise AssertionError(f"{instance_id} was ended only as the run ended ({self.state()})")
        self.ended_mid_run.append(instance_id)

    def reclaim(self, instance_id: str) -> None:
        self._fault()
        self.lab.reclaim(instance_id)

    def damage_newest_checkpoint(self) -> str:
        """Cut the newest checkpoint the controller holds in half (a torn copy), and its
        stored copy and any newer one in the durable store (a torn upload)."""
        newest = sorted((self.run_dir / "checkpoints").glob("ckpt-*.pt"))[-1]
        data = newest.read_bytes()
        newest.write_bytes(data[: len(data) // 2])
        bucket = self.lab.bucket
        if bucket:
            prefix = f"runs/{self.run_id}/checkpoints/"
            listed = self.lab.s3.list_objects_v2(Bucket=bucket, Prefix=prefix)
            for obj in listed.get("Contents", []):
                if obj["Key"][len(prefix) :] >= newest.name:
                    stored = self.lab.s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
                    self.lab.s3.put_object(
                        Bucket=bucket, Key=obj["Key"], Body=stored[: len(stored) // 2]
                    )
                    self._act(f"tore the stored {obj['Key'][len(prefix) :]}")
        return newest.name

    def ssh_connections(self, instance_id: str, *, established: bool = False) -> list[int]:
        """The host's per-connection sshd processes (one per SSH connection to it);
        `established`: only those past authentication ("sshd: root@notty")."""
        host = self.lab.host(instance_id)
        proc = getattr(host, "_proc", None)
        if proc is None:
            return []
        return [
            pid
            for listener in _children(proc.pid)
            for pid in _children(listener)
            if _cmdline(pid).startswith("sshd:") and (not established or "@" in _cmdline(pid))
        ]

    def drop_ssh(self, instance_id: str) -> int:
        """Kill the host's per-connection sshd processes: every SSH connection drops."""
        dropped = 0
        for pid in self.ssh_connections(instance_id):
            try:
                os.kill(pid, signal.SIGKILL)
                dropped += 1
            except ProcessLookupError:
                continue
        return dropped

    def supervisor_pid(self) -> int | None:
        with sqlite3.connect(self.env.home / "ledger.db") as db:
            row = db.execute(
                "SELECT supervisor_pid FROM runs WHERE id = ?", (self.run_id,)
            ).fetchone()
        return int(row[0]) if row and row[0] else None

    def kill_supervisor(self) -> bool:
        pid = self.supervisor_pid()
        if pid is None:
            self._act("kill: no supervisor pid")
            return False
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            self._act(f"kill: supervisor {pid} was gone")
            return False
        self._act(f"killed supervisor {pid}")
        # Dead, and its lock released: a command that looks sooner would still see it held.
        # (Its main thread turns zombie before the others have let go of its files, the lock
        # among them, so the lock itself is what to watch.)
        with self.ledger() as ledger:
            run = ledger.get_run(self.run_id)
        wait_for(lambda: not is_supervised(run), 30, f"supervisor {pid} to die", interval=0.02)
        return True

    def reconcile(self) -> None:
        """What any spotrun command does first: restart the run's supervisor if it died."""
        from spotrun.service import runs as api

        with api.open_ledger(load_settings(self.env.home)) as ledger:
            run = ledger.get_run(self.run_id)
        self._act(f"reconciled: run {run.state.value}, supervisor {run.supervisor_pid}")

    # -------------------------------------------------------------- outcome
    def finish(self, reference: dict[str, Any], timeout: float = 300) -> Outcome:
        out = Outcome(self.name)
        wait_for(lambda: self.state() in ("succeeded", "failed", "stopped"), timeout, "the end")
        out.wall_s = time.monotonic() - self.started
        out.state = self.state()
        with self.ledger() as ledger:
            out.message = ledger.get_run(self.run_id).message or ""
        out.events = self.events()
        out.restored_from = [
            "s3" if "from the durable store" in e else "sftp"
            for e in out.events
            if e.startswith("resume: restored")
        ]
        metrics = self.run_dir / "metrics.jsonl"
        if metrics.exists():
            out.metrics_equal = final_metrics(metrics) == reference
            epochs = [json.loads(x)["epoch"] for x in metrics.read_text().splitlines()]
            out.evaluations_once = epochs == list(range(1, EPOCHS + 1))
        ec2_ids = {i["InstanceId"] for i in self.lab.instances(self.run_id)}
        out.instances = len(ec2_ids)
        # billing still: running, or stopped with its volumes
        out.left_running = len(
            self.lab.instances(self.run_id, states=("pending", "running", "stopping", "stopped"))
        )
        with self.ledger() as ledger:
            records = {r.id: r for r in ledger.instances(self.run_id)}
            priced = {
                line.instance_id
                for line in ledger.cost_lines(self.run_id)
                if line.kind == "compute"
            }
            moves = ledger.transitions(self.run_id)
        out.in_ledger_and_cost = (
            set(records) == ec2_ids
            and all(r.terminated_at is not None for r in records.values())
            and priced == ec2_ids
        )
        log = (self.run_dir / "job.log").read_text() if (self.run_dir / "job.log").exists() else ""
        out.lost_steps = lost_steps(log, self.steps_at_fault)
        out.log = log
        for fault in self.fault_times:
            after = [t for t in moves if t.at >= fault - 0.001]
            requested = next((t.at for t in after if t.to_state.value == "requested"), None)
            resumed = next((t.at for t in after if t.to_state.value == "running"), None)
            if requested is not None:
                out.to_request_s.append(requested - fault)
            if resumed is not None:
                out.to_resumed_s.append(resumed - fault)
        return out


def secrets_found(s: Scenario, secrets: list[str]) -> list[str]:
    """Where any of `secrets` was written: the files of SPOTRUN_HOME (the ledger, run folder,
    metrics, supervisor logs, keys) and of every instance of the run (home and /tmp)."""
    roots = [s.env.home]
    for item in s.lab.instances(s.run_id):
        try:
            host = s.lab.host(item["InstanceId"])
        except KeyError:
            continue
        roots += [host.home, host.tmp]
    needles = [x.encode() for x in secrets if x]
    found = []
    for root in roots:
        for path in root.rglob("*"):
            try:
                if path.is_symlink() or not path.is_file() or path.stat().st_size > 64 * 2**20:
                    continue
                data = path.read_bytes()
            except OSError:  # gone meanwhile (a lock, a temporary file)
                continue
            found += [f"{path}: {n.decode()[:12]}..." for n in needles if n in data]
    return found


def private_key_modes(home: Path) -> dict[str, int]:
    """Every private key file under SPOTRUN_HOME and its permission bits."""
    modes = {}
    for path in home.rglob("*"):
        try:
            if path.is_symlink() or not path.is_file() or path.stat().st_size > 64 * 1024:
                continue
            head = path.read_bytes()[:200]
        except OSError:
            continue
        if b"-----BEGIN" in head and b"PRIVATE KEY-----" in head:
            modes[str(path.relative_to(home))] = path.stat().st_mode & 0o777
    return modes


def resumed_steps(log: str) -> list[int]:
    """The step each resume in job.log started from ("resumed at epoch E step S")."""
    return [int(x.rsplit(" ", 1)[-1]) for x in log.splitlines() if x.startswith("resumed at epoch")]


def checkpointed_steps(log: str) -> list[int]:
    """The step of each checkpoint the trainer made on a stop ("...: checkpointing at step S")."""
    return [int(x.rsplit(" ", 1)[-1]) for x in log.splitlines() if "checkpointing at step" in x]


def lost_steps(log: str, steps_at_fault: list[int]) -> list[int]:
    """Per resume in job.log: steps trained before the stop that the resume did not keep.

    With a notice the trainer says where it checkpointed; without one, the newest step known
    here when the fault came (the last evaluation synced) is what was surely trained."""
    reached = 0
    lost = []
    for line in log.splitlines():
        if "checkpointing at step" in line:
            reached = max(reached, int(line.rsplit(" ", 1)[-1]))
        elif line.startswith("resumed at epoch"):
            n = len(lost)
            if n < len(steps_at_fault):
                reached = max(reached, steps_at_fault[n])
            # A resume past the step known at the fault (the fault came late) lost nothing.
            lost.append(max(0, reached - int(line.rsplit(" ", 1)[-1])))
    return lost


def steps_per_epoch() -> int:
    return 22  # 1,438 training images / 64 per step, the last partial step dropped (digits-fast)


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def _readlink(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def seeded_points(seed: int, count: int, low: float, high: float) -> list[float]:
    rng = random.Random(seed)
    return sorted(rng.uniform(low, high) for _ in range(count))


# ------------------------------------------------------------------ scenarios
def notice_at_two_points(s: Scenario) -> None:
    """A spot notice early in training, and another on the replacement once it has trained an
    epoch of its own."""
    s.launch()
    first = s.live_instance()
    s.wait_host_epoch(first, 1)
    s.notice(first)
    second = s.wait_running_on_new(first)
    s.wait_host_epoch(second, s.wait_host_resumed(second))
    s.notice(second)
    s.wait_running_on_new(second)


def rebalance_then_stop_and_hibernate(s: Scenario) -> None:
    """A rebalance recommendation (recorded; the run goes on where it is), then notices at two
    points of training whose instances EC2 stops and then hibernates (what it does for a
    request asking that; hibernation begins with the notice, stop two minutes after it): each
    is terminated by spotrun, and the run resumes on new capacity, after the stop from the
    notice's checkpoint. The second replacement first meets no capacity for the same offer and
    EC2 throttling on the way."""
    s.launch()
    first = s.live_instance()
    s.wait_host_epoch(first, 1)
    s.lab.announce_rebalance(first)
    s._wait(
        lambda: any("recommends rebalancing" in e for e in s.events()), 120, "the rebalance event"
    )
    s.stop_before_replacing(first, "stop")
    second = s.wait_running_on_new(first)
    s.wait_terminated_mid_run(first)
    s.wait_host_epoch(second, s.wait_host_resumed(second))
    s.lab.fail("RunInstances", "InsufficientInstanceCapacity", times=1)
    s.lab.fail("DescribeInstances", "RequestLimitExceeded", times=2)
    s.stop_before_replacing(second, "hibernate")
    s.wait_running_on_new(second)
    s.wait_terminated_mid_run(second)


def reclaim_without_notice(s: Scenario) -> None:
    """EC2 takes the instance back with no notice (the host dies mid-epoch), once a
    checkpoint has left it (synced here or stored in S3)."""
    s.launch()
    old = s.live_instance()
    s.wait_epoch(2)
    s._wait(s.newest_stored_step, 120, "a checkpoint off the instance")
    s.reclaim(old)
    s.wait_running_on_new(old)


def newest_checkpoint_damaged(s: Scenario) -> None:
    """Reclaimed with no notice, and the newest checkpoint held here is torn: the run resumes
    from the one before it."""
    s.launch()
    old = s.live_instance()
    s.wait_epoch(2)
    wait_for(
        lambda: len(list((s.run_dir / "checkpoints").glob("ckpt-*.pt"))) >= 2,
        60,
        "two checkpoints synced here",
    )
    s.reclaim(old)
    s.damage_newest_checkpoint()
    s.wait_running_on_new(old)


def capacity_error_and_throttling(s: Scenario) -> None:
    """A notice; the replacement's first offer has no capacity and EC2 throttles on the way."""
    s.launch()
    old = s.live_instance()
    s.wait_epoch(1)
    s.lab.fail("RunInstances", "InsufficientInstanceCapacity", times=1)
    s.lab.fail("DescribeInstances", "RequestLimitExceeded", times=2)
    s.notice(old)
    s.wait_running_on_new(old)


def notice_while_provisioning(s: Scenario) -> None:
    """The notice comes while the instance is still being provisioned (before any job)."""
    s.launch()
    first = s.live_instance()
    s.notice(first, notice_s=0.5)
    s.wait_running_on_new(first)


def ssh_dropped_while_syncing(s: Scenario) -> None:
    """Every SSH connection to the instance is cut, six times, while the run syncs: each time
    once spotrun has connected again. Cuts, not silence: the instance answers every new
    connection, so it is not taken for unreachable (aws.unreachable_s at its default here;
    cut on every connection for that long, it would be replaced)."""
    s.lab.write_config(s.env.home, **{**FAST, "unreachable_s": 60.0})
    s.launch()
    inst = s.live_instance()
    s.wait_epoch(1)
    dropped: set[int] = set()

    def connected_again() -> bool:
        # a connection spotrun made and uses, not one still in its handshake (cutting those
        # again and again is an instance that does not answer, which is replaced)
        new = set(s.ssh_connections(inst, established=True)) - dropped
        return bool(new) or s.state() != "running"

    for n in range(6):
        s._wait(connected_again, 120, f"spotrun to connect again ({n} dropped)")
        if s.state() != "running":
            break  # training ended first (a fast machine): the final sync met the drops
        connections = s.ssh_connections(inst)
        dropped.update(connections)
        s.drop_ssh(inst)
        s.drops += 1
        s._act(f"dropped {len(connections)} SSH connection(s)")


def supervisor_killed(s: Scenario, seed: int = 7) -> None:
    """SIGKILL the supervisor at 10 seeded random moments: 4 while launching, 3 while
    recovering from a notice that comes in the first instance's training (always: it is sent
    once the instance has evaluated an epoch, and the job needs several more), 3 while the
    replacement trains; after each, what any spotrun command does first: notice the dead
    supervisor and start another."""
    rng = random.Random(seed)

    def kill_and_reconcile(times: int) -> None:
        for _ in range(times):
            time.sleep(rng.uniform(0.1, 1.5))  # a random moment to kill at (the fault itself)
            s.kill_supervisor()
            s.reconcile()

    s.launch()
    kill_and_reconcile(4)
    old = s.live_instance()
    s.wait_host_epoch(old, 1)
    s.notice(old)
    kill_and_reconcile(3)
    s.wait_running_on_new(old)
    kill_and_reconcile(3)


def _stored(s: Scenario, key: str) -> dict[str, Any] | None:
    """A JSON file the run's agent stored in the lab's S3 (runs/RUN/KEY), if there."""
    try:
        body = s.lab.s3.get_object(Bucket=s.lab.bucket, Key=f"runs/{s.run_id}/{key}")["Body"]
    except s.lab.s3.exceptions.NoSuchKey:
        return None
    return dict(json.loads(body.read()))


def controller_away(s: Scenario) -> None:
    """No controller while the job trains, is interrupted and ends: the supervisor is killed and
    nothing restarts it (the laptop closed) while the job goes on for epochs, a spot notice
    comes and EC2 takes the instance (the agent stores the notice's checkpoint in S3); a
    command then starts a supervisor, which replaces the instance and resumes from S3. It is
    killed again once the job runs there: the job ends with nobody collecting it, and the
    instance's agent terminates the instance after aws.end_grace_s; the next command's
    supervisor finds the agent's record in S3 and finishes the run from what is stored."""
    # The grace after the job's end, scaled down (default 300 s); the rest as every scenario.
    s.lab.write_config(s.env.home, **{**FAST, "end_grace_s": END_GRACE_S})
    s.launch()
    first = s.live_instance()
    s.wait_host_epoch(first, 1)
    s.kill_supervisor()
    s.wait_host_epoch(first, 3)  # trains on with no controller anywhere
    s.notice(first)
    s._wait(
        lambda: not s.lab.instances(s.run_id, states=("pending", "running")),
        120,
        f"EC2 to reclaim {first} while no controller runs",
    )
    stored = _stored(s, f"instances/{first}/notice.json")
    if not stored or not stored.get("checkpointed") or stored.get("stored_at") is None:
        raise AssertionError(f"the agent stored no checkpointed notice: {stored}")
    with s.ledger() as ledger:
        if is_supervised(ledger.get_run(s.run_id)):
            raise AssertionError("a supervisor came back before any command ran")
    s._act("reclaimed while away; the notice's checkpoint is in S3")
    s.reconcile()  # a command: the supervisor comes back and picks the run up
    second = s.wait_running_on_new(first)
    s.wait_host_resumed(second)
    s.kill_supervisor()  # away again, until after the job's end
    s._wait(
        lambda: _stored(s, f"instances/{second}/self-terminated.json"),
        240,
        f"the agent of {second} to end it after the job ended",
    )
    s._wait(
        lambda: not s.lab.instances(s.run_id, states=("pending", "running")),
        60,
        f"{second} terminated by its agent",
    )
    s._act("the agent ended the instance while away")
    s.reconcile()


def notice_while_booting(s: Scenario) -> None:
    """The notice comes while the instance boots: EC2 says running, its SSH does not answer
    yet (no agent is there to see the notice), and EC2 takes it back."""
    s.lab.write_config(s.env.home, **{**FAST, **LONG_SSH_TIMEOUT})
    usual, s.lab.boot_s = s.lab.boot_s, 6.0  # from "running" in EC2 to SSH answering
    s.launch()
    first = s.live_instance()
    s._wait(lambda: s.state() == "provisioning", 60, "spotrun waiting for SSH")
    if first in s.lab.hosts:
        raise AssertionError(f"{first} booted before its notice")
    s.notice(first, notice_s=0.5)
    s._wait(lambda: not s.lab.instances(s.run_id, states=("running",)), 60, f"{first} reclaimed")
    s.lab.boot_s = usual  # the replacement boots as the lab's instances do
    s.wait_running_on_new(first)


def notice_while_request_open(s: Scenario) -> None:
    """The notice comes while spotrun's RunInstances call is open: EC2 has made the instance,
    spotrun has not heard of it yet, and EC2 takes it back before the answer arrives."""
    s.lab.write_config(s.env.home, **{**FAST, **LONG_SSH_TIMEOUT})
    held = s.lab.hold("RunInstances", forwarded=True)
    s.launch()
    s._wait(partial(held.wait_arrived, 0.1), 120, "spotrun's RunInstances call")
    (first,) = s._wait(
        lambda: [i["InstanceId"] for i in s.lab.instances(s.run_id)], 60, "EC2 to make it"
    )
    s.lab.wait_for_host(first, 60)
    s.notice(first, notice_s=0.5)
    s._wait(lambda: s.lab.instances(s.run_id, states=("terminated",)), 60, f"{first} reclaimed")
    held.release()
    s.wait_running_on_new(first)


def notice_while_syncing(s: Scenario) -> None:
    """The job has ended and the run is syncing its results when the notice comes: EC2 takes
    the instance back before the final pull reaches it (that pull fails; the durable store
    has what the agent uploaded)."""
    s.launch()
    inst = s.live_instance()
    s.wait_host_epoch(inst, EPOCHS - 1)
    # The final sync begins by asking EC2 for the run's live instances: EC2 answers "running"
    # and the answer is held while the notice comes and the instance is reclaimed.
    held = s.lab.hold("DescribeInstances", forwarded=True)
    while True:
        s._wait(partial(held.wait_arrived, 0.1), 120, "a DescribeInstances call")
        if s.state() == "syncing":
            break
        earlier, held = held, s.lab.hold("DescribeInstances", forwarded=True)
        earlier.release()  # a call made while still running: let it go, hold the next
    s.notice(inst, notice_s=0.2)
    s._wait(lambda: not s.lab.instances(s.run_id, states=("running",)), 60, f"{inst} reclaimed")
    held.release()


def notice_while_terminating(s: Scenario) -> None:
    """The job has ended and the run is tearing down: the notice comes while spotrun's
    TerminateInstances call is on its way, and EC2 takes the instance back first."""
    s.launch()
    inst = s.live_instance()
    held = s.lab.hold("TerminateInstances")
    s._wait(partial(held.wait_arrived, 0.1), 240, "the run's TerminateInstances call")
    s.notice(inst, notice_s=0.2)
    s._wait(lambda: not s.lab.instances(s.run_id, states=("running",)), 60, f"{inst} reclaimed")
    held.release()


SCENARIOS: dict[str, Callable[[Scenario], None]] = {
    "rebalance; 2 notices that stop, hibernate; capacity error + throttling on 2nd": (
        rebalance_then_stop_and_hibernate
    ),
    "notice at two points of training": notice_at_two_points,
    "reclaimed without notice": reclaim_without_notice,
    "newest checkpoint damaged": newest_checkpoint_damaged,
    "capacity error + throttling on replacement": capacity_error_and_throttling,
    "notice while booting": notice_while_booting,
    "notice while provisioning": notice_while_provisioning,
    "notice while the request is open": notice_while_request_open,
    "notice while syncing": notice_while_syncing,
    "notice while terminating": notice_while_terminating,
    "SSH dropped while syncing": ssh_dropped_while_syncing,
    "supervisor SIGKILLed at 10 random points": supervisor_killed,
    "no controller through a notice and the job's end": controller_away,
}
