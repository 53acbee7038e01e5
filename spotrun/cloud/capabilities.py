"""What some clouds can do beyond the Provider protocol, declared once.

Every provider implements spotrun.cloud.base.Provider. The capabilities below belong to some
clouds only (AWS has them all; the local cloud none): a caller asks `isinstance(provider,
ChecksLaunches)` and gets a typed object, instead of probing for a method by its name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

from spotrun.cloud.base import Instance, Offer
from spotrun.cloud.ssh_host import SshHost
from spotrun.core.config import Resources
from spotrun.datasets.placement import TypeStorage
from spotrun.remote.runner import Runner


@runtime_checkable
class ChecksLaunches(Protocol):
    """A cloud that can tell before anything exists whether a launch will work."""

    def preflight(self, resources: Resources) -> None:
        """What a launch needs (its image, its bucket, ...): UsageError when missing."""
        ...

    def check_cluster_quota(self, offer: Offer, nodes: int) -> None:
        """Whether the account's quota holds `nodes` instances of `offer` at once."""
        ...

    def dry_run(self, offer: Offer) -> list[str]:
        """Ask the cloud whether these credentials may launch; the operations that passed."""
        ...


@runtime_checkable
class NamesItsPrices(Protocol):
    """A cloud whose offers say where their on-demand prices came from."""

    @property
    def on_demand_source(self) -> str: ...


@runtime_checkable
class ReachableOverSsh(Protocol):
    """A cloud whose instances the user's own ssh reaches (`spotrun ssh`)."""

    def live_ssh_host(self, run_id: str, node: int | None = None) -> SshHost:
        """The key, pinned host key and address of a live run's node."""
        ...


@runtime_checkable
class AttachesOverSsh(Protocol):
    """A cloud whose runs' tmux sessions are on another machine (`spotrun attach`)."""

    def attach_command(self, run_id: str, node: int | None = None) -> list[str]:
        """The user's ssh into the run's tmux session on that node."""
        ...


@runtime_checkable
class PullsStoredFiles(Protocol):
    """A cloud with a durable store of the runs' files (S3): what an instance uploaded comes
    back even when the instance is gone."""

    def pull_durable(self, run_id: str, local_dir: Path) -> list[str]:
        """The run's stored files that `local_dir` lacks (or that reach further), fetched."""
        ...


@runtime_checkable
class UploadsCheckpoints(Protocol):
    """A cloud whose instances keep a run's checkpoints in the durable store as they come."""

    def start_uploader(self, instance: Instance, runner: Runner) -> None:
        """Start the uploader of `instance.run_id`'s files on the instance (idempotent)."""
        ...


@runtime_checkable
class SetsJobEnvironment(Protocol):
    """A provider that adds to a job's environment (a packed sweep trial: its GPUs)."""

    def job_env(self, instance: Instance) -> dict[str, str]: ...


class FetchedCheckpoint(Protocol):
    """What a replacement fetched from the durable store by itself."""

    @property
    def name(self) -> str | None:
        """The checkpoint's file name (None: nothing stored was new enough and whole)."""
        ...

    @property
    def step(self) -> int | None: ...

    @property
    def incomplete(self) -> list[str]:
        """The stored checkpoints it found incomplete (skipped for the one before)."""
        ...

    @property
    def size_bytes(self) -> int:
        """The bytes it downloaded (incomplete ones included)."""
        ...

    @property
    def store_region(self) -> str | None:
        """The region the store's bytes came from (None: not known)."""
        ...


@runtime_checkable
class FetchesCheckpoints(Protocol):
    """A cloud whose replacement instances fetch the run's newest checkpoint from the durable
    store themselves (in the region, instead of through the controller's uplink)."""

    def fetch_checkpoint(
        self, instance: Instance, runner: Runner, remote_dir: str, at_least: int
    ) -> FetchedCheckpoint | None:
        """Have `instance` fetch the newest whole checkpoint of step `at_least` or later;
        None when the run has no store or the instance could not fetch."""
        ...


@runtime_checkable
class Warms(Protocol):
    """A cloud with clients worth making before a run is handed over (a prewarmed supervisor)."""

    def warm(self) -> None: ...


@runtime_checkable
class PacesPolls(Protocol):
    """A cloud that says how often a run's controller should look at it (EC2's answers move
    in seconds; the local cloud's at once)."""

    poll_s: float


class AttachedVolume(Protocol):
    """A data volume made for a run and attached to its instance."""

    @property
    def id(self) -> str: ...
    @property
    def zone(self) -> str: ...
    @property
    def size_gb(self) -> int: ...
    @property
    def created_at(self) -> float: ...


class CacheVolume(Protocol):
    """A run's cache volume for s3:// data, attached: an earlier one reused or a new one."""

    @property
    def volume(self) -> AttachedVolume: ...
    @property
    def reused(self) -> bool: ...
    @property
    def deleted(self) -> list[str]: ...


@runtime_checkable
class AttachesDataVolumes(Protocol):
    """A cloud with block volumes for data: an EBS snapshot's data set, or a cache volume the
    shards of an s3:// data set are staged onto once per zone, and what an instance type offers
    for data."""

    def attach_snapshot(self, instance: Instance, snapshot_id: str) -> AttachedVolume: ...

    def instance_storage(self, instance: Instance) -> TypeStorage | None: ...

    def attach_cache_volume(self, instance: Instance, size_gb: int) -> CacheVolume: ...

    @property
    def caches_data(self) -> bool:
        """Whether runs stage s3:// data onto a cache volume (the user's setting)."""
        ...
