"""One lab instance of a run, launched through spotrun's own AwsProvider, for tests that work
on a single host (SSH, SFTP, sync) rather than on a whole run."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from spotlab import Lab
from spotlab.hosts import Host
from spotrun.cloud.aws import AwsProvider
from spotrun.cloud.base import InstanceRequest
from spotrun.core.config import Resources, load_settings
from spotrun.remote.runner import Runner


@contextmanager
def one_instance(home: Path, lab: Lab, run_id: str) -> Iterator[tuple[Runner, Host]]:
    """A running c6i.large for `run_id`: spotrun's runner to it and the lab's host behind it;
    terminated afterwards."""
    provider = AwsProvider(load_settings(home))
    (offer,) = provider.offers(Resources(instance_type="c6i.large", zone="us-east-1a"))
    (instance,) = provider.wait_ready(provider.launch(InstanceRequest(run_id, offer)), 20)
    try:
        yield provider.runner(instance), lab.hosts.of(instance.id)
    finally:
        provider.terminate(run_id)
