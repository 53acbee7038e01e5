"""The embedded default cloud: the run's one "instance" is this machine.

It has the same life as a cloud instance, kept as a small record under SPOTRUN_HOME so that
`describe` and `terminate` work from any process: launching writes the record, terminating
kills the run's tmux session (its processes die with the "instance", as on EC2) and marks the
record terminated. It costs nothing; its seconds are still recorded.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time

from spotrun.agent.session import kill_session, session_name
from spotrun.cloud.base import Instance, InstanceRequest, Offer
from spotrun.cloud.free_cores import FreeCores, free_cores
from spotrun.core.config import Resources, Settings
from spotrun.core.errors import UsageError
from spotrun.remote.local import LocalRunner
from spotrun.remote.runner import Runner


def local_gpu_count() -> int:
    """GPUs on this machine, from nvidia-smi (no torch import: it costs seconds)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


class LocalProvider:
    name = "local"
    shares_filesystem = True

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._records = settings.home / "local-instances"

    def free_cores(self) -> FreeCores:
        """The cores of this machine that other work leaves free now (training threads)."""
        return free_cores()

    def offers(self, resources: Resources) -> list[Offer]:
        gpus = local_gpu_count()
        if resources.gpus > gpus:
            raise UsageError(
                f"the local cloud is this machine, which has {gpus} GPU(s), but the run asks "
                f"for {resources.gpus}",
                hint="launch with --cloud aws, or ask for fewer GPUs (--set resources.gpus=0 runs "
                "on the CPU)",
            )
        if resources.nodes > 1:
            raise UsageError("the local cloud is one machine; --nodes above 1 needs --cloud aws")
        return [
            Offer(
                provider=self.name,
                instance_type="local",
                region="local",
                zone=socket.gethostname(),
                gpus=gpus,
                gpu_model=None,
                gpu_memory_gb=None,
                vcpus=os.cpu_count() or 1,
                memory_gb=_memory_gb(),
                spot_usd_per_hour=0.0,
                on_demand_usd_per_hour=0.0,
                market="local",
            )
        ]

    def launch(self, request: InstanceRequest) -> list[Instance]:
        known = self.describe(request.run_id)
        existing = [i for i in known if i.is_live]
        if existing:
            return existing
        instance = Instance(
            id=_instance_id(request.run_id, known),
            run_id=request.run_id,
            provider=self.name,
            instance_type="local",
            region="local",
            zone=request.offer.zone,
            market="local",
            state="running",
            address="127.0.0.1",
            launched_at=time.time(),
        )
        self._write(instance)
        return [instance]

    def describe(self, run_id: str) -> list[Instance]:
        path = self._records / f"{run_id}.json"
        if not path.exists():
            return []
        return [Instance(**json.loads(path.read_text()))]

    def wait_ready(self, instances: list[Instance], timeout_s: float) -> list[Instance]:
        return instances

    def terminate(self, run_id: str) -> list[Instance]:
        kill_session(session_name(run_id))
        ended = []
        for inst in self.describe(run_id):
            if inst.is_live:
                inst = Instance(**{**inst.__dict__, "state": "terminated"})
                self._write(inst)
                ended.append(inst)
        return ended

    def terminate_instances(self, run_id: str, ids: list[str]) -> list[Instance]:
        mine = {i.id for i in self.describe(run_id)}
        return self.terminate(run_id) if mine & set(ids) else []

    def runner(self, instance: Instance) -> Runner:
        return LocalRunner()

    def run_dir(self, instance: Instance, run_id: str) -> str:
        return str(self.settings.runs_dir / run_id)

    def spotrun_command(self, instance: Instance) -> list[str]:
        return [sys.executable, "-m", "spotrun"]

    def bootstrap(self, instance: Instance, runner: Runner) -> None:
        return None  # this machine already runs spotrun

    def forget(self, run_id: str) -> None:
        """Drop an ended run's instance record (`spotrun rm`)."""
        (self._records / f"{run_id}.json").unlink(missing_ok=True)

    def _write(self, instance: Instance) -> None:
        self._records.mkdir(parents=True, exist_ok=True)
        path = self._records / f"{instance.run_id}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(instance.__dict__))
        os.replace(tmp, path)


def _instance_id(run_id: str, before: list[Instance]) -> str:
    """local-<run id>, and for a resumed run's next "instance" local-<run id>-2, -3, ...: every
    instance of a run keeps its own ledger row (its own launch, end and cost)."""
    if not before:
        return f"local-{run_id}"
    last = before[-1].id.removeprefix(f"local-{run_id}").lstrip("-")
    return f"local-{run_id}-{int(last) + 1 if last.isdigit() else 2}"


def _memory_gb() -> float:
    try:
        pages = os.sysconf("SC_PHYS_PAGES")
        page_size = os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return 0.0
    return round(pages * page_size / 2**30, 1)
