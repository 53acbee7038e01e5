"""SPOTRUN_HOME/ssh_config: one `Host spotrun-NAME` entry per live run's instance.

With `Include ~/.spotrun/ssh_config` at the top of ~/.ssh/config (or `ssh -F` on the file),
`ssh spotrun-NAME`, scp, rsync and editors that connect over ssh (VS Code Remote-SSH) reach a
running run's instance with its key and the host key spotrun pinned, strictly checked.

The file is a function of the ledger: the runs that are running, their live instances and
their addresses, and the pins in SPOTRUN_HOME/ssh. Supervisors rewrite it whenever a run starts
running or ends (and `spotrun ssh` before it connects), under a lock, so several supervisors
writing at once leave the entries of the latest ledger state. Node 0 of a run is
`spotrun-NAME`; the other nodes of a multi-node run are `spotrun-NAME-N`.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Protocol, runtime_checkable

from spotrun.cloud import get_provider
from spotrun.cloud.ssh_host import SshHost
from spotrun.control.run_instances import DOOMED
from spotrun.core.runstates import RunState
from spotrun.store.ledger import Ledger, RunRecord

FILE_NAME = "ssh_config"
ALIAS_PREFIX = "spotrun-"
LIVE_INSTANCE_STATES = ("pending", "running")


@runtime_checkable
class SshHosts(Protocol):
    """A provider whose instances the user's own ssh can reach (AWS; not the local cloud)."""

    def ssh_host(self, run_id: str, instance_id: str, address: str) -> SshHost | None: ...


def config_path(ledger: Ledger) -> Path:
    return ledger.settings.home / FILE_NAME


def alias(run: RunRecord, node: int = 0) -> str:
    return f"{ALIAS_PREFIX}{run.name}" if node == 0 else f"{ALIAS_PREFIX}{run.name}-{node}"


def entries(ledger: Ledger) -> list[tuple[str, SshHost]]:
    """(alias, host) for every live instance of every running run that ssh can reach."""
    providers: dict[str, object] = {}
    found = []
    for run in ledger.list_runs(include_all=True):
        if run.state is not RunState.RUNNING:
            continue
        if run.cloud not in providers:
            providers[run.cloud] = get_provider(run.cloud, ledger.settings)
        provider = providers[run.cloud]
        if not isinstance(provider, SshHosts):
            continue
        live = [  # a doomed one (left for EC2 to reclaim) is no longer the run's
            r
            for r in ledger.instances(run.id)
            if r.state in LIVE_INSTANCE_STATES and r.address and not r.details.get(DOOMED)
        ]
        for node, record in enumerate(sorted(live, key=lambda r: (r.node_index, r.id))):
            host = provider.ssh_host(run.id, record.id, record.address or "")
            if host is not None:
                found.append((alias(run, node), host))
    return found


def render(found: list[tuple[str, SshHost]]) -> str:
    head = (
        "# Written by spotrun as runs start and end; edits here are lost.\n"
        "# Use it with `ssh -F THIS_FILE spotrun-NAME`, or put `Include THIS_FILE` at the top\n"
        "# of ~/.ssh/config and `ssh spotrun-NAME` reaches a running run's instance.\n"
    )
    return head + "".join("\n" + host.config_entry(name) for name, host in found)


def refresh(ledger: Ledger) -> Path:
    """Rewrite the file from the ledger (atomically, under a lock); returns its path."""
    path = config_path(ledger)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(FILE_NAME + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        text = render(entries(ledger))
        if path.exists() and path.read_text() == text:
            return path
        tmp = path.with_name(f"{FILE_NAME}.{os.getpid()}.tmp")
        tmp.write_text(text)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    return path
