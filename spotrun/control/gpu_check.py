"""The GPU check every job passes before it starts: the GPUs torch sees on the instance against
the GPUs its type has.

An instance with a broken driver, or a CUDA torch cannot use, would train on its CPU at a GPU's
price (the trainer falls back to the CPU). `run.gpu_mismatch` says what a mismatch does: "fail"
the run (the default), "replace" the instance (MAX_GPU_REPLACEMENTS times at most, then fail),
or "warn" (an event, and the job runs anyway). An instance type without GPUs is not asked.
"""

from __future__ import annotations

import json
import shlex

from spotrun.cloud.base import Instance, Provider
from spotrun.cloud.plan import planned_gpus
from spotrun.control.run_instances import RunInstances
from spotrun.core.errors import RemoteError, SpotrunError
from spotrun.store.ledger import Ledger, RunRecord

GPU_EVENT = "gpu"  # the run's events of GPU mismatches: one per instance found wrong
MAX_GPU_REPLACEMENTS = 2  # instances replaced for a mismatch before the run fails instead
PROBE_TIMEOUT_S = 180.0  # importing torch and asking the driver, on a busy new instance


class GpuMismatchError(SpotrunError):
    """torch on the instance sees other than its type's GPUs; `replace`: the instance was
    ended and the run goes on on another (spotrun.control.recovery)."""

    def __init__(self, message: str, *, replace: bool) -> None:
        super().__init__(message)
        self.replace = replace


def _plural(count: int) -> str:
    return f"{count} GPU" if count == 1 else f"{count} GPUs"


def probe(provider: Provider, instance: Instance) -> dict[str, object]:
    """What `spotrun agent gpus` says on the instance."""
    command = shlex.join([*provider.spotrun_command(instance), "agent", "gpus"])
    result = provider.runner(instance).run(command, timeout_s=PROBE_TIMEOUT_S)
    result.check(f"asking {instance.id} for its GPUs")
    try:
        answer = json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError) as exc:
        raise RemoteError(f"{instance.id} answered its GPU count with {result.stdout!r}") from exc
    if not isinstance(answer, dict):
        raise RemoteError(f"{instance.id} answered its GPU count with {result.stdout!r}")
    return answer


def mismatch(expected: int, instance_type: str, answer: dict[str, object]) -> str | None:
    """The one-line problem, or None when torch sees the type's GPUs."""
    seen = answer.get("torch")
    if isinstance(seen, int) and seen == expected:
        return None
    sees = f"torch sees {seen}" if isinstance(seen, int) else "torch cannot be asked"
    why = [str(answer[k]) for k in ("torch_error", "nvidia_smi_error") if answer.get(k)]
    listed = answer.get("nvidia_smi")
    if isinstance(listed, int):
        why.append(f"nvidia-smi lists {listed}")
    detail = f" ({'; '.join(why)})" if why else ""
    return (
        f"the instance has {_plural(expected)} ({instance_type}) but {sees}: "
        f"driver or CUDA problem{detail}"
    )


class GpuCheck:
    """Before a job starts on an instance: its GPUs as torch sees them, against its type's."""

    def __init__(self, ledger: Ledger, provider: Provider, instances: RunInstances) -> None:
        self.ledger = ledger
        self.provider = provider
        self.instances = instances

    def check(self, run: RunRecord, instance: Instance) -> None:
        """Raises GpuMismatchError on a mismatch the setting does not let pass."""
        expected = planned_gpus(run.plan, instance.instance_type, run.spec.resources.gpus)
        if expected <= 0 or self.provider.shares_filesystem:  # no GPUs to miss; this machine
            return
        problem = mismatch(expected, instance.instance_type, probe(self.provider, instance))
        if problem is None:
            return
        setting = self.ledger.settings.run.gpu_mismatch
        problem = f"{instance.id}: {problem}"
        if setting == "warn":
            self.ledger.add_event(run.id, GPU_EVENT, f"{problem}; running anyway (warn)")
            return
        found = sum(1 for e in self.ledger.events(run.id) if e.kind == GPU_EVENT)
        if setting == "replace" and found < MAX_GPU_REPLACEMENTS:
            self.ledger.add_event(run.id, GPU_EVENT, f"{problem}; replacing the instance")
            why = "its GPUs are not usable"
            self.instances.mark_doomed(instance, why)
            self.instances.terminate([instance], f"{why}: {problem}")
            raise GpuMismatchError(f"{problem}; replacing it", replace=True)
        self.ledger.add_event(run.id, GPU_EVENT, problem)
        if setting == "replace":
            problem += f"; {found} instance(s) replaced for the same reason already"
        raise GpuMismatchError(
            f"{problem}; the job was not started (run.gpu_mismatch = {setting!r})",
            replace=False,
        )
