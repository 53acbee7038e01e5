"""One spot fault scenario in the lab (spot.py holds the scenarios themselves): digits-fast
launched on the lab's EC2 with the real CLI, the faults it injects (notices through the host's
IMDS, reclaims, damaged checkpoints, dropped SSH, killed supervisors), and its Outcome.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spotlab import Lab
from spotlab.harness import REPO, Env, wait_for
from spotlab.probes import children, cmdline, link_target, lost_steps
from spotrun.core.config import load_settings
from spotrun.core.locks import process_running
from spotrun.drive.home import running_pid as home_controller_pid
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
        host = self.lab.hosts.wait_for(instance_id, 60)  # EC2 says running before its host is up
        return host.path(f"/root/.spotrun/runs/{self.run_id}")

    def host_job_log(self, instance_id: str) -> str:
        """job.log as the instance itself wrote it (kept after its host ended): what it did
        after the last sync too."""
        path = self.lab.hosts.of(instance_id).path(f"/root/.spotrun/runs/{self.run_id}/job.log")
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
        host = self.lab.hosts.of(instance_id)
        proc = getattr(host, "_proc", None)
        if proc is None:
            return
        found = []
        todo = [proc.pid]
        while todo:
            pid = todo.pop()
            todo += children(pid)
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
                f"{fd.parts[2]} {cmdline(int(fd.parts[2]))}"
                for fd in Path("/proc").glob("[0-9]*/fd/*")
                if link_target(fd) == lock
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
        self.lab.interruptions.interrupt(instance_id, notice_s=notice_s, action=action)

    def ec2_state(self, instance_id: str) -> str:
        (item,) = [i for i in self.lab.instances(self.run_id) if i["InstanceId"] == instance_id]
        return str(item["State"]["Name"])

    def stop_before_replacing(self, instance_id: str, action: str) -> None:
        """A notice that stops or hibernates the instance; the replacement's RunInstances
        waits until EC2 has done so, so that spotrun meets the instance stopped, not running."""
        held = self.lab.faults.hold("RunInstances")
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
        self.lab.interruptions.reclaim(instance_id)

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
        host = self.lab.hosts.of(instance_id)
        proc = getattr(host, "_proc", None)
        if proc is None:
            return []
        return [
            pid
            for listener in children(proc.pid)
            for pid in children(listener)
            if cmdline(pid).startswith("sshd:") and (not established or "@" in cmdline(pid))
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
        # Dead, and its locks released: a command that looks sooner would still see it alive.
        # The process first (killed before it took the run's lock, the run's lock alone is free
        # at once while the process still holds the home's), then the locks (its main thread
        # turns zombie before the others have let go of its files, the locks among them).
        with self.ledger() as ledger:
            run = ledger.get_run(self.run_id)
        settings = load_settings(self.env.home)
        wait_for(
            lambda: (
                not process_running(pid)
                and not is_supervised(run)
                and home_controller_pid(settings) != pid
            ),
            30,
            f"supervisor {pid} to die",
            interval=0.02,
        )
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
