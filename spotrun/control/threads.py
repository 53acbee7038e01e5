"""Training threads on a machine shared with other work (the local cloud).

A provider that can tell its free cores (`free_cores()`, spotrun.cloud.free_cores) gets a
recipe's trainer one thread per free core, never more than the recipe's own `threads`; a
`--set threads=N` from the user is kept as given. The choice and the reason go into the run's
events, and to the trainer as SPOTRUN_THREADS. A cloud instance is the run's alone: there the
recipe's setting (or torch's default, every core) holds.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from spotrun.cloud.free_cores import FreeCores
from spotrun.core.errors import SpotrunError
from spotrun.core.rundir import THREADS_VAR
from spotrun.recipes import get_recipe
from spotrun.store.ledger import Ledger, RunRecord


@runtime_checkable
class KnowsFreeCores(Protocol):
    def free_cores(self) -> FreeCores: ...


def user_set_threads(overrides: list[str]) -> bool:
    return any(item.split("=", 1)[0].strip() == "threads" for item in overrides)


def threads_env(provider: object, ledger: Ledger, run: RunRecord) -> dict[str, str]:
    """SPOTRUN_THREADS for a recipe's job on a shared machine, recorded as an event; {} where
    nothing is chosen."""
    if run.spec.job is not None or not isinstance(provider, KnowsFreeCores):
        return {}
    if user_set_threads(run.spec.overrides):
        ledger.add_event(run.id, "threads", "training threads as given with --set threads")
        return {}
    try:
        wanted = get_recipe(run.spec.recipe, run.spec.overrides).threads
    except SpotrunError:
        return {}  # the job itself reports a recipe that no longer resolves
    found = provider.free_cores()
    threads = found.free if wanted is None else min(wanted, found.free)
    cap = f"; the recipe asks for up to {wanted}" if wanted is not None else ""
    plural = "s" if threads != 1 else ""
    ledger.add_event(
        run.id, "threads", f"training on {threads} thread{plural}: {found.describe()}{cap}"
    )
    return {THREADS_VAR: str(threads)}
