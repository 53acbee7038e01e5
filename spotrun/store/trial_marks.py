"""Which runs their sweep pruned, read through the ledger's connection without the sweep
machinery (spotrun.store.sweeps pulls the cloud's offer models), so that `ls` stays quick."""

from __future__ import annotations

from collections.abc import Iterable

from spotrun.store.ledger import Ledger

PRUNED = "pruned"  # spotrun.store.sweeps.TrialStatus.PRUNED, as the ledger stores it


def pruned_runs(ledger: Ledger, run_ids: Iterable[str]) -> set[str]:
    """The ids among `run_ids` of trials that early stopping ended."""
    wanted = list(run_ids)
    if not wanted:
        return set()
    marks = ", ".join("?" for _ in wanted)
    rows = ledger.db.execute(
        f"SELECT run_id FROM sweep_trials WHERE status = ? AND run_id IN ({marks})",
        (PRUNED, *wanted),
    )
    return {row[0] for row in rows}
