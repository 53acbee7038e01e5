"""Starting a run's job on its instance: what it runs, with which environment, in tmux.

A recipe runs spotrun's trainer (`spotrun train`); your own command (issue 9) has its workdir
and setup pushed first (spotrun.remote.jobprep). On a replacement instance the replaced ones'
checkpoints are collected and the newest whole one restored before the job starts, and the
agent's watcher is started beside it (spotrun.control.watcher_start). The GPUs torch sees must
be the instance type's (spotrun.control.gpu_check). Data on a snapshot or a
cache volume is attached first (spotrun.control.data_volumes). Every step can run again: the
job is not started twice (its tmux session is the run's).
"""

from __future__ import annotations

from spotrun.agent.session import session_name
from spotrun.cloud.base import Instance, Provider
from spotrun.cloud.capabilities import SetsJobEnvironment
from spotrun.cloud.plan import planned_gpus
from spotrun.control.checkpoint_restore import CheckpointRestore
from spotrun.control.cluster import ClusterSpec
from spotrun.control.data_volumes import attach_data_cache, attach_snapshot_data
from spotrun.control.gpu_check import GpuCheck
from spotrun.control.recovery import Recovery
from spotrun.control.run_sync import RunSync
from spotrun.control.threads import threads_env
from spotrun.control.watcher_start import start_watcher
from spotrun.core.node_order import node_address
from spotrun.core.rundir import RUN_DIR_VAR, RUN_ID_VAR
from spotrun.remote.job import JobDriver
from spotrun.remote.jobprep import prepare_job, restore_checkpoints
from spotrun.remote.runner import Runner
from spotrun.store.ledger import Ledger, RunRecord

# Training processes on CPU spend much of their time in glibc handing large buffers back to
# the OS and asking for them again; these settings keep them (measured: 29 s -> 16 s/epoch).
TRAINING_ENV = {
    "GLIBC_TUNABLES": "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184",
    "PYTHONUNBUFFERED": "1",
}

NodeJob = tuple[list[str], dict[str, str], list[str]]  # argv, environment, wrapper options


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


class JobStart:
    """The run's job on an instance: started, driven (status, stop) through its JobDriver."""

    def __init__(
        self,
        ledger: Ledger,
        provider: Provider,
        run_id: str,
        *,
        recovery: Recovery,
        restore: CheckpointRestore,
        sync: RunSync,
    ) -> None:
        self.ledger = ledger
        self.provider = provider
        self.run_id = run_id
        self.session = session_name(run_id)  # the tmux session the job runs in
        self.recovery = recovery
        self.restore = restore
        self.sync = sync
        self.gpus = GpuCheck(ledger, provider, recovery.instances)

    def driver(self, instance: Instance) -> JobDriver:
        return JobDriver(
            self.provider.runner(instance),
            self.provider.spotrun_command(instance),
            self.provider.run_dir(instance, self.run_id),
            self.session,
        )

    def job_ended(self, instance: Instance) -> bool:
        """Whether the job on `instance` has written its exit record."""
        return self.driver(instance).status().finished

    def start(self, run: RunRecord, head: Instance) -> bool:
        """Bootstrap `head` and start the job there; whether it was started now (False: it
        was already running)."""
        runner = self.provider.runner(head)
        self.provider.bootstrap(head, runner)
        remote_dir = self.provider.run_dir(head, run.id)
        self.prepare_replacement(run, head, runner)  # spot recovery
        self.restore_checkpoints(run, head)
        self.gpus.check(run, head)  # after the collect: a doomed instance's time is short
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
        return self.driver(head).start(argv, env, wrap)

    def node_job(self, run: RunRecord, inst: Instance, spec: ClusterSpec, rank: int) -> NodeJob:
        """argv, environment and wrapper options of node `rank` of a multi-node run."""
        self.gpus.check(run, inst)
        remote_dir = self.provider.run_dir(inst, run.id)
        spotrun = self.provider.spotrun_command(inst)
        if run.spec.job is None:  # a recipe: `spotrun train` in every torchrun process
            env = recipe_env(run, remote_dir)
            program = job_argv(run, ["-m", "spotrun"], remote_dir)
            return spec.torchrun_argv(spotrun[0], rank, program), env, []
        argv, env, wrap = self._prepare_own_job(run, inst)
        env.update(
            {
                "MASTER_ADDR": node_address(spec.head),
                "MASTER_PORT": str(spec.port),
                "NODE_RANK": str(rank),
                "NNODES": str(len(spec.nodes)),
            }
        )
        return argv, env, wrap

    def _prepare_own_job(self, run: RunRecord, head: Instance) -> NodeJob:
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

    def restore_checkpoints(self, run: RunRecord, head: Instance) -> None:
        """A replacement instance starts with the run's checkpoints (SPOTRUN_CHECKPOINT_DIR)."""
        if self.provider.shares_filesystem:
            return
        sent = restore_checkpoints(
            self.provider.runner(head), run.run_dir, self.provider.run_dir(head, run.id)
        )
        if sent:
            self.ledger.add_event(
                run.id, "sync", f"{sent} checkpoint file(s) restored on {head.id}"
            )

    def prepare_replacement(self, run: RunRecord, head: Instance, runner: Runner) -> None:
        """Before the job starts: on a replacement, collect the replaced instances'
        checkpoints and restore the newest complete one here; start the agent's watcher."""
        if self.provider.shares_filesystem:
            return
        if not self.driver(head).status().alive:
            replaced = [r for r in self.ledger.instances(run.id) if r.id != head.id]
            if replaced:
                self.recovery.collect(run, self.sync.access(run, self.job_ended))
                remote_dir = self.provider.run_dir(head, run.id)
                self.restore.restore(run, head, runner, remote_dir)
        start_watcher(self.ledger, self.provider, run, head, runner)
