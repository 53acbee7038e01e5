"""A run's state moves, as the controller makes them: the ledger's compare-and-set, then the
ssh_config entries that follow the run's state (they appear as it runs, go as it leaves), and
the news of the move queued for whoever asked to be told (spotrun.notify)."""

from __future__ import annotations

from spotrun.control import ssh_config
from spotrun.core.errors import SpotrunError
from spotrun.core.runstates import RunState
from spotrun.notify.announce import announce_move
from spotrun.store.ledger import Ledger, RunRecord


class RunTransitions:
    def __init__(self, ledger: Ledger, run_id: str) -> None:
        self.ledger = ledger
        self.run_id = run_id

    def move(self, target: RunState, reason: str | None = None) -> RunRecord:
        """Move the run to `target` (StateError if another process moved it first)."""
        run = self.ledger.transition(self.run_id, target, reason)
        self._refresh_ssh_config()
        announce_move(self.ledger, run, reason)  # queued only; the controller's worker sends it
        return run

    def _refresh_ssh_config(self) -> None:
        try:
            ssh_config.refresh(self.ledger)
        except (OSError, SpotrunError) as exc:  # the run goes on; `spotrun ssh` rewrites it
            print(f"could not rewrite {ssh_config.FILE_NAME}: {exc}", flush=True)
