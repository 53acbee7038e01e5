"""Bringing a run's files home: over the runner while its instances answer, then from the
durable store (S3 on AWS) for what the runner could not reach.

Node 0's folder is the run folder; a multi-node run's other nodes sync beside it
(spotrun.control.cluster.local_dir). Nothing is pulled when the cloud shares this machine's
disk (the local cloud): the job writes the run folder itself.

A file this machine cannot write is the laptop's problem, not the instance's: the sync skips
it and the run goes on; each such file is one event, and the final sync lists them all.
"""

from __future__ import annotations

from collections.abc import Callable

from spotrun.cloud.base import Instance, Provider
from spotrun.cloud.capabilities import PullsStoredFiles
from spotrun.control import cluster
from spotrun.control.recovery import InstanceAccess
from spotrun.core.errors import LocalFileError, RemoteError
from spotrun.remote.fetch import shown_path
from spotrun.remote.job import JobDriver, JobStatus
from spotrun.remote.sync import Polled, not_home, poll_run_dir
from spotrun.store.ledger import Ledger, RunRecord


class RunSync:
    def __init__(self, ledger: Ledger, provider: Provider, *, multi_node: bool) -> None:
        self.ledger = ledger
        self.provider = provider
        self.multi_node = multi_node

    def pull(self, run: RunRecord, instance: Instance, *, final: bool = False) -> None:
        """Bring the run's files from the instance (nothing to do when it shares our disk)."""
        if not self.provider.shares_filesystem:
            self._poll(run, instance, session=None, final=final)

    def poll(self, run: RunRecord, instance: Instance, driver: JobDriver) -> JobStatus:
        """The job's status and the run's new files, asked in one command (the local cloud:
        the status alone)."""
        if self.provider.shares_filesystem:
            return driver.status()
        status = self._poll(run, instance, session=driver.session, final=False).status
        assert status is not None  # asked about its session
        return status

    def _poll(
        self, run: RunRecord, instance: Instance, *, session: str | None, final: bool
    ) -> Polled:
        local = cluster.local_dir(run.run_dir, instance.id) if self.multi_node else run.run_dir
        # the job's outputs come to the run folder, from node 0
        job = run.spec.job if local == run.run_dir else None
        polled = poll_run_dir(
            self.provider.runner(instance),
            self.provider.run_dir(instance, run.id),
            local,
            session=session,
            final=final,
            outputs=job.outputs if job is not None else None,
        )
        for _, why in polled.synced.unsaved:
            self.ledger.add_event(run.id, "sync", f"{why}; skipped, the run goes on")
        return polled

    def final(self, run: RunRecord, live: list[Instance]) -> None:
        """The last pull before teardown: over the runner, then from the durable store.

        When the instance cannot be reached any more, what its uploader stored (S3 on AWS)
        is what the run keeps; the store also fills in anything the last pull missed.
        """
        for inst in live[:1]:
            try:
                self.pull(run, inst, final=True)
            except (RemoteError, LocalFileError) as exc:  # LocalFileError: a damaged pin here
                self.ledger.add_event(run.id, "sync", f"final sync failed: {exc.message}")
        for inst in live[1:]:  # a multi-node run's other nodes: their logs, best effort
            try:
                self.pull(run, inst)
            except RemoteError as exc:
                self.ledger.add_event(run.id, "sync", f"last sync of {inst.id}: {exc.message}")
        self.durable(run)
        folders = [run.run_dir]
        if self.multi_node:
            folders += [cluster.local_dir(run.run_dir, inst.id) for inst in live[1:]]
        missing = [path for folder in folders for path in sorted(not_home(folder))]
        if missing:
            more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
            self.ledger.add_event(
                run.id,
                "sync",
                f"{len(missing)} file(s) could not come home (`spotrun status` lists why): "
                + ", ".join(shown_path(path) for path in missing[:10])
                + more,
            )

    def durable(self, run: RunRecord) -> None:
        """What the durable store holds that the run folder lacks."""
        if isinstance(self.provider, PullsStoredFiles):
            fetched = self.provider.pull_durable(run.id, run.run_dir)
            if fetched:
                self.ledger.add_event(
                    run.id, "sync", f"{len(fetched)} file(s) from the durable store"
                )

    def access(self, run: RunRecord, job_ended: Callable[[Instance], bool]) -> InstanceAccess:
        """How recovery reaches a replaced instance: its job's end, an SSH sync, the store."""
        return InstanceAccess(
            job_ended=job_ended,
            sync=lambda inst: self.pull(run, inst),
            durable=lambda: self.durable(run),
        )
